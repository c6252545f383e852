"""Hooks: the exact event order, callback order, writable fields and read-only enforcement."""

import asyncio
import dataclasses

import pytest

from interlude import Agent, AgentResult, Message, Text, ToolResult, ToolUse, tool
from interlude.errors import (
    ConfigurationError,
    HookEventWriteError,
    InterludeError,
    RetryLimitError,
)
from interlude.hooks import (
    AfterInvocationEvent,
    AfterModelCallEvent,
    AfterToolCallEvent,
    BeforeInvocationEvent,
    BeforeModelCallEvent,
    BeforeToolCallEvent,
    HookEvent,
    HookProvider,
    HookRegistry,
    MessageAddedEvent,
)
from interlude.testing import FunctionModel, ScriptedModel

ALL_EVENTS = (
    BeforeInvocationEvent,
    AfterInvocationEvent,
    MessageAddedEvent,
    BeforeModelCallEvent,
    AfterModelCallEvent,
    BeforeToolCallEvent,
    AfterToolCallEvent,
)

ran = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    ran.append(("add", a, b))
    return a + b


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    ran.append(("multiply", a, b))
    return a * b


def one_tool_model(reply="the answer is 3"):
    return ScriptedModel([[ToolUse("t1", "add", {"a": 1, "b": 2})], reply])


def label(event):
    name = type(event).__name__.removesuffix("Event")
    if isinstance(event, MessageAddedEvent):
        m = event.message
        if m.tool_uses:
            kind = "tool use"
        elif any(isinstance(b, ToolResult) for b in m.content):
            kind = "tool result"
        else:
            kind = "user" if m.role == "user" else "reply"
        name = f"MessageAdded({kind})"
    return name


class Recorder:
    """A HookProvider recording every event."""

    def __init__(self):
        self.events = []

    def register_hooks(self, registry):
        for event_type in ALL_EVENTS:
            registry.add_callback(event_type, self.events.append)

    @property
    def labels(self):
        return [label(e) for e in self.events]


EXACT_ORDER = [
    "BeforeInvocation",
    "MessageAdded(user)",
    "BeforeModelCall",
    "AfterModelCall",
    "MessageAdded(tool use)",
    "BeforeToolCall",
    "AfterToolCall",
    "MessageAdded(tool result)",
    "BeforeModelCall",
    "AfterModelCall",
    "MessageAdded(reply)",
    "AfterInvocation",
]


def test_exact_event_order_for_one_tool_call(assert_valid):
    recorder = Recorder()
    assert isinstance(recorder, HookProvider)
    agent = Agent(one_tool_model(), tools=[add], hooks=[recorder])
    result = agent("what is 1 + 2?")
    assert recorder.labels == EXACT_ORDER
    assert all(e.agent is agent for e in recorder.events)
    assert all(isinstance(e, HookEvent) for e in recorder.events)
    assert recorder.events[0].prompt == Message("user", [Text("what is 1 + 2?")])
    added = [e.message for e in recorder.events if isinstance(e, MessageAddedEvent)]
    assert added == agent.messages
    assert recorder.events[-1].result == result
    assert_valid(agent)


async def test_event_order_is_the_same_for_async_invocation():
    recorder = Recorder()
    agent = Agent(one_tool_model(), tools=[add], hooks=[recorder])
    await agent.invoke_async("what is 1 + 2?")
    assert recorder.labels == EXACT_ORDER


def test_agent_hooks_is_the_registry_and_accepts_callbacks_later():
    agent = Agent(ScriptedModel(["hi"]))
    assert isinstance(agent.hooks, HookRegistry)
    seen = []
    agent.hooks.add_callback(BeforeModelCallEvent, lambda e: seen.append(e.agent))
    agent("hello")
    assert seen == [agent]


def test_async_callbacks_are_awaited():
    log = []

    async def slow_before(event):
        await asyncio.sleep(0.01)
        log.append("before-done")

    async def after(event):
        await asyncio.sleep(0)
        log.append(("after", event.result.content[0].value))

    agent = Agent(one_tool_model(), tools=[add])
    agent.hooks.add_callback(BeforeToolCallEvent, slow_before)
    agent.hooks.add_callback(AfterToolCallEvent, after)
    agent.hooks.add_callback(BeforeToolCallEvent, lambda e: log.append("sync-before"))
    agent("go")
    assert log == ["before-done", "sync-before", ("after", 3)]


def test_before_events_run_in_registration_order_after_events_in_reverse():
    log = []

    class Named:
        def __init__(self, name):
            self.name = name

        def register_hooks(self, registry):
            for event_type in ALL_EVENTS:
                registry.add_callback(
                    event_type, lambda e, n=self.name: log.append((type(e).__name__, n))
                )

    agent = Agent(one_tool_model(), tools=[add], hooks=[Named("A"), Named("B"), Named("C")])
    agent("go")

    def order(event_name):
        names = [n for ev, n in log if ev == event_name]
        return names[:3]

    for before in ("BeforeInvocationEvent", "BeforeModelCallEvent", "BeforeToolCallEvent"):
        assert order(before) == ["A", "B", "C"], before
    assert order("MessageAddedEvent") == ["A", "B", "C"]
    for after in ("AfterInvocationEvent", "AfterModelCallEvent", "AfterToolCallEvent"):
        assert order(after) == ["C", "B", "A"], after


