"""@tool, argument validation, sync/async execution, executors, direct calls and retries."""

import asyncio
import threading
from typing import Literal

import pydantic
import pytest

import interlude
from interlude import (
    Agent,
    FunctionTool,
    Json,
    Text,
    ToolContext,
    ToolResult,
    ToolUse,
    tool,
)
from interlude.errors import (
    ConfigurationError,
    RetryLimitError,
    UnknownToolError,
)
from interlude.hooks import AfterToolCallEvent, BeforeToolCallEvent
from interlude.models import ModelStop, TextDelta, ToolUseDelta, ToolUseStart
from interlude.testing import FunctionModel, ScriptedModel


def results_of(agent, index=-2):
    """The ToolResults of the message at ``index`` (by default the one before the reply)."""
    return [b for b in agent.messages[index].content if isinstance(b, ToolResult)]


# --- spec from signature and docstring ----------------------------------------------------------


@tool
def get_weather(
    city: str, context: ToolContext, days: int = 1, units: Literal["c", "f"] = "c"
) -> str:
    """Get the weather forecast for a city.

    Args:
        city: Name of the city,
            e.g. "Paris".
        days (int): How many days to forecast.
        units: Temperature units.

    Returns:
        The forecast.
    """
    return f"{city}:{days}:{units}:{context.tool_use.id}"


def test_spec_comes_from_signature_and_google_docstring():
    spec = get_weather.spec
    assert isinstance(get_weather, FunctionTool)
    assert spec.name == "get_weather"
    assert spec.description == "Get the weather forecast for a city."
    schema = spec.input_schema
    assert schema["type"] == "object"
    props = schema["properties"]
    assert set(props) == {"city", "days", "units"}  # the ToolContext parameter is hidden
    assert props["city"]["type"] == "string"
    assert props["city"]["description"] == 'Name of the city, e.g. "Paris".'
    assert props["days"]["type"] == "integer"
    assert props["days"]["description"] == "How many days to forecast."
    assert props["days"].get("default") == 1
    assert props["units"]["enum"] == ["c", "f"]
    assert props["units"]["description"] == "Temperature units."
    assert schema["required"] == ["city"]
    assert "context" not in str(schema)


def test_tool_decorator_with_name_and_description_overrides():
    @tool(name="lookup_user", description="Find a user by id.")
    def find(user_id: int) -> str:
        """Ignored summary."""
        return f"user {user_id}"

    assert find.name == "lookup_user"
    assert find.spec.name == "lookup_user"
    assert find.spec.description == "Find a user by id."
    assert find.spec.input_schema["required"] == ["user_id"]

    model = ScriptedModel([[ToolUse("t1", "lookup_user", {"user_id": 7})], "ok"])
    agent = Agent(model, tools=[find])
    agent("who is 7?")
    assert [s.name for s in model.requests[0].tool_specs] == ["lookup_user"]
    assert results_of(agent)[0].content == [Text("user 7")]
    assert agent.tool.lookup_user(user_id=8).text == "user 8"


def test_docstring_without_args_section_and_plain_function_tool():
    def shout(word: str, times: int = 2) -> str:
        """Repeat a word loudly."""
        return (word.upper() + " ") * times

    model = ScriptedModel([[ToolUse("t1", "shout", {"word": "hi"})], "done"])
    agent = Agent(model, tools=[shout])  # undecorated functions are wrapped too
    agent("go")
    spec = model.requests[0].tool_specs[0]
    assert spec.description == "Repeat a word loudly."
    assert spec.input_schema["required"] == ["word"]
    assert results_of(agent)[0].text == "HI HI "


