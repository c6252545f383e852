"""stream_async's typed events, and agent.cancel() from threads and tasks."""

import asyncio
import contextlib
import threading
import time

import pytest

from interlude import (
    Agent,
    AgentResult,
    InterruptRaised,
    Message,
    MessageAppended,
    RunFinished,
    Text,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolContext,
    ToolResult,
    ToolUse,
    ToolUseDelta,
    ToolUseStart,
    tool,
)
from interlude.errors import ScriptError
from interlude.testing import FunctionModel, ScriptedModel


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def collect(agent, prompt):
    return [event async for event in agent.stream_async(prompt)]


# --- streaming ----------------------------------------------------------------------------------


async def test_stream_yields_typed_events_in_order_and_ends_with_run_finished(assert_valid):
    model = ScriptedModel([[ToolUse("t1", "add", {"a": 1, "b": 2})], "The sum is 3."])
    agent = Agent(model, tools=[add])
    events = await collect(agent, "1+2?")
    assert [type(e) for e in events] == [
        MessageAppended,  # the prompt
        ToolUseStart,
        ToolUseDelta,
        MessageAppended,  # the tool use
        ToolCallStarted,
        ToolCallFinished,
        MessageAppended,  # the tool result
        TextDelta,
        MessageAppended,  # the reply
        RunFinished,
    ]
    final = events[-1]
    assert isinstance(final.result, AgentResult)
    assert final.result.stop_reason == "end_turn"
    assert str(final.result) == "The sum is 3."
    assert final.result.message is agent.messages[-1]
    assert [e.message for e in events if isinstance(e, MessageAppended)] == agent.messages
    start = events[1]
    assert (start.tool_use_id, start.name) == ("t1", "add")
    assert events[4].tool_use == ToolUse("t1", "add", {"a": 1, "b": 2})
    assert events[5].result.tool_use_id == "t1"
    assert events[5].result.status == "success"
    assert_valid(agent)


async def test_streamed_text_deltas_make_up_the_reply():
    reply = Message("assistant", [Text("Hello, "), Text("world")])
    agent = Agent(ScriptedModel([reply]))
    events = await collect(agent, "hi")
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "Hello, world"
    assert str(events[-1].result) == "Hello, world"
    assert sum(isinstance(e, RunFinished) for e in events) == 1


async def test_stream_reports_interrupts_before_run_finished():
    @tool
    def ask(ctx: ToolContext) -> str:
        """Asks a person."""
        return str(ctx.interrupt("confirm", reason="sure?"))

    agent = Agent(ScriptedModel([[ToolUse("t1", "ask", {})], "ok"]), tools=[ask])
    events = await collect(agent, "go")
    raised = [e for e in events if isinstance(e, InterruptRaised)]
    assert len(raised) == 1
    assert raised[0].interrupt.name == "confirm"
    assert isinstance(events[-1], RunFinished)
    assert events[-1].result.stop_reason == "interrupt"
    assert events[-1].result.interrupts == [raised[0].interrupt]
    assert events.index(raised[0]) == len(events) - 2


async def test_stream_raises_the_run_error():
    agent = Agent(ScriptedModel([]))
    with pytest.raises(ScriptError):
        await collect(agent, "go")


async def test_closing_the_stream_early_stops_the_run_and_keeps_agent_usable(assert_valid):
    @tool
    async def slow() -> str:
        """Slow."""
        await asyncio.sleep(30)
        return "late"

    agent = Agent(ScriptedModel([[ToolUse("t1", "slow", {})], "fresh start"]), tools=[slow])
    t0 = time.monotonic()
    async with contextlib.aclosing(agent.stream_async("go")) as stream:
        async for event in stream:
            if isinstance(event, ToolCallStarted):
                break
    assert time.monotonic() - t0 < 15  # not the tool's 30 s
    assert_valid(agent)
    assert agent.messages[-1].content[0].status == "error"
    result = await asyncio.wait_for(agent.invoke_async("again"), 15)
    assert str(result) == "fresh start"
    assert_valid(agent)


# --- cancel -------------------------------------------------------------------------------------


def test_cancel_from_another_thread_during_long_async_tool(assert_valid):
    started = threading.Event()
    finished = []

    @tool
    async def long_job() -> str:
        """Takes very long."""
        started.set()
        await asyncio.sleep(30)
        finished.append(True)
        return "finished"

    model = ScriptedModel([[ToolUse("t1", "long_job", {})], "ready for more"])
    agent = Agent(model, tools=[long_job])

    def canceller():
        if started.wait(60):
            agent.cancel()

    thread = threading.Thread(target=canceller)
    thread.start()
    t0 = time.monotonic()
    result = agent("start the job")
    elapsed = time.monotonic() - t0
    thread.join(60)
    assert elapsed < 15  # not the tool's 30 s
    assert result.stop_reason == "cancelled"
    assert result.interrupts == []
    assert finished == []
    assert not agent.is_paused
    assert_valid(agent)
    (res,) = agent.messages[-1].content
    assert res.tool_use_id == "t1"
    assert res.status == "error"
    assert "cancel" in res.text

    again = agent("are you there?")
    assert again.stop_reason == "end_turn"
    assert str(again) == "ready for more"
    assert_valid(agent)