def test_bad_hook_registration_is_rejected():
    agent = Agent(ScriptedModel([]))
    with pytest.raises(ConfigurationError):
        agent.hooks.add_callback(str, lambda e: None)
    with pytest.raises(ConfigurationError):
        agent.hooks.add_callback(BeforeModelCallEvent, "not callable")
    with pytest.raises(ConfigurationError):
        Agent(ScriptedModel([]), hooks=[object()])


# --- writable fields ----------------------------------------------------------------------------


def test_before_tool_call_can_replace_tool_use_to_change_arguments(assert_valid):
    ran.clear()

    def double_args(event):
        tu = event.tool_use
        event.tool_use = dataclasses.replace(tu, input={k: v * 10 for k, v in tu.input.items()})

    agent = Agent(one_tool_model(), tools=[add])
    agent.hooks.add_callback(BeforeToolCallEvent, double_args)
    agent("go")
    assert ran == [("add", 10, 20)]
    assert agent.messages[2].content[0].content[0].value == 30
    assert_valid(agent)


def test_before_tool_call_sees_selected_tool_and_can_swap_it():
    ran.clear()
    seen = []

    def swap(event):
        seen.append(event.tool)
        event.tool = multiply

    agent = Agent(one_tool_model(), tools=[add, multiply])
    agent.hooks.add_callback(BeforeToolCallEvent, swap)
    agent("go")
    assert seen == [add]
    assert ran == [("multiply", 1, 2)]
    assert agent.messages[2].content[0].content[0].value == 2


def test_before_tool_call_tool_is_none_for_unknown_tool_and_setting_none_skips_tool():
    ran.clear()
    seen = []
    model = ScriptedModel([[ToolUse("u", "nope", {}), ToolUse("t", "add", {"a": 1, "b": 1})], "x"])
    agent = Agent(model, tools=[add])

    def disable(event):
        seen.append((event.tool_use.name, event.tool))
        event.tool = None

    agent.hooks.add_callback(BeforeToolCallEvent, disable)
    agent("go")
    assert seen == [("nope", None), ("add", add)]
    assert ran == []
    assert [r.status for r in agent.messages[2].content] == ["error", "error"]


def test_before_tool_call_cancel_skips_tool_with_message(assert_valid):
    ran.clear()
    after_seen = []
    agent = Agent(one_tool_model(), tools=[add])
    agent.hooks.add_callback(BeforeToolCallEvent, lambda e: e.cancel("not allowed today"))
    agent.hooks.add_callback(AfterToolCallEvent, lambda e: after_seen.append(e.cancel_message))
    result = agent("go")
    assert result.stop_reason == "end_turn"
    assert ran == []
    (res,) = agent.messages[2].content
    assert res.status == "error"
    assert res.text == "not allowed today"
    assert after_seen == ["not allowed today"]
    assert_valid(agent)


def test_after_tool_call_can_replace_result():
    model = one_tool_model()

    def redact(event):
        event.result = ToolResult(event.tool_use.id, "success", [Text("[redacted]")])

    agent = Agent(model, tools=[add])
    agent.hooks.add_callback(AfterToolCallEvent, redact)
    agent("go")
    assert agent.messages[2].content == [ToolResult("t1", "success", [Text("[redacted]")])]
    assert model.requests[1].messages[-1].content[0].text == "[redacted]"


def test_after_tool_call_result_replacements_chain_in_reverse_order():
    agent = Agent(one_tool_model(), tools=[add])

    def tag(name):
        def cb(event):
            event.result = ToolResult(
                event.tool_use.id, "success", [Text(event.result.text + name)]
            )

        return cb

    agent.hooks.add_callback(AfterToolCallEvent, tag("first"))
    agent.hooks.add_callback(AfterToolCallEvent, tag("second"))
    agent("go")
    assert agent.messages[2].content[0].text == "secondfirst"


def test_after_invocation_can_replace_result():
    replacement = AgentResult(stop_reason="end_turn", message=Message("assistant", [Text("42")]))
    agent = Agent(ScriptedModel(["original"]))
    seen = []

    def replace(event):
        seen.append(str(event.result))
        event.result = replacement

    agent.hooks.add_callback(AfterInvocationEvent, replace)
    result = agent("go")
    assert seen == ["original"]
    assert result is replacement
    assert str(result) == "42"