# --- validation ---------------------------------------------------------------------------------


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"a": "not a number", "b": 2}, "a"),
        ({"a": 1}, "b"),
        ({"a": 1, "b": 2, "c": 3}, "c"),
        ({"a": [1], "b": {"x": 1}}, "b"),
    ],
    ids=["wrong-type", "missing", "extra", "two-bad"],
)
def test_invalid_arguments_become_an_error_result_naming_the_field(arguments, field, assert_valid):
    model = ScriptedModel([[ToolUse("t1", "add", arguments)], "sorry"])
    agent = Agent(model, tools=[add])
    result = agent("add")
    assert result.stop_reason == "end_turn"  # not a crash
    (res,) = results_of(agent)
    assert res.status == "error"
    assert "add" in res.text
    assert field in res.text
    # the model reads the error in its next request
    assert model.requests[1].messages[-1].content == [res]
    assert_valid(agent)


def test_valid_arguments_are_coerced_and_passed():
    model = ScriptedModel([[ToolUse("t1", "add", {"a": 2, "b": "40"})], "42"])
    agent = Agent(model, tools=[add])
    agent("add")
    (res,) = results_of(agent)
    assert res.status == "success"
    assert res.content == [Json(42)]


# --- return values ------------------------------------------------------------------------------


class Point(pydantic.BaseModel):
    x: int
    label: str


@pytest.mark.parametrize(
    ("value", "content"),
    [
        ("hello", [Text("hello")]),
        ({"a": 1, "b": [True, None]}, [Json({"a": 1, "b": [True, None]})]),
        ([1, 2, "three"], [Json([1, 2, "three"])]),
        (7, [Json(7)]),
        (2.5, [Json(2.5)]),
        (Point(x=3, label="p"), [Json({"x": 3, "label": "p"})]),
    ],
    ids=["str", "dict", "list", "int", "float", "pydantic"],
)
def test_return_values_become_result_blocks(value, content):
    @tool
    def produce() -> object:
        """Produce a value."""
        return value

    model = ScriptedModel([[ToolUse("t1", "produce", {})], "ok"])
    agent = Agent(model, tools=[produce])
    agent("go")
    (res,) = results_of(agent)
    assert res == ToolResult("t1", "success", content)


def test_non_json_return_value_is_an_error_result_not_a_crash(assert_valid):
    @tool
    def weird() -> object:
        """Return something odd."""
        return object()

    model = ScriptedModel([[ToolUse("t1", "weird", {})], "ok"])
    agent = Agent(model, tools=[weird])
    assert agent("go").stop_reason == "end_turn"
    (res,) = results_of(agent)
    assert res.status == "error"
    assert "JSON" in res.text
    assert_valid(agent)


def test_exception_becomes_error_result_and_reaches_after_tool_hooks(assert_valid):
    boom = ValueError("the disk is on fire")

    @tool
    def explode() -> str:
        """Always fails."""
        raise boom

    seen = []
    model = ScriptedModel([[ToolUse("t1", "explode", {})], "I see it failed"])
    agent = Agent(model, tools=[explode])
    agent.hooks.add_callback(AfterToolCallEvent, lambda e: seen.append((e.exception, e.result)))
    result = agent("go")
    assert result.stop_reason == "end_turn"
    (res,) = results_of(agent)
    assert res.status == "error"
    assert "ValueError" in res.text and "the disk is on fire" in res.text
    assert seen[0][0] is boom
    assert seen[0][1] == res
    assert_valid(agent)


def test_successful_tool_has_no_exception_in_after_hook():
    seen = []
    model = ScriptedModel([[ToolUse("t1", "add", {"a": 1, "b": 1})], "2"])
    agent = Agent(model, tools=[add])
    agent.hooks.add_callback(AfterToolCallEvent, lambda e: seen.append(e.exception))
    agent("go")
    assert seen == [None]


# --- sync and async tools -----------------------------------------------------------------------


