"""Failure at awkward moments leaves the agent and its stored session consistent.

Each test breaks a run at one point (a cancelled caller, a cancel during the claim or the final
save, a failing save, a failing hook) and checks what the agent and a fresh agent built from the
store see: a valid conversation, the pause where it should be, nothing reported as not run when
it ran.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from interlude import Agent, Json, Message, ToolResult, ToolUse, tool
from interlude.errors import ModelThrottledError, SessionConflictError
from interlude.hooks import AfterModelCallEvent, AfterToolCallEvent, BeforeToolCallEvent
from interlude.sessions import MemoryStore, SessionUpdate
from interlude.testing import FunctionModel, ScriptedModel

RUNS: list[str] = []


@tool
async def record(item: str) -> str:
    """Record an item.

    Args:
        item: What to record.
    """
    RUNS.append(item)
    return f"recorded {item}"


@tool
async def slow(item: str) -> str:
    """Take a while.

    Args:
        item: What to do.
    """
    await asyncio.sleep(5)
    RUNS.append(item)
    return "late"


class HookedStore(MemoryStore):
    """A MemoryStore whose saves can be slowed down, observed or failed."""

    def __init__(self) -> None:
        super().__init__()
        self.on_save: Callable[[SessionUpdate], None] | None = None
        self.delay = 0.0

    async def save(self, session_id: str, update: SessionUpdate) -> int:
        if self.on_save is not None:
            self.on_save(update)
        if self.delay:
            await asyncio.sleep(self.delay)
        return await super().save(session_id, update)


def approve_hook(agent: Agent) -> None:
    agent.hooks.add_callback(BeforeToolCallEvent, lambda e: e.interrupt("approve"))


def make(store: Any, turns: list[Any], sid: str = "s") -> Agent:
    agent = Agent(ScriptedModel(turns), tools=[record, slow], session=store, session_id=sid)
    approve_hook(agent)
    return agent


def assert_valid(messages: list[Message]) -> None:
    for i, m in enumerate(messages):
        if m.role == "assistant" and m.tool_uses:
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            assert nxt is not None, f"message {i}: tool uses without results"
            ids = [b.tool_use_id for b in nxt.content if isinstance(b, ToolResult)]
            assert ids == [t.id for t in m.tool_uses]


@pytest.fixture(autouse=True)
def _clear() -> None:
    RUNS.clear()


async def test_caller_cancelled_before_the_run_starts_keeps_the_pause() -> None:
    agent = Agent(ScriptedModel([[ToolUse("t1", "record", {"item": "a"})], "done"]), tools=[record])
    approve_hook(agent)
    paused = await agent.invoke_async("go")
    before = agent.export_state()
    caller = asyncio.ensure_future(agent.resume_async({paused.interrupts[0].id: True}))
    await asyncio.sleep(0)  # the caller now waits on the run, which has not started
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert agent.is_paused and agent.export_state() == before and RUNS == []
    assert str(await agent.resume_async({paused.interrupts[0].id: True})) == "done"
    assert RUNS == ["a"]


async def test_cancel_during_the_session_claim_leaves_the_pause_in_place() -> None:
    store = HookedStore()
    paused = await asyncio.to_thread(make(store, [[ToolUse("t1", "record", {"item": "a"})]]), "go")
    agent = await asyncio.to_thread(make, store, ["done"])
    store.delay = 0.02
    store.on_save = lambda update: agent.cancel()  # the claim's save: no run task exists yet
    result = await agent.resume_async({paused.interrupts[0].id: True})
    assert result.stop_reason == "cancelled" and RUNS == []
    assert agent.is_paused
    store.on_save, store.delay = None, 0.0
    fresh = await asyncio.to_thread(make, store, ["done"])
    assert fresh.is_paused and fresh.interrupts == agent.interrupts
    assert [e.session_id for e in await store.pending_interrupts()] == ["s"]


async def test_caller_cancelled_during_the_claim_puts_the_stored_pause_back() -> None:
    store = HookedStore()
    paused = await asyncio.to_thread(make(store, [[ToolUse("t1", "record", {"item": "a"})]]), "go")
    agent = await asyncio.to_thread(make, store, ["done"])
    inside = asyncio.Event()
    store.delay = 0.05  # the save waits there, on this loop, once it has started
    store.on_save = lambda update: inside.set()  # the claim's save: the first
    caller = asyncio.ensure_future(agent.resume_async({paused.interrupts[0].id: True}))
    await asyncio.wait_for(inside.wait(), 60)  # inside the claim's save
    store.on_save = None
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    store.delay = 0.0
    fresh = await asyncio.to_thread(make, store, ["done"])
    assert fresh.is_paused, "the claim landed, then the caller went: the pause must be back"
    assert (await asyncio.to_thread(fresh.resume, {paused.interrupts[0].id: True})).stop_reason == (
        "end_turn"
    )
    assert RUNS == ["a"]


def test_a_failed_save_after_the_tool_use_message_leaves_no_open_tool_use() -> None:
    store = HookedStore()
    agent = make(store, [[ToolUse("t1", "record", {"item": "a"})]])

    def fail_on_the_tool_use(update: SessionUpdate) -> None:
        if any(m["role"] == "assistant" for m in update.new_messages):
            store.on_save = None
            raise SessionConflictError("session 's': simulated conflict")

    store.on_save = fail_on_the_tool_use
    with pytest.raises(SessionConflictError):
        agent("go")
    assert_valid(agent.messages)
    assert RUNS == []
    fresh = make(store, [])
    assert_valid(fresh.messages) and not fresh.is_paused  # type: ignore[func-returns-value]


def test_cancel_during_the_final_pause_save_keeps_agent_and_store_in_step() -> None:
    store = HookedStore()
    agent = make(store, [[ToolUse("t1", "record", {"item": "a"})]])

    def cancel_at_the_pause(update: SessionUpdate) -> None:
        if update.pause is not None and "running" not in update.pause:
            store.delay = 0.05
            agent.cancel()

    store.on_save = cancel_at_the_pause
    result = agent("go")
    store.on_save, store.delay = None, 0.0
    fresh = make(store, [])
    assert fresh.is_paused == agent.is_paused
    assert fresh.messages == agent.messages
    assert result.stop_reason == ("interrupt" if agent.is_paused else "cancelled")
    assert_valid(fresh.messages)


def test_a_failing_after_hook_does_not_report_finished_tools_as_not_run() -> None:
    def after(event: AfterToolCallEvent) -> None:
        if event.tool_use.id == "t1":
            raise RuntimeError("hook bug")

    agent = Agent(
        ScriptedModel(
            [[ToolUse("t1", "record", {"item": "a"}), ToolUse("t2", "slow", {"item": "b"})]]
        ),
        tools=[record, slow],
    )
    agent.hooks.add_callback(AfterToolCallEvent, after)
    with pytest.raises(RuntimeError, match="hook bug"):
        agent("go")
    assert RUNS == ["a"]
    first, second = agent.messages[-1].content
    assert isinstance(first, ToolResult) and isinstance(second, ToolResult)
    assert first.status == "error" and "the tool ran" in first.text  # not "not run"
    assert second.status == "error" and "may have had effects" in second.text


def test_a_model_error_keeps_its_attributes_across_processes() -> None:
    def failing(request: Any) -> str:
        raise ModelThrottledError("slow down", provider="p", status=429, retryable=True)

    def ask(event: AfterModelCallEvent) -> None:
        event.interrupt("what now?")

    agent = Agent(FunctionModel(failing))
    agent.hooks.add_callback(AfterModelCallEvent, ask)
    agent("go")
    state = json.loads(json.dumps(agent.export_state()))
    seen: list[BaseException | None] = []
    fresh = Agent(FunctionModel(lambda r: "ok"))

    def replay(event: AfterModelCallEvent) -> None:
        seen.append(event.exception)
        if event.exception is not None and event.interrupt("what now?") == "retry":
            event.retry = True

    fresh.hooks.add_callback(AfterModelCallEvent, replay)
    fresh.import_state(state)
    assert str(fresh.resume({fresh.interrupts[0].id: "retry"})) == "ok"
    exc = seen[0]
    assert isinstance(exc, ModelThrottledError)
    assert (exc.status, exc.retryable, exc.provider) == (429, True, "p")


def test_a_tool_result_that_is_not_json_becomes_an_error_result() -> None:
    @tool
    def weird() -> Json:
        """Return something JSON cannot hold."""
        return Json({1, 2})

    agent = Agent(ScriptedModel([[ToolUse("t1", "weird", {})], "ok"]), tools=[weird])
    agent("go")
    [result] = agent.messages[2].content
    assert isinstance(result, ToolResult) and result.status == "error"
    assert "not JSON-compatible" in result.text
    json.dumps(agent.export_state())


def test_sync_calls_leave_the_threads_event_loop_alone() -> None:
    mine = asyncio.new_event_loop()
    asyncio.set_event_loop(mine)
    try:
        Agent(ScriptedModel(["hi"]))("hello")
        assert asyncio.get_event_loop_policy().get_event_loop() is mine
    finally:
        asyncio.set_event_loop(None)
        mine.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_state_that_cannot_be_saved_fails_the_run_without_holding_the_session(
    kind: str, tmp_path: Any
) -> None:
    """agent.state holding something not JSON: the run fails saying so, what it did is saved
    (the reply), and the session's claim is let go: the same agent, its state mended, runs
    again at once (before, the session stayed claimed by the failed run for its lease)."""
    from interlude.errors import StateFormatError
    from interlude.sessions import open_store

    store = MemoryStore() if kind == "memory" else open_store(f"sqlite:///{tmp_path}/s.db")
    agent = Agent(ScriptedModel(["first reply", "second reply"]), session=store, session_id="s")
    agent.state["handle"] = object()
    with pytest.raises(StateFormatError, match="not JSON-compatible"):
        agent("go")
    stored = asyncio.run(store.load("s"))
    assert stored is not None and stored.claim is None
    assert [m["role"] for m in stored.messages] == ["user", "assistant"]
    del agent.state["handle"]
    assert str(agent("again")) == "second reply"


def test_a_session_may_be_given_as_a_store_url(tmp_path: Any) -> None:
    """``session="sqlite:///..."`` opens that store (before: AttributeError 'str' ... 'load')."""
    url = f"sqlite:///{tmp_path}/s.db"
    first = Agent(ScriptedModel(["one"]), session=url, session_id="s")
    assert str(first("hi")) == "one"
    again = Agent(ScriptedModel(["two"]), session=url, session_id="s")
    assert [m.role for m in again.messages] == ["user", "assistant"]
