"""What the journal holds at each step, and what a run that ends early leaves behind."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from interlude import Agent, ToolUse, tool
from interlude.hooks import AfterModelCallEvent, AfterToolCallEvent, BeforeToolCallEvent
from interlude.sessions import MemoryStore, SessionUpdate
from interlude.testing import ScriptedModel

STORE_CHECKS: list[dict[str, Any]] = []


def _stored(store: MemoryStore, sid: str) -> Any:
    return asyncio.run(store.load(sid))


def _in_thread(fn: Any) -> Any:
    """Run ``fn`` on another thread (a hook runs inside the agent's event loop)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn).result()


def test_a_model_reply_and_each_tool_call_are_saved_before_anything_depends_on_them():
    store = MemoryStore()
    seen: dict[str, Any] = {}

    @tool
    def shout(text: str) -> str:
        """Shout.

        Args:
            text: What.
        """
        seen["in_body"] = _in_thread(lambda: _stored(store, "j"))
        return text.upper()

    def after_model(event: AfterModelCallEvent) -> None:
        seen.setdefault("after_model", _in_thread(lambda: _stored(store, "j")))

    def rewrite(event: BeforeToolCallEvent) -> None:
        event.tool_use = ToolUse(event.tool_use.id, "shout", {"text": "rewritten"})

    def after_tool(event: AfterToolCallEvent) -> None:
        seen["after_tool"] = _in_thread(lambda: _stored(store, "j"))

    agent = Agent(
        ScriptedModel([[ToolUse("t1", "shout", {"text": "hi"})], "HI"]),
        tools=[shout],
        session=store,
        session_id="j",
    )
    agent.hooks.add_callback(AfterModelCallEvent, after_model)
    agent.hooks.add_callback(BeforeToolCallEvent, rewrite)
    agent.hooks.add_callback(AfterToolCallEvent, after_tool)
    assert str(agent("shout hi")) == "HI"

    reply = seen["after_model"]
    assert reply.pause["step"]["kind"] == "after_model_call"  # before the hooks ran
    assert reply.pause["step"]["response"]["message"]["content"][0]["name"] == "shout"
    assert reply.claim is not None and reply.pause["interrupts"] == []
    [call] = seen["in_body"].pause["step"]["calls"]
    assert call["phase"] == "running" and call["active_use"]["input"] == {"text": "rewritten"}
    [call] = seen["after_tool"].pause["step"]["calls"]
    assert call["phase"] == "after" and call["result"]["content"][0]["text"] == "REWRITTEN"
    done = _stored(store, "j")
    assert done.claim is None and done.pause is None  # the run ended: claim let go


def test_answers_do_not_grow_the_pause():
    @tool
    def step(n: int) -> str:
        """A step.

        Args:
            n: Which.
        """
        return f"step {n}"

    def approve(event: BeforeToolCallEvent) -> None:
        event.interrupt("approve", reason={"n": event.tool_use.input["n"]})

    turns: list[Any] = [[ToolUse(f"t{n}", "step", {"n": n})] for n in range(400)] + ["done"]
    store = MemoryStore()
    agent = Agent(
        ScriptedModel(turns), tools=[step], session=store, session_id="many", max_cycles=500
    )
    agent.hooks.add_callback(BeforeToolCallEvent, approve)
    result = agent("go")
    sizes = []
    for _ in range(400):
        sizes.append(len(json.dumps(agent.export_state()["pause"])))
        result = agent.resume({result.interrupts[0].id: True})
    assert result.stop_reason == "end_turn"
    assert sizes[-1] <= sizes[0] * 1.05, (sizes[0], sizes[-1])
    assert len(agent.messages) == 802


def test_a_resume_that_fails_before_it_gets_anywhere_keeps_the_pause():
    store = MemoryStore()
    ran: list[str] = []

    @tool
    def act() -> str:
        """Act."""
        ran.append("x")
        return "done"

    boom = {"on": False}

    def approve(event: BeforeToolCallEvent) -> None:
        if boom["on"]:
            raise RuntimeError("the approval service is down")
        event.interrupt("approve")

    def build() -> Agent:
        a = Agent(
            ScriptedModel([[ToolUse("t1", "act", {})], "ok"]),
            tools=[act],
            session=store,
            session_id="keep",
        )
        a.hooks.add_callback(BeforeToolCallEvent, approve)
        return a

    agent = build()
    q = agent("go").interrupts[0]
    boom["on"] = True
    with pytest.raises(RuntimeError, match="down"):
        agent.resume({q.id: True})
    assert agent.is_paused and agent.interrupts == [q] and ran == []
    stored = _stored(store, "keep")
    assert stored.claim is None and stored.pause["interrupts"][0]["id"] == q.id
    boom["on"] = False
    fresh = Agent(ScriptedModel(["ok"]), tools=[act], session=store, session_id="keep")
    fresh.hooks.add_callback(BeforeToolCallEvent, approve)
    assert fresh.resume({q.id: True}).stop_reason == "end_turn" and ran == ["x"]


def test_a_session_written_before_the_journal_still_loads():
    """A run marker in the pause slot (the old format) from a process that died mid-batch:
    calls the resumed pause had finished keep their results, the others are closed."""
    store = MemoryStore()

    @tool
    def act(n: int) -> str:
        """Act.

        Args:
            n: Which.
        """
        return f"did {n}"

    def approve(event: BeforeToolCallEvent) -> None:
        if event.tool_use.input["n"] == 2:
            event.interrupt("approve")

    agent = Agent(
        ScriptedModel([[ToolUse("a", "act", {"n": 1}), ToolUse("b", "act", {"n": 2})]]),
        tools=[act],
        session=store,
        session_id="old",
    )
    agent.hooks.add_callback(BeforeToolCallEvent, approve)
    agent("go")
    stored = _stored(store, "old")
    pause = dict(stored.pause)
    marker = {"running": {"owner": "gone:1", "since": 1.0, "resumed": pause}}
    asyncio.run(
        store.save(
            "old",
            SessionUpdate(
                expected_version=stored.version,
                first_index=len(stored.messages),
                new_messages=[],
                pause=marker,
                pending=[],
                tools=stored.tools,
                format_version=1,
            ),
        )
    )
    fresh = Agent(ScriptedModel(["ok"]), tools=[act], session=store, session_id="old")
    assert not fresh.is_paused and not fresh.needs_recovery
    a, b = fresh.messages[2].content
    assert (a.status, a.text) == ("success", "did 1")
    assert b.status == "error" and "may or may not have run" in b.text
    assert str(fresh("and now?")) == "ok"


def test_a_run_whose_session_is_taken_over_stops_with_a_conflict():
    """If another process takes the session over (this one's loop was blocked past the lease,
    say), the next renewal finds it and the run stops instead of writing over the new owner."""
    from interlude.errors import SessionConflictError

    store = MemoryStore()

    @tool
    async def slow() -> str:
        """Take a while; meanwhile another process takes the session over."""
        stored = await store.load("taken")
        foreign = {
            "owner": "elsewhere:1",
            "machine": "elsewhere",
            "pid": 1,
            "since": 0.0,
            "expires_at": 9e9,
        }
        await store.save(
            "taken",
            SessionUpdate(
                expected_version=stored.version,
                first_index=len(stored.messages),
                new_messages=[],
                pause=stored.pause,
                pending=None,
                tools=stored.tools,
                format_version=stored.format_version,
                state=None,
                claim=foreign,
            ),
        )
        await asyncio.sleep(1.0)
        return "done"

    agent = Agent(
        ScriptedModel([[ToolUse("t1", "slow", {})], "never"]),
        tools=[slow],
        session=store,
        session_id="taken",
        session_lease=0.3,
    )
    with pytest.raises(SessionConflictError):
        agent("go")
    assert _stored(store, "taken").claim["owner"] == "elsewhere:1"  # not overwritten