async def test_sync_tool_runs_in_worker_thread_and_does_not_block_the_loop():
    where = {}

    running = threading.Event()  # the tool has started
    ticked = threading.Event()  # the loop ticked five times since

    @tool
    def blocking() -> str:
        """Blocks until the loop has ticked five times (it cannot, if the tool blocks it)."""
        where["thread"] = threading.get_ident()
        running.set()
        ticked.wait(30)
        return "slept"

    ticks = 0
    stop = asyncio.Event()

    async def ticker():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            if running.is_set() and ticks - during[0] >= 5:
                ticked.set()
            if not running.is_set():
                during[0] = ticks
            await asyncio.sleep(0.01)

    during = [0]  # the tick count when the tool started

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    start_ticks = ticks
    model = ScriptedModel([[ToolUse("t1", "blocking", {})], "done"])
    agent = Agent(model, tools=[blocking])
    result = await agent.invoke_async("go")
    loop_ticks = ticks - start_ticks
    stop.set()
    await ticking
    assert result.stop_reason == "end_turn"
    assert where["thread"] != threading.get_ident()
    assert loop_ticks >= 5 and ticked.is_set(), f"the loop only ticked {loop_ticks} times"


async def test_concurrent_sync_sleep_does_not_delay_async_tool():
    finished = {}

    async_done = threading.Event()

    @tool
    def slow_sync() -> str:
        """Blocks its thread until the async tool has finished (it could not, if blocked)."""
        finished["waited"] = async_done.wait(30)
        finished["sync"] = len(finished)
        return "sync done"

    @tool
    async def quick_async() -> str:
        """Finishes quickly."""
        await asyncio.sleep(0.01)
        finished["async"] = len(finished)
        async_done.set()
        return "async done"

    model = ScriptedModel(
        [[ToolUse("s", "slow_sync", {}), ToolUse("a", "quick_async", {})], "both done"]
    )
    agent = Agent(model, tools=[slow_sync, quick_async])
    await agent.invoke_async("go")
    assert finished["waited"] and finished["async"] < finished["sync"]  # async first
    assert [r.text for r in results_of(agent)] == ["sync done", "async done"]


async def test_async_tool_is_awaited_on_the_loop():
    where = {}

    @tool
    async def on_loop(n: int) -> int:
        """Doubles n."""
        where["thread"] = threading.get_ident()
        await asyncio.sleep(0)
        return n * 2

    model = ScriptedModel([[ToolUse("t1", "on_loop", {"n": 21})], "42"])
    agent = Agent(model, tools=[on_loop])
    await agent.invoke_async("go")
    assert where["thread"] == threading.get_ident()
    assert results_of(agent)[0].content == [Json(42)]


async def test_inline_sync_tool_runs_on_the_loop_thread():
    where = {}

    @tool(inline=True)
    def lookup(key: str, ctx: ToolContext) -> str:
        """Reads a dict in memory."""
        where["thread"] = threading.get_ident()
        where["tool_use"] = ctx.tool_use.id
        return {"a": "apple"}[key]

    model = ScriptedModel([[ToolUse("t1", "lookup", {"key": "a"})], "done"])
    agent = Agent(model, tools=[lookup])
    await agent.invoke_async("go")
    assert where == {"thread": threading.get_ident(), "tool_use": "t1"}
    assert results_of(agent)[0].text == "apple"
    assert lookup.inline and not tool(lambda: None).inline


def test_inline_sync_tool_errors_and_invalid_input_are_results():
    @tool(inline=True)
    def divide(a: int, b: int) -> float:
        """Divides."""
        return a / b

    model = ScriptedModel(
        [[ToolUse("t1", "divide", {"a": 1, "b": 0}), ToolUse("t2", "divide", {"a": "x"})], "ok"]
    )
    agent = Agent(model, tools=[divide])
    agent("go")
    first, second = results_of(agent)
    assert first.status == "error" and "division by zero" in first.text
    assert second.status == "error" and "invalid arguments" in second.text


def test_inline_is_refused_where_it_means_nothing():
    async def fetch() -> str:
        return "x"

    with pytest.raises(ConfigurationError, match="inline=True is for a plain def"):
        tool(inline=True)(fetch)
    with pytest.raises(ConfigurationError, match="inline is True or False"):
        tool(inline="yes")(lambda: None)  # type: ignore[arg-type]