async def test_cancel_from_another_task_during_invoke_async(assert_valid):
    started = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Waits."""
        started.set()
        await asyncio.sleep(30)
        return "never"

    agent = Agent(
        ScriptedModel([[ToolUse("t1", "wait_forever", {})], "next"]), tools=[wait_forever]
    )
    running = asyncio.create_task(agent.invoke_async("go"))
    await asyncio.wait_for(started.wait(), 60)
    agent.cancel()
    result = await asyncio.wait_for(running, 15)  # not the tool's 30 s
    assert result.stop_reason == "cancelled"
    assert str(result) == ""
    assert_valid(agent)
    result2 = await agent.invoke_async("again")
    assert result2.stop_reason == "end_turn"


async def test_cancel_during_concurrent_batch_keeps_finished_result(assert_valid):
    @tool
    async def slow() -> str:
        """Slow."""
        await asyncio.sleep(30)
        return "slow result"

    @tool
    async def fast() -> str:
        """Fast."""
        return "fast result"

    model = ScriptedModel([[ToolUse("s", "slow", {}), ToolUse("f", "fast", {})], "next"])
    agent = Agent(model, tools=[slow, fast], tool_executor="concurrent")
    events = []
    async for event in agent.stream_async("go"):
        events.append(event)
        if isinstance(event, ToolCallFinished) and event.result.tool_use_id == "f":
            agent.cancel()
    final = events[-1]
    assert isinstance(final, RunFinished)
    assert final.result.stop_reason == "cancelled"
    assert_valid(agent)
    slow_res, fast_res = agent.messages[-1].content
    assert fast_res == ToolResult("f", "success", [Text("fast result")])
    assert slow_res.tool_use_id == "s"
    assert slow_res.status == "error"
    assert "cancel" in slow_res.text
    assert isinstance(events[-2], MessageAppended)
    assert events[-2].message is agent.messages[-1]

    assert str(await agent.invoke_async("again")) == "next"
    assert_valid(agent)


async def test_cancel_in_sequential_batch_skips_remaining_tools(assert_valid):
    ran = []
    second_started = asyncio.Event()

    @tool
    async def step(n: int) -> str:
        """One step."""
        ran.append(n)
        if n == 2:
            second_started.set()
            await asyncio.sleep(30)
        return f"step {n} done"

    uses = [ToolUse(f"s{n}", "step", {"n": n}) for n in (1, 2, 3)]
    agent = Agent(ScriptedModel([uses, "next"]), tools=[step], tool_executor="sequential")
    running = asyncio.create_task(agent.invoke_async("go"))
    await asyncio.wait_for(second_started.wait(), 60)
    agent.cancel()
    result = await asyncio.wait_for(running, 15)  # not the tool's 30 s
    assert result.stop_reason == "cancelled"
    assert ran == [1, 2]
    assert_valid(agent)
    r1, r2, r3 = agent.messages[-1].content
    assert r1 == ToolResult("s1", "success", [Text("step 1 done")])
    assert (r2.status, r3.status) == ("error", "error")


async def test_cancel_during_model_call_drops_the_half_reply(assert_valid):
    in_model = asyncio.Event()
    calls = []

    async def reply(request):
        calls.append(1)
        if len(calls) == 1:
            in_model.set()
            await asyncio.sleep(30)
        return "answer"

    agent = Agent(FunctionModel(reply))
    running = asyncio.create_task(agent.invoke_async("first"))
    await asyncio.wait_for(in_model.wait(), 60)
    agent.cancel()
    result = await asyncio.wait_for(running, 15)  # not the model's 30 s
    assert result.stop_reason == "cancelled"
    assert result.message is None
    assert agent.messages == [Message("user", [Text("first")])]
    assert_valid(agent)
    assert str(await agent.invoke_async("second")) == "answer"
    assert_valid(agent)


def test_cancel_when_idle_does_nothing_and_does_not_leak_into_next_run():
    agent = Agent(ScriptedModel(["hello", "again"]))
    agent.cancel()
    assert agent("hi").stop_reason == "end_turn"
    agent.cancel()
    assert agent("hi").stop_reason == "end_turn"


def test_cancel_from_thread_while_sync_tool_runs(assert_valid):
    started = threading.Event()
    release = threading.Event()

    @tool
    def blocking() -> str:
        """Blocks in a worker thread until released."""
        started.set()
        release.wait(10)
        return "released"

    agent = Agent(ScriptedModel([[ToolUse("t1", "blocking", {})], "bye"]), tools=[blocking])

    def canceller():
        if started.wait(60):
            agent.cancel()

    thread = threading.Thread(target=canceller)
    thread.start()
    try:
        result = agent("go")  # returns cancelled while the tool's thread still blocks
    finally:
        release.set()  # then the worker thread may finish
        thread.join(60)
    assert result.stop_reason == "cancelled"
    assert_valid(agent)
    assert agent.messages[-1].content[0].status == "error"
    assert str(agent("again")) == "bye"
