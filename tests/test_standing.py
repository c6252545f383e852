"""Where an agent stands is one committed value: what a hostile review of the redesign tried.

Each test is a scenario where the agent's conversation, as users and stores see it, could have
disagreed with the run's own copy, or a copy of an agent could have changed the original.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from interlude import Agent, Message, Text, ToolContext, ToolUse, tool
from interlude._agent import LOCAL, Lost, ToolOutcome, ToolRequest
from interlude.conversation import SlidingWindow
from interlude.errors import ConfigurationError
from interlude.hooks import AfterToolCallEvent, BeforeToolCallEvent
from interlude.sessions import MemoryStore
from interlude.testing import ScriptedModel


@tool
def lookup(x: int) -> str:
    """Look something up."""
    return f"found {x}"


def test_a_direct_tool_call_leaves_a_stored_conversation_alone() -> None:
    store = MemoryStore()
    Agent(ScriptedModel(["hi"]), tools=[lookup], session=store, session_id="s")("hello")
    again = Agent(ScriptedModel(["again"]), tools=[lookup], session=store, session_id="s")
    again.hooks.add_callback(AfterToolCallEvent, lambda e: None)
    assert again.tool.lookup(x=1).text == "found 1"  # before anything was loaded
    assert [m.text for m in again.messages] == ["hello", "hi"]
    assert again("more").stop_reason == "end_turn"
    assert [m.text for m in again.messages] == ["hello", "hi", "more", "again"]


async def test_a_direct_call_during_a_run_does_not_roll_the_conversation_back() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    @tool
    async def slow() -> str:
        """Wait."""
        started.set()
        await release.wait()
        return "slow done"

    agent = Agent(ScriptedModel(["hi"]), tools=[slow])
    agent.hooks.add_callback(AfterToolCallEvent, lambda e: None)
    direct = asyncio.ensure_future(agent.tool.slow.call_async())
    await started.wait()
    await agent.invoke_async("hello")  # the run ends while the direct call's body waits
    release.set()
    assert (await direct).text == "slow done"
    assert [m.text for m in agent.messages] == ["hello", "hi"]


def test_the_conversation_of_a_session_cannot_be_replaced() -> None:
    store = MemoryStore()
    agent = Agent(ScriptedModel(["hi"]), session=store, session_id="s")
    agent("my card number is 4111")
    with pytest.raises(ConfigurationError, match="append-only"):
        agent.messages = [Message("user", [Text("[redacted]")])]
    assert agent.messages[0].text == "my card number is 4111"


def test_a_new_conversation_forgets_what_the_manager_decided_about_the_old_one() -> None:
    turns = [Message("user" if i % 2 == 0 else "assistant", [Text(f"m{i}")]) for i in range(8)]
    agent = Agent(ScriptedModel(["a"]), messages=turns, conversation=SlidingWindow())
    data = agent.export_state()
    data["state"] = {"interlude.conversation": {"start": 6, "summary": "about m0-m5"}}
    agent.import_state(data)
    assert "interlude.conversation" in agent.export_state()["state"]
    agent.messages = []
    assert "interlude.conversation" not in agent.export_state()["state"]
    assert agent("fresh").stop_reason == "end_turn"
    assert [m.text for m in agent.messages] == ["fresh", "a"]


async def test_a_streamed_message_is_in_agent_messages_when_its_event_arrives() -> None:
    from interlude import MessageAppended

    agent = Agent(ScriptedModel(["hi"]))
    seen: list[bool] = []
    async for event in agent.stream_async("hello"):
        if isinstance(event, MessageAppended):
            seen.append(event.message in agent.messages)
    assert seen == [True, True]


def test_a_typed_answer_is_the_callers_own_copy() -> None:
    got: list[Any] = []

    def ask(event: BeforeToolCallEvent) -> None:
        answer = event.interrupt("approve", response_type=dict)
        answer["items"].append("mine")  # the callback's own copy
        got.append(answer)

    agent = Agent(ScriptedModel([[ToolUse("t1", "lookup", {"x": 1})], "ok"]), tools=[lookup])
    agent.hooks.add_callback(BeforeToolCallEvent, ask)
    [question] = agent("go").interrupts
    assert agent.resume({question.id: {"items": []}}).stop_reason == "end_turn"
    assert got == [{"items": ["mine"]}]
    assert agent.audit[0].answer == {"items": []}


def test_a_copy_made_from_a_spec_has_its_own_hooks() -> None:
    from dataclasses import replace

    original = Agent(ScriptedModel([]), name="support")
    copy = Agent.from_spec(replace(original.spec, name="billing"))
    copy.hooks.add_callback(BeforeToolCallEvent, lambda e: None)
    assert copy.hooks.has_callbacks(BeforeToolCallEvent)
    assert not original.hooks.has_callbacks(BeforeToolCallEvent)
    assert copy.name == "billing" and original.name == "support"


def test_a_call_lost_again_and_again_ends_with_an_error_result() -> None:
    """An executor that keeps losing an idempotent call does not loop forever."""

    class Losing:
        def __init__(self) -> None:
            self.tries = 0

        async def call_model(self, call: Any) -> Any:
            return await LOCAL.call_model(call)

        async def run_tool(self, request: ToolRequest) -> ToolOutcome:
            self.tries += 1
            return Lost(reason="the worker vanished")

    @tool(idempotent=True)
    def ping() -> str:
        """Ping."""
        return "pong"

    losing = Losing()
    agent = Agent(ScriptedModel([[ToolUse("t1", "ping", {})], "ok"]), tools=[ping], max_retries=2)
    agent.executor = losing
    assert agent("go").stop_reason == "end_turn"
    assert losing.tries == 3
    assert "lost again and again" in agent.messages[2].content[0].text


async def test_a_tool_body_changes_its_own_copy_of_agent_state_merged_when_it_is_done() -> None:
    """Local bodies follow the rule of bodies run elsewhere: each changes its own copy, and
    what it changed is applied at the step boundary."""
    both_started = asyncio.Event()
    seen: dict[str, Any] = {}
    started: list[str] = []

    @tool
    async def first() -> str:
        """First."""
        agent.state["first"] = 1
        started.append("first")
        if len(started) == 2:
            both_started.set()
        await both_started.wait()
        seen["first sees second"] = "second" in agent.state
        return "1"

    @tool
    async def second() -> str:
        """Second."""
        agent.state["second"] = 2
        del agent.state["old"]
        started.append("second")
        if len(started) == 2:
            both_started.set()
        await both_started.wait()
        seen["second sees first"] = "first" in agent.state
        return "2"

    def after(event: AfterToolCallEvent) -> None:
        seen[f"after {event.tool_use.name}"] = sorted(event.agent.state)

    calls = [ToolUse("a", "first", {}), ToolUse("b", "second", {})]
    agent = Agent(ScriptedModel([calls, "ok"]), tools=[first, second], state={"old": 0})
    agent.hooks.add_callback(AfterToolCallEvent, after)
    await agent.invoke_async("go")
    assert seen["first sees second"] is False and seen["second sees first"] is False
    assert agent.state == {"first": 1, "second": 2}
    assert "first" in seen["after first"] and "second" in seen["after second"]


def test_what_a_body_changed_before_it_asked_is_kept() -> None:
    @tool
    def count(ctx: ToolContext) -> str:
        """Count tries, then ask."""
        ctx.agent.state["tries"] = ctx.agent.state.get("tries", 0) + 1
        return "ok" if ctx.interrupt("go on?") else "no"

    agent = Agent(ScriptedModel([[ToolUse("t1", "count", {})], "done"]), tools=[count])
    [question] = agent("go").interrupts
    assert agent.state == {"tries": 1}
    agent.resume({question.id: True})
    assert agent.state == {"tries": 2}


def test_an_executor_cannot_change_the_answers_it_is_handed() -> None:
    """The answers in a tool request are a value: an executor that tries to clear them is
    refused, and the body still gets the answer given on resume (it does not ask again)."""

    @tool
    def pay(amount: int, context: ToolContext) -> str:
        """Pay."""
        if context.interrupt("confirm", {"amount": amount}) != "yes":
            return "declined"
        return f"paid {amount}"

    class Meddling:
        refused = 0

        async def call_model(self, call: Any) -> Any:
            return await LOCAL.call_model(call)

        async def run_tool(self, request: ToolRequest) -> ToolOutcome:
            for meddle in (
                lambda: request.answers.values.clear(),  # type: ignore[attr-defined]
                lambda: setattr(request.answers, "values", {}),
            ):
                try:
                    meddle()
                except (TypeError, AttributeError):
                    self.refused += 1
            return await LOCAL.run_tool(request)

    meddling = Meddling()
    model = ScriptedModel([[ToolUse("t1", "pay", {"amount": 10})], "done"])
    agent = Agent(model, tools=[pay])
    agent.executor = meddling
    paused = agent("pay 10")
    assert paused.stop_reason == "interrupt"
    result = agent.resume({paused.interrupts[0].id: "yes"})
    assert result.stop_reason == "end_turn"
    assert agent.messages[2].content[0].content[0].text == "paid 10"
    assert meddling.refused == 4  # both tries, on both runs of the body


def test_the_positional_call_changes_equal_their_keyword_forms() -> None:
    from interlude import ToolResult
    from interlude._agent._state import ToolCall

    use = ToolUse("t1", "lookup", {"x": 1})
    edited = ToolUse("t1", "lookup", {"x": 2})
    call = ToolCall(
        use,
        phase="after",
        retries=2,
        result=ToolResult("t1", content=[Text("old")]),
        exception=ValueError("x"),
        cancel_message="no",
        model_id="m1",
        checkpoint='{"k": 1}',
    )
    assert call.started(5.0, edited, lookup, "lookup") == call.but(
        phase="running", started_at=5.0, active_use=edited, tool=lookup, tool_name="lookup"
    )
    assert call.selecting(edited, lookup, "lookup") == call.but(
        active_use=edited, tool=lookup, tool_name="lookup"
    )
    assert call.selecting(None, None, None) == call.but(active_use=None, tool=None, tool_name=None)
    final = ToolResult("t1", content=[Text("new")])
    assert call.done(final) == call.but(
        result=final, phase="done", exception=None, cancel_message=None, checkpoint=None
    )
    assert (
        type(call.done(final)) is ToolCall and type(call.started(1.0, use, None, None)) is ToolCall
    )