def test_after_model_call_retry_calls_the_model_again_after_an_exception(assert_valid):
    calls = []
    failure = ConnectionError("flaky network")

    def reply(request):
        calls.append(request)
        if len(calls) == 1:
            raise failure
        return "recovered"

    seen = []

    def retry_on_error(event):
        seen.append((event.exception, event.response))
        if event.exception is not None:
            event.retry = True

    model = FunctionModel(reply)
    agent = Agent(model, max_retries=1)
    agent.hooks.add_callback(AfterModelCallEvent, retry_on_error)
    result = agent("hello")
    assert result.stop_reason == "end_turn"
    assert str(result) == "recovered"
    assert len(calls) == 2
    assert seen[0] == (failure, None)
    assert seen[1][0] is None
    assert seen[1][1].message == Message("assistant", [Text("recovered")])
    assert seen[1][1].stop_reason == "end_turn"
    assert agent.messages == [
        Message("user", [Text("hello")]),
        Message("assistant", [Text("recovered")]),
    ]
    assert_valid(agent)


def test_after_model_call_retry_can_reject_a_response():
    model = ScriptedModel(["bad answer", "good answer"])
    agent = Agent(model)

    def reject_bad(event):
        if event.response is not None and "bad" in event.response.message.text:
            event.retry = True

    agent.hooks.add_callback(AfterModelCallEvent, reject_bad)
    assert str(agent("q")) == "good answer"
    assert [m.text for m in agent.messages] == ["q", "good answer"]


def test_model_exception_without_retry_propagates(assert_valid):
    def reply(request):
        raise TimeoutError("model timed out")

    agent = Agent(FunctionModel(reply))
    with pytest.raises(TimeoutError, match="model timed out"):
        agent("hello")
    assert_valid(agent)


def test_model_retry_limit_raises_retry_limit_error(assert_valid):
    calls = []

    def reply(request):
        calls.append(1)
        raise ConnectionError("down")

    agent = Agent(FunctionModel(reply), max_retries=2)
    agent.hooks.add_callback(AfterModelCallEvent, lambda e: setattr(e, "retry", True))
    with pytest.raises(RetryLimitError) as info:
        agent("hello")
    assert "max_retries=2" in str(info.value)
    assert isinstance(info.value, InterludeError)
    assert len(calls) == 3
    assert_valid(agent)


# --- read-only fields ---------------------------------------------------------------------------


def capture_events():
    """One event of each type from a real run with one tool call."""
    captured = {}

    class Capture:
        def register_hooks(self, registry):
            for event_type in ALL_EVENTS:
                registry.add_callback(event_type, lambda e: captured.setdefault(type(e), e))

    agent = Agent(one_tool_model(), tools=[add], hooks=[Capture()])
    agent("go")
    assert set(captured) == set(ALL_EVENTS)
    return captured


READ_ONLY = [
    (BeforeInvocationEvent, "prompt"),
    (BeforeInvocationEvent, "agent"),
    (BeforeInvocationEvent, "something_new"),
    (AfterInvocationEvent, "agent"),
    (MessageAddedEvent, "message"),
    (BeforeModelCallEvent, "agent"),
    (BeforeModelCallEvent, "retry"),
    (AfterModelCallEvent, "response"),
    (AfterModelCallEvent, "exception"),
    (BeforeToolCallEvent, "cancel_message"),
    (BeforeToolCallEvent, "result"),
    (AfterToolCallEvent, "tool_use"),
    (AfterToolCallEvent, "tool"),
    (AfterToolCallEvent, "exception"),
    (AfterToolCallEvent, "cancel_message"),
]


@pytest.mark.parametrize(
    ("event_type", "field"), READ_ONLY, ids=[f"{t.__name__}.{f}" for t, f in READ_ONLY]
)
def test_writing_a_read_only_field_raises_hook_event_write_error(event_type, field):
    event = capture_events()[event_type]
    before = getattr(event, field, None)
    with pytest.raises(HookEventWriteError) as info:
        setattr(event, field, "new value")
    assert isinstance(info.value, AttributeError)
    assert isinstance(info.value, InterludeError)
    message = str(info.value)
    assert field in message and event_type.__name__ in message
    assert getattr(event, field, None) is before


WRONG_TYPES = [
    (AfterModelCallEvent, "retry", "yes"),
    (AfterToolCallEvent, "retry", 1),
    (AfterToolCallEvent, "result", "plain text"),
    (AfterInvocationEvent, "result", None),
    (BeforeToolCallEvent, "tool_use", {"id": "t1", "name": "add", "input": {}}),
    (BeforeToolCallEvent, "tool", "add"),
]


@pytest.mark.parametrize(
    ("event_type", "field", "value"),
    WRONG_TYPES,
    ids=[f"{t.__name__}.{f}" for t, f, _ in WRONG_TYPES],
)
def test_writing_a_wrong_type_to_a_writable_field_is_rejected(event_type, field, value):
    event = capture_events()[event_type]
    before = getattr(event, field)
    with pytest.raises(HookEventWriteError, match=field):
        setattr(event, field, value)
    assert getattr(event, field) is before


def test_write_error_inside_a_callback_fails_the_run_but_keeps_conversation_valid(assert_valid):
    def bad(event):
        event.tool_use = "nope"

    agent = Agent(one_tool_model(), tools=[add])
    agent.hooks.add_callback(BeforeToolCallEvent, bad)
    with pytest.raises(HookEventWriteError):
        agent("go")
    assert_valid(agent)
    assert agent.messages[-1].content[0].status == "error"
