"""The Agent loop: results, usage, the fake models, limits, stop reasons, errors and imports."""

import asyncio
import inspect
import json
import subprocess
import sys

import pytest

import interlude
from interlude import (
    Agent,
    AgentResult,
    Message,
    Text,
    ToolContext,
    ToolResult,
    ToolUse,
    Usage,
    errors,
    tool,
)
from interlude.errors import (
    AgentBusyError,
    ControlFlowSignal,
    CycleLimitError,
    InterludeError,
    InterruptSignal,
    ScriptError,
)
from interlude.models import Model, ModelStop, TextDelta, ToolUseDelta, ToolUseStart
from interlude.testing import FunctionModel, ScriptedModel


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


# --- running ------------------------------------------------------------------------------------


def test_sync_call_returns_agent_result(assert_valid):
    model = ScriptedModel(["Hello there!"])
    agent = Agent(model)
    result = agent("hi")
    assert isinstance(result, AgentResult)
    assert result.stop_reason == "end_turn"
    assert str(result) == "Hello there!"
    assert result.message == Message("assistant", [Text("Hello there!")])
    assert result.message is agent.messages[-1]
    assert result.interrupts == []
    assert agent.messages == [Message("user", [Text("hi")]), result.message]
    assert_valid(agent)


async def test_invoke_async_with_a_tool(assert_valid):
    model = ScriptedModel([[ToolUse("t1", "add", {"a": 2, "b": 3})], "It is 5."])
    agent = Agent(model, tools=[add])
    result = await agent.invoke_async("2+3?")
    assert result.stop_reason == "end_turn"
    assert str(result) == "It is 5."
    assert [m.role for m in agent.messages] == ["user", "assistant", "user", "assistant"]
    assert agent.messages[1].tool_uses == [ToolUse("t1", "add", {"a": 2, "b": 3})]
    assert agent.messages[2].content[0].status == "success"
    assert result.interrupts == []
    model.assert_done()
    assert_valid(agent)


def test_str_of_result_joins_all_text_blocks():
    reply = Message("assistant", [Text("Part one. "), Text("Part two.")])
    result = Agent(ScriptedModel([reply]))("go")
    assert str(result) == "Part one. Part two."


def test_model_receives_system_prompt_tool_specs_and_conversation():
    model = ScriptedModel([[ToolUse("t1", "add", {"a": 1, "b": 1})], "2"])
    agent = Agent(model, tools=[add], system_prompt="You are terse.")
    agent("1+1")
    assert len(model.requests) == 2
    first, second = model.requests
    assert first.system_prompt == "You are terse."
    assert [s.name for s in first.tool_specs] == ["add"]
    assert first.tool_specs[0] == add.spec
    assert list(first.messages) == [Message("user", [Text("1+1")])]
    assert list(second.messages) == agent.messages[:3]


def test_conversation_continues_across_prompts():
    model = ScriptedModel(["first reply", "second reply"])
    agent = Agent(model)
    agent("one")
    agent("two")
    assert [m.text for m in agent.messages] == ["one", "first reply", "two", "second reply"]
    assert len(model.requests[1].messages) == 3


def test_prompt_can_be_content_blocks():
    model = ScriptedModel(["ok"])
    agent = Agent(model)
    agent([Text("a"), Text("b")])
    assert agent.messages[0] == Message("user", [Text("a"), Text("b")])


def test_usage_is_summed_over_one_invocation_only():
    model = ScriptedModel(
        [
            [ToolUse("t1", "add", {"a": 1, "b": 1})],
            [ToolUse("t2", "add", {"a": 2, "b": 2})],
            "done",
            "again",
        ],
        usage=Usage(7, 3),
    )
    agent = Agent(model, tools=[add])
    first = agent("go")
    assert isinstance(first.usage, Usage)
    assert (first.usage.input_tokens, first.usage.output_tokens) == (21, 9)
    second = agent("more")
    assert (second.usage.input_tokens, second.usage.output_tokens) == (7, 3)


async def test_second_run_while_running_raises_agent_busy():
    release = asyncio.Event()

    async def reply(request):
        await release.wait()
        return "done"

    agent = Agent(FunctionModel(reply))
    running = asyncio.create_task(agent.invoke_async("first"))
    await asyncio.sleep(0.01)
    with pytest.raises(AgentBusyError):
        await agent.invoke_async("second")
    release.set()
    result = await asyncio.wait_for(running, 5)
    assert str(result) == "done"
    assert [m.text for m in agent.messages] == ["first", "done"]


# --- fake models --------------------------------------------------------------------------------