def test_tool_context_receives_tool_use_and_agent():
    seen = {}

    @tool
    def inspect_ctx(x: int, ctx: ToolContext) -> str:
        """Looks at its context."""
        seen["tool_use"], seen["agent"] = ctx.tool_use, ctx.agent
        return "ok"

    assert set(inspect_ctx.spec.input_schema["properties"]) == {"x"}
    model = ScriptedModel([[ToolUse("t1", "inspect_ctx", {"x": 5})], "ok"])
    agent = Agent(model, tools=[inspect_ctx])
    agent("go")
    assert seen["tool_use"] == ToolUse("t1", "inspect_ctx", {"x": 5})
    assert seen["agent"] is agent


def test_tool_context_annotation_written_as_string_is_recognised():
    """`ctx: interlude.ToolContext` under `from __future__ import annotations` is a string."""
    seen = {}

    def uses_ctx(x: int, ctx: "interlude.ToolContext") -> str:
        """Looks at its context."""
        seen["ctx"] = ctx
        return "ok"

    wrapped = tool(uses_ctx)
    assert set(wrapped.spec.input_schema["properties"]) == {"x"}
    model = ScriptedModel([[ToolUse("t1", "uses_ctx", {"x": 1})], "ok"])
    agent = Agent(model, tools=[wrapped])
    agent("go")
    assert isinstance(seen.get("ctx"), ToolContext)


# --- the model asks for something odd -----------------------------------------------------------


def test_unknown_tool_gives_error_result_naming_the_tool(assert_valid):
    model = ScriptedModel([[ToolUse("t1", "teleport", {"to": "mars"})], "cannot"])
    agent = Agent(model, tools=[add])
    assert agent("go").stop_reason == "end_turn"
    (res,) = results_of(agent)
    assert res.status == "error"
    assert "teleport" in res.text
    assert_valid(agent)


class EventModel:
    """A model that plays raw model events, one list per call."""

    def __init__(self, *turns):
        self.turns = list(turns)
        self.calls = 0

    async def stream(self, messages, tool_specs, system_prompt):
        events = self.turns[self.calls]
        self.calls += 1
        for event in events:
            yield event


def test_malformed_json_arguments_give_error_result_and_tool_not_run(assert_valid):
    ran = []

    @tool
    def echo(x: int) -> int:
        """Echo."""
        ran.append(x)
        return x

    model = EventModel(
        [
            ToolUseStart("t1", "echo"),
            ToolUseDelta("t1", '{"x": 1'),
            ModelStop("tool_use"),
        ],
        [TextDelta("bad args, sorry"), ModelStop("end_turn")],
    )
    agent = Agent(model, tools=[echo])
    result = agent("go")
    assert result.stop_reason == "end_turn"
    assert ran == []
    (res,) = results_of(agent)
    assert res.status == "error"
    assert "not valid JSON" in res.text
    assert "echo" in res.text
    assert_valid(agent)


def test_tool_arguments_split_over_many_deltas_are_joined():
    model = EventModel(
        [
            ToolUseStart("t1", "add"),
            ToolUseDelta("t1", '{"a"'),
            ToolUseDelta("t1", ": 4, "),
            ToolUseDelta("t1", '"b": 5}'),
            ModelStop("tool_use"),
        ],
        [TextDelta("9"), ModelStop("end_turn")],
    )
    agent = Agent(model, tools=[add])
    agent("go")
    assert agent.messages[1].tool_uses == [ToolUse("t1", "add", {"a": 4, "b": 5})]
    assert results_of(agent)[0].content == [Json(9)]


# --- direct calls -------------------------------------------------------------------------------


def test_direct_tool_call_returns_result_and_is_not_recorded():
    model = ScriptedModel([])
    agent = Agent(model, tools=[add, get_weather])
    res = agent.tool.add(a=2, b=3)
    assert isinstance(res, ToolResult)
    assert res.status == "success"
    assert res.content == [Json(5)]
    weather = agent.tool.get_weather(city="Oslo", days=3)
    assert weather.text.startswith("Oslo:3:c:")
    assert agent.messages == []
    assert model.requests == []


def test_direct_tool_call_with_bad_arguments_returns_error_result():
    agent = Agent(ScriptedModel([]), tools=[add])
    res = agent.tool.add(a="x", b=1)
    assert res.status == "error"
    assert "a" in res.text
    assert agent.messages == []


def test_direct_call_of_async_tool():
    @tool
    async def later(n: int) -> str:
        """Async."""
        await asyncio.sleep(0)
        return f"n={n}"

    agent = Agent(ScriptedModel([]), tools=[later])
    assert agent.tool.later(n=4).text == "n=4"


def test_unknown_direct_tool_raises_unknown_tool_error():
    agent = Agent(ScriptedModel([]), tools=[add])
    with pytest.raises(UnknownToolError, match="nope"):
        agent.tool.nope(x=1)
    with pytest.raises(AttributeError):
        agent.tool.nope  # noqa: B018
    assert not hasattr(agent.tool, "nope")
    assert hasattr(agent.tool, "add")


# --- executors ----------------------------------------------------------------------------------


def _counting_tools(log):
    state = {"active": 0, "max_active": 0}

    def make(name, delay):
        @tool(name=name)
        async def worker() -> str:
            """Work."""
            state["active"] += 1
            state["max_active"] = max(state["max_active"], state["active"])
            log.append(("start", name))
            await asyncio.sleep(delay)
            log.append(("end", name))
            state["active"] -= 1
            return f"{name} result"

        return worker

    return state, [make("first", 0.06), make("second", 0.03), make("third", 0.0)]


async def test_concurrent_executor_overlaps_and_records_in_tool_use_order(assert_valid):
    log = []
    state, tools = _counting_tools(log)
    uses = [ToolUse("1", "first", {}), ToolUse("2", "second", {}), ToolUse("3", "third", {})]
    agent = Agent(ScriptedModel([uses, "done"]), tools=tools)  # concurrent is the default
    assert agent.tool_executor == "concurrent"
    await agent.invoke_async("go")
    assert state["max_active"] == 3
    ends = [name for kind, name in log if kind == "end"]
    assert ends == ["third", "second", "first"]  # later tools finished first...
    results = results_of(agent)
    assert [r.tool_use_id for r in results] == ["1", "2", "3"]  # ...but are recorded in order
    assert [r.text for r in results] == ["first result", "second result", "third result"]
    assert_valid(agent)


async def test_concurrent_tools_really_run_at_the_same_time():
    a_in, b_in = asyncio.Event(), asyncio.Event()

    @tool
    async def alpha() -> str:
        """Waits for beta."""
        a_in.set()
        await asyncio.wait_for(b_in.wait(), 2)
        return "alpha met beta"

    @tool
    async def beta() -> str:
        """Waits for alpha."""
        b_in.set()
        await asyncio.wait_for(a_in.wait(), 2)
        return "beta met alpha"

    uses = [ToolUse("a", "alpha", {}), ToolUse("b", "beta", {})]
    agent = Agent(ScriptedModel([uses, "done"]), tools=[alpha, beta], tool_executor="concurrent")
    await agent.invoke_async("go")
    assert [(r.status, r.text) for r in results_of(agent)] == [
        ("success", "alpha met beta"),
        ("success", "beta met alpha"),
    ]