def test_scripted_model_beyond_script_raises_script_error(assert_valid):
    model = ScriptedModel([[ToolUse("t1", "add", {"a": 1, "b": 1})]])
    agent = Agent(model, tools=[add])
    with pytest.raises(ScriptError) as info:
        agent("go")
    assert isinstance(info.value, InterludeError)
    assert "no turn" in str(info.value)
    assert len(model.requests) == 2
    assert_valid(agent)


def test_scripted_model_reports_unused_turns():
    model = ScriptedModel(["one", "two", [ToolUse("t", "add", {"a": 1, "b": 2})], "three"])
    agent = Agent(model, tools=[add])
    with pytest.raises(ScriptError, match="4"):
        model.assert_done()
    agent("go")
    assert model.unused == ["two", [ToolUse("t", "add", {"a": 1, "b": 2})], "three"]
    with pytest.raises(ScriptError, match="3"):
        model.assert_done()
    agent("again")
    assert str(agent("last")) == "three"
    assert model.unused == []
    model.assert_done()


def test_scripted_model_full_message_turn():
    turn = Message("assistant", [Text("Let me add. "), ToolUse("t1", "add", {"a": 4, "b": 4})])
    model = ScriptedModel([turn, "8"])
    agent = Agent(model, tools=[add])
    agent("go")
    assert agent.messages[1] == turn


def test_scripted_model_rejects_bad_turns():
    with pytest.raises(ScriptError):
        ScriptedModel([42])


def test_function_model_sync_computes_reply_from_request():
    def reply(request):
        last = request.messages[-1]
        return f"you said {last.text!r} with {len(request.tool_specs)} tools"

    model = FunctionModel(reply)
    agent = Agent(model, tools=[add])
    assert str(agent("ping")) == "you said 'ping' with 1 tools"
    assert len(model.requests) == 1


async def test_function_model_async_can_drive_tool_calls():
    async def reply(request):
        await asyncio.sleep(0)
        last = request.messages[-1]
        if any(isinstance(b, ToolResult) for b in last.content):
            return f"sum={last.content[0].content[0].value}"
        return [ToolUse("t1", "add", {"a": 20, "b": 22})]

    agent = Agent(FunctionModel(reply), tools=[add])
    result = await agent.invoke_async("go")
    assert str(result) == "sum=42"


def test_shipped_fakes_meet_the_model_protocol():
    assert isinstance(ScriptedModel([]), Model)
    assert isinstance(FunctionModel(lambda r: "x"), Model)


# --- limits and stop reasons --------------------------------------------------------------------


def test_max_cycles_raises_cycle_limit_error_and_conversation_stays_valid(assert_valid):
    counter = iter(range(1000))

    def always_tools(request):
        return [ToolUse(f"t{next(counter)}", "add", {"a": 1, "b": 1})]

    model = FunctionModel(always_tools)
    agent = Agent(model, tools=[add], max_cycles=3)
    with pytest.raises(CycleLimitError) as info:
        agent("loop forever")
    assert "max_cycles=3" in str(info.value)
    assert len(model.requests) == 3
    assert_valid(agent)
    assert agent.messages[-1].role == "user"


class EventModel:
    """A minimal Model: plays raw model events, one list per call."""

    def __init__(self, *turns):
        self.turns = list(turns)
        self.calls = 0

    async def stream(self, messages, tool_specs, system_prompt):
        events = self.turns[self.calls]
        self.calls += 1
        for event in events:
            yield event


def test_max_tokens_stop_reason():
    model = EventModel([TextDelta("The answer is"), ModelStop("max_tokens", Usage(5, 100))])
    agent = Agent(model)
    result = agent("long question")
    assert result.stop_reason == "max_tokens"
    assert str(result) == "The answer is"
    assert result.usage == Usage(5, 100)


def test_tool_call_cut_off_by_max_tokens_is_dropped_and_not_run(assert_valid):
    ran = []

    @tool
    def record(x: int) -> int:
        """Record x."""
        ran.append(x)
        return x

    model = EventModel(
        [
            TextDelta("Calling a tool"),
            ToolUseStart("t1", "record"),
            ToolUseDelta("t1", '{"x": 1'),
            ModelStop("max_tokens"),
        ]
    )
    agent = Agent(model, tools=[record])
    result = agent("go")
    assert result.stop_reason == "max_tokens"
    assert ran == []
    assert model.calls == 1
    assert result.message == Message("assistant", [Text("Calling a tool")])
    assert agent.messages[-1] == result.message
    assert all(not m.tool_uses for m in agent.messages)
    assert_valid(agent)