async def test_sequential_executor_runs_one_at_a_time_in_order(assert_valid):
    log = []
    state, tools = _counting_tools(log)
    uses = [ToolUse("1", "first", {}), ToolUse("2", "second", {}), ToolUse("3", "third", {})]
    agent = Agent(ScriptedModel([uses, "done"]), tools=tools, tool_executor="sequential")
    await agent.invoke_async("go")
    assert state["max_active"] == 1
    assert log == [
        ("start", "first"),
        ("end", "first"),
        ("start", "second"),
        ("end", "second"),
        ("start", "third"),
        ("end", "third"),
    ]
    assert [r.tool_use_id for r in results_of(agent)] == ["1", "2", "3"]
    assert_valid(agent)


# --- retries ------------------------------------------------------------------------------------


def test_after_tool_retry_reruns_the_tool(assert_valid):
    runs = []

    @tool
    def flaky() -> str:
        """Fails the first time."""
        runs.append(1)
        if len(runs) == 1:
            raise ConnectionError("try again")
        return "worked"

    def retry_on_error(event):
        if event.exception is not None:
            event.retry = True

    before = []
    model = ScriptedModel([[ToolUse("t1", "flaky", {})], "done"])
    agent = Agent(model, tools=[flaky])
    agent.hooks.add_callback(AfterToolCallEvent, retry_on_error)
    agent.hooks.add_callback(BeforeToolCallEvent, lambda e: before.append(e.tool_use.id))
    result = agent("go")
    assert result.stop_reason == "end_turn"
    assert len(runs) == 2
    assert before == ["t1", "t1"]
    assert results_of(agent) == [ToolResult("t1", "success", [Text("worked")])]
    assert_valid(agent)


@pytest.mark.parametrize("executor", ["concurrent", "sequential"])
def test_tool_retry_limit_raises_and_keeps_conversation_valid(executor, assert_valid):
    runs = []

    @tool
    def never_good() -> str:
        """Always unsatisfying."""
        runs.append(1)
        return "meh"

    @tool
    def fine() -> str:
        """Fine."""
        return "fine"

    def always_retry(event):
        if event.tool_use.name == "never_good":
            event.retry = True

    uses = [ToolUse("g", "never_good", {}), ToolUse("f", "fine", {})]
    model = ScriptedModel([uses, "unreachable"])
    agent = Agent(model, tools=[never_good, fine], tool_executor=executor, max_retries=2)
    agent.hooks.add_callback(AfterToolCallEvent, always_retry)
    with pytest.raises(RetryLimitError) as info:
        agent("go")
    message = str(info.value)
    assert "never_good" in message and "max_retries=2" in message
    assert len(runs) == 3  # the first run and two retries
    assert_valid(agent)
    assert [r.tool_use_id for r in agent.messages[-1].content] == ["g", "f"]


# --- configuration ------------------------------------------------------------------------------


def test_bad_configuration_is_rejected():
    with pytest.raises(ConfigurationError, match="tool_executor"):
        Agent(ScriptedModel([]), tool_executor="parallel")
    with pytest.raises(ConfigurationError, match="add"):
        Agent(ScriptedModel([]), tools=[add, add])
    with pytest.raises(ConfigurationError):

        @tool
        def variadic(*args: int) -> int:
            return sum(args)

    with pytest.raises(ConfigurationError):
        Agent(FunctionModel(lambda r: "x"), max_cycles=-1)


def test_function_tool_still_callable_as_plain_function():
    assert add(2, 3) == 5
    assert FunctionModel is not None


def test_annotated_constraints_reach_the_schema_and_the_validation() -> None:
    from typing import Annotated

    from pydantic import Field

    from interlude.errors import ToolInputError

    @tool
    def transfer(amount: Annotated[int, Field(gt=0, description="In cents.")]) -> str:
        """Transfer."""
        return "ok"

    prop = transfer.spec.input_schema["properties"]["amount"]
    assert prop["exclusiveMinimum"] == 0 and prop["description"] == "In cents."
    with pytest.raises(ToolInputError, match="greater than 0"):
        transfer.validate({"amount": 0})  # the constraint was dropped before: this passed