# --- errors and interrupts ----------------------------------------------------------------------


def test_every_error_is_under_interlude_error_and_interrupt_signal_is_not_an_exception():
    names = [n for n in errors.__all__ if n not in ("ControlFlowSignal", "InterruptSignal")]
    assert names
    for name in names:
        cls = getattr(errors, name)
        assert inspect.isclass(cls) and issubclass(cls, InterludeError), name
    assert issubclass(InterludeError, Exception)
    assert issubclass(InterruptSignal, BaseException)
    assert issubclass(InterruptSignal, ControlFlowSignal)
    assert not issubclass(InterruptSignal, Exception)
    assert issubclass(errors.CycleLimitError, errors.LimitError)
    assert issubclass(errors.RetryLimitError, errors.LimitError)
    # A broken test script is not a model failure: hooks that retry model errors skip it.
    assert not issubclass(errors.ScriptError, errors.ModelError)
    assert issubclass(errors.StateFormatError, errors.StateError)
    assert issubclass(errors.UnknownToolError, AttributeError)
    assert issubclass(errors.HookEventWriteError, AttributeError)


def _swallowing_tools():
    @tool
    def approve_sync(amount: int, ctx: ToolContext) -> str:
        """Needs approval."""
        try:
            answer = ctx.interrupt("approval", reason={"amount": amount})
        except Exception:  # must not swallow the pause
            return "swallowed"
        return f"approved={answer}"

    @tool
    async def approve_async(amount: int, ctx: ToolContext) -> str:
        """Needs approval."""
        try:
            answer = ctx.interrupt("approval", reason={"amount": amount})
        except Exception:
            return "swallowed"
        return f"approved={answer}"

    return {"sync": approve_sync, "async": approve_async}


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_tool_that_catches_exception_around_interrupt_still_pauses(kind, assert_valid):
    approve = _swallowing_tools()[kind]
    model = ScriptedModel([[ToolUse("t1", approve.name, {"amount": 50})], "paid"])
    agent = Agent(model, tools=[approve])
    result = agent("pay")
    assert result.stop_reason == "interrupt"
    assert result.message is None
    assert str(result) == ""
    (interrupt,) = result.interrupts
    assert interrupt.name == "approval"
    assert interrupt.reason == {"amount": 50}
    assert interrupt.tool_use == ToolUse("t1", approve.name, {"amount": 50})
    assert agent.is_paused
    assert len(model.requests) == 1

    resumed = agent.resume({interrupt.id: "yes"})
    assert resumed.stop_reason == "end_turn"
    assert resumed.interrupts == []
    assert str(resumed) == "paid"
    assert agent.messages[2].content == [ToolResult("t1", "success", [Text("approved=yes")])]
    assert_valid(agent)


# --- import cost --------------------------------------------------------------------------------


def test_import_interlude_loads_no_heavy_dependencies():
    heavy = ["pydantic", "openai", "anthropic", "boto3", "psycopg", "sqlite3", "asyncio"]
    code = (
        "import interlude, interlude.hooks, interlude.errors, interlude.models, sys, json\n"
        f"heavy = {heavy!r}\n"
        "loaded = sorted(m for m in sys.modules "
        "if any(m == h or m.startswith(h + '.') or m == '_' + h for h in heavy))\n"
        "print(json.dumps(loaded))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_version_and_top_level_names():
    assert interlude.__version__
    assert interlude.tool is tool
    assert interlude.TextDelta is TextDelta


async def test_a_signature_closes_a_reasoning_block() -> None:
    """Two signed reasoning blocks in a row stay two blocks, each with its own signature."""
    from collections.abc import AsyncIterator, Sequence

    from interlude import Reasoning, Text
    from interlude.models import ModelEvent, ModelStop, ReasoningDelta, TextDelta, ToolSpec

    class TwoThoughts:
        async def stream(
            self, messages: Sequence[Message], specs: Sequence[ToolSpec], system: str | None
        ) -> AsyncIterator[ModelEvent]:
            for event in (
                ReasoningDelta("first "),
                ReasoningDelta("thought"),
                ReasoningDelta("", "sig-1"),
                ReasoningDelta("", "sig-2"),
                TextDelta("answer"),
                ModelStop("end_turn"),
            ):
                yield event

    agent = Agent(TwoThoughts())
    await agent.invoke_async("think")
    assert agent.messages[-1].content == [
        Reasoning("first thought", "sig-1"),
        Reasoning("", "sig-2"),
        Text("answer"),
    ]
