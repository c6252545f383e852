"""Structured output through the public API: agent(prompt, output_type=T) -> result.output.

Both ways of asking are covered with the shipped fakes: native (the model is sent the output
schema and replies with JSON text) and tool mode (``native_output=False``: the model is given a
``final_result`` tool and answers by calling it). Also: answers sent back with what is wrong,
the retry limit, pauses resumed in a fresh agent and in a fresh process, and streaming.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, field_validator
from typing_extensions import TypedDict  # pydantic needs it before Python 3.12

from interlude import Agent, AgentResult, Message, RunFinished, Text, TextDelta, ToolResult, ToolUse
from interlude import tool as make_tool
from interlude.errors import (
    ConfigurationError,
    OutputTypeMismatchError,
    OutputValidationError,
    ResumeError,
)
from interlude.hooks import (
    AfterInvocationEvent,
    BeforeToolCallEvent,
    MessageAddedEvent,
)
from interlude.testing import FunctionModel, ModelRequest, ScriptedModel


class Weather(BaseModel):
    city: str
    celsius: int


@dataclass
class Point:
    x: int
    y: int


class Person(TypedDict):
    name: str
    age: int


@make_tool
def lookup(city: str) -> str:
    """Look up the weather.

    Args:
        city: The city.
    """
    return f"{city}: 21 degrees"


def weather_json(city: str = "Oslo", celsius: int = 21) -> str:
    return json.dumps({"city": city, "celsius": celsius})


# --- native mode --------------------------------------------------------------------------------


def test_native_reply_is_validated_into_the_type(assert_valid):
    model = ScriptedModel([[ToolUse("t1", "lookup", {"city": "Oslo"})], weather_json()])
    agent = Agent(model, tools=[lookup])
    result = agent("Weather in Oslo?", output_type=Weather)

    assert result.stop_reason == "end_turn"
    assert result.output == Weather(city="Oslo", celsius=21)
    assert str(result) == weather_json()  # the reply text is the JSON answer
    # Every model call was sent the schema (tools stay available: the first call used one).
    for request in model.requests:
        assert request.output_schema is not None
        assert request.output_schema.schema == Weather.model_json_schema()
        assert [s.name for s in request.tool_specs] == ["lookup"]
    assert_valid(agent)
    model.assert_done()


def test_a_plain_run_has_no_output_and_no_schema():
    model = ScriptedModel(["hello"])
    result = Agent(model)("hi")
    assert result.output is None and str(result) == "hello"
    assert model.requests[0].output_schema is None


@pytest.mark.parametrize(
    ("output_type", "value"),
    [
        (int, 42),
        (list[str], ["a", "b"]),
        (Literal["yes", "no"], "no"),
        (Point, Point(1, 2)),
        (Person, {"name": "Ana", "age": 30}),
        (Weather | None, None),
    ],
    ids=["int", "list", "literal", "dataclass", "typeddict", "optional-model"],
)
def test_plain_types_are_wrapped_when_not_objects(output_type, value):
    from pydantic import TypeAdapter

    adapter = TypeAdapter(output_type)
    schema = adapter.json_schema()
    answer = adapter.dump_python(value, mode="json")
    wrapped = schema.get("type") != "object"
    reply = {"result": answer} if wrapped else answer
    model = ScriptedModel([json.dumps(reply)])
    result = Agent(model)("?", output_type=output_type)

    assert result.output == value
    sent = model.requests[0].output_schema
    assert sent is not None and sent.schema["type"] == "object"
    if wrapped:  # the type's schema sits under "result"; its definitions stay at the root
        inner = {k: v for k, v in schema.items() if k != "$defs"}
        assert sent.schema["properties"] == {"result": inner}
        assert sent.schema["required"] == ["result"]
        assert sent.schema.get("$defs") == schema.get("$defs")
    else:
        assert sent.schema == schema


def test_a_bare_value_is_taken_for_a_wrapped_type():
    result = Agent(ScriptedModel(['["x", "y"]']))("?", output_type=list[str])
    assert result.output == ["x", "y"]


def test_str_takes_plain_text_or_the_wrapped_form():
    assert Agent(ScriptedModel(["just text"]))("?", output_type=str).output == "just text"
    assert Agent(ScriptedModel(['{"result": "hi"}']))("?", output_type=str).output == "hi"


def test_a_fenced_json_reply_is_read():
    reply = f"```json\n{weather_json()}\n```"
    assert Agent(ScriptedModel([reply]))("?", output_type=Weather).output.celsius == 21


# --- tool mode ----------------------------------------------------------------------------------


def test_tool_mode_offers_final_result_and_ends_the_run_with_its_input(assert_valid):
    model = ScriptedModel(
        [
            [ToolUse("t1", "lookup", {"city": "Oslo"})],
            [ToolUse("f1", "final_result", {"city": "Oslo", "celsius": 21})],
            "Bye.",
        ],
        native_output=False,
    )
    agent = Agent(model, tools=[lookup])
    result = agent("Weather in Oslo?", output_type=Weather)

    assert result.output == Weather(city="Oslo", celsius=21)
    final_spec = model.requests[0].tool_specs[-1]
    assert [s.name for s in model.requests[0].tool_specs] == ["lookup", "final_result"]
    assert final_spec.input_schema == Weather.model_json_schema()
    assert model.requests[0].output_schema is None
    # The final call is kept as the answer's text: the conversation ends valid, with no
    # unanswered tool use, and takes a plain prompt next.
    assert agent.messages[-1] == Message(
        "assistant", [Text(json.dumps(result.output.model_dump()))]
    )
    assert_valid(agent)
    follow_up = agent("Thanks")
    assert str(follow_up) == "Bye." and follow_up.output is None
    assert "final_result" not in [s.name for s in model.requests[-1].tool_specs]
    assert_valid(agent)


def test_tool_mode_wraps_plain_types():
    model = ScriptedModel([[ToolUse("f1", "final_result", {"result": 7})]], native_output=False)
    result = Agent(model)("?", output_type=int)
    assert result.output == 7
    assert model.requests[0].tool_specs[0].input_schema["properties"] == {
        "result": {"type": "integer"}
    }


def test_tool_mode_bad_input_and_a_missing_call_are_sent_back(assert_valid):
    model = ScriptedModel(
        [
            [
                ToolUse("f1", "final_result", {"city": "Oslo", "celsius": "warm"}),
                ToolUse("t1", "lookup", {"city": "Oslo"}),
            ],
            "It is 21 degrees.",  # text, no final_result call
            [ToolUse("f2", "final_result", {"city": "Oslo", "celsius": 21})],
        ],
        native_output=False,
    )
    agent = Agent(model, tools=[lookup], output_retries=2)
    result = agent("Weather?", output_type=Weather)

    assert result.output == Weather(city="Oslo", celsius=21)
    results = model.requests[1].messages[-1].content
    assert all(isinstance(r, ToolResult) and r.status == "error" for r in results)
    assert "at celsius" in results[0].text and "not run" in results[1].text
    feedback = model.requests[2].messages[-1]
    assert feedback.role == "user" and "final_result" in feedback.text
    assert_valid(agent)


def test_a_tool_named_final_result_clashes_in_tool_mode():
    @make_tool
    def final_result(x: int) -> int:
        """Clash."""
        return x

    agent = Agent(ScriptedModel([], native_output=False), tools=[final_result])
    with pytest.raises(ConfigurationError, match="final_result"):
        agent("?", output_type=int)


def test_in_native_mode_a_tool_named_final_result_is_an_ordinary_tool():
    @make_tool
    def final_result(x: int) -> int:
        """Double a number.

        Args:
            x: The number.
        """
        return 2 * x

    model = ScriptedModel([[ToolUse("t1", "final_result", {"x": 2})], '{"result": 4}'])
    agent = Agent(model, tools=[final_result])
    assert agent("?", output_type=int).output == 4
    assert agent.messages[2].content[0].content[0].value == 4  # it ran, as a tool


# --- answers sent back, and the limit -----------------------------------------------------------


def test_invalid_answers_are_sent_back_then_accepted(assert_valid):
    model = ScriptedModel(["It is sunny!", '{"city": "Oslo"}', weather_json(celsius=19)])
    agent = Agent(model, output_retries=2)
    result = agent("Weather?", output_type=Weather)

    assert result.output == Weather(city="Oslo", celsius=19)
    first, second = model.requests[1].messages[-1], model.requests[2].messages[-1]
    assert first.role == "user" and "not JSON" in first.text
    assert "'celsius' is a required property" in second.text
    # The conversation keeps each answer and what was wrong with it.
    roles = [m.role for m in agent.messages]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert_valid(agent)


def test_a_validator_of_the_type_is_applied_too():
    class Even(BaseModel):
        n: int

        @field_validator("n")
        @classmethod
        def even(cls, n: int) -> int:
            if n % 2:
                raise ValueError("must be even")
            return n

    model = ScriptedModel(['{"n": 3}', '{"n": 4}'])
    assert Agent(model)("?", output_type=Even).output == Even(n=4)
    assert "must be even" in model.requests[1].messages[-1].text


@pytest.mark.parametrize("native", [True, False], ids=["native", "tool"])
def test_retries_exhausted_raise_with_the_path_and_the_last_output(native, assert_valid):
    def bad(request: ModelRequest) -> Any:
        answer = {"city": "Oslo", "celsius": "warm"}
        return (
            json.dumps(answer)
            if native
            else [ToolUse(f"f{len(model.requests)}", "final_result", answer)]
        )

    model = FunctionModel(bad, native_output=native)
    agent = Agent(model, output_retries=1)
    with pytest.raises(OutputValidationError) as info:
        agent("Weather?", output_type=Weather)

    assert info.value.path == ("celsius",)
    assert "output_retries=1" in str(info.value) and "warm" in str(info.value)
    last = info.value.output
    assert (json.loads(last) if native else last) == {"city": "Oslo", "celsius": "warm"}
    assert len(model.requests) == 2  # the first answer and one retry
    assert not agent.is_paused
    assert_valid(agent)
    with pytest.raises(ResumeError):
        agent.resume({"x": 1})  # nothing is pending


def test_output_retries_zero_fails_at_the_first_bad_answer():
    with pytest.raises(OutputValidationError, match="not JSON"):
        Agent(ScriptedModel(["nope"]), output_retries=0)("?", output_type=int)


def test_output_retries_is_checked():
    with pytest.raises(ConfigurationError, match="output_retries"):
        Agent(ScriptedModel([]), output_retries=-1)


def test_a_type_pydantic_cannot_describe_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="output_type"):
        Agent(ScriptedModel([]))("?", output_type=object())


# --- pauses -------------------------------------------------------------------------------------

ran: list[str] = []


@make_tool
def book(city: str) -> str:
    """Book a trip.

    Args:
        city: Where to.
    """
    ran.append(city)
    return f"booked {city}"


def approval(event: BeforeToolCallEvent) -> None:
    if event.interrupt("approve") is not True:
        event.cancel("declined")


def make_paused(native: bool = True) -> Agent:
    final: Any = (
        weather_json() if native else [ToolUse("f1", "final_result", json.loads(weather_json()))]
    )
    model = ScriptedModel([[ToolUse("t1", "book", {"city": "Oslo"})], final], native_output=native)
    agent = Agent(model, tools=[book])
    agent.hooks.add_callback(BeforeToolCallEvent, approval)
    paused = agent("Book Oslo and tell me its weather", output_type=Weather)
    assert paused.stop_reason == "interrupt" and paused.output is None
    return agent


def fresh_agent(native: bool = True) -> Agent:
    final: Any = (
        weather_json() if native else [ToolUse("f1", "final_result", json.loads(weather_json()))]
    )
    agent = Agent(ScriptedModel([final], native_output=native), tools=[book])
    agent.hooks.add_callback(BeforeToolCallEvent, approval)
    return agent


@pytest.mark.parametrize("native", [True, False], ids=["native", "tool"])
def test_pause_then_resume_in_a_fresh_agent_with_the_type(native, assert_valid):
    ran.clear()
    state = json.loads(json.dumps(make_paused(native).export_state()))
    assert state["pause"]["progress"]["output"]["schema"] == Weather.model_json_schema()

    agent = fresh_agent(native)
    agent.import_state(state)
    result = agent.resume({agent.interrupts[0].id: True}, output_type=Weather)
    assert result.output == Weather(city="Oslo", celsius=21)
    assert ran == ["Oslo"]
    assert_valid(agent)


def test_resume_without_the_type_still_validates_and_returns_json():
    state = make_paused().export_state()
    agent = Agent(ScriptedModel(['{"city": "Oslo"}', weather_json()]), tools=[book])
    agent.hooks.add_callback(BeforeToolCallEvent, approval)
    agent.import_state(state)
    result = agent.resume({agent.interrupts[0].id: True})
    assert result.output == {"city": "Oslo", "celsius": 21}  # JSON data, checked against the
    assert "'celsius' is a required property" in agent.model.requests[1].messages[-1].text


def test_resume_with_another_type_is_refused_and_changes_nothing():
    class Other(BaseModel):
        city: str

    agent = make_paused()
    before = agent.export_state()
    with pytest.raises(OutputTypeMismatchError, match="does not match"):
        agent.resume({agent.interrupts[0].id: True}, output_type=Other)
    assert agent.export_state() == before and agent.is_paused

    plain = Agent(ScriptedModel([[ToolUse("t1", "book", {"city": "Rome"})]]), tools=[book])
    plain.hooks.add_callback(BeforeToolCallEvent, approval)
    plain("Book Rome")
    with pytest.raises(OutputTypeMismatchError, match="without an output type"):
        plain.resume({plain.interrupts[0].id: True}, output_type=Weather)
    assert plain.is_paused


def test_a_pause_while_an_answer_is_sent_back_resumes_in_a_fresh_agent(assert_valid):
    """A reply and what is wrong with it are appended together; a hook pausing on the first
    leaves both in the state, and the resumed run asks the model again."""

    def ask_on_replies(event: MessageAddedEvent) -> None:
        if event.message.role == "assistant" and "sunny" in event.message.text:
            event.interrupt("check_reply")

    def build(turns: list[Any]) -> Agent:
        agent = Agent(ScriptedModel(turns))
        agent.hooks.add_callback(MessageAddedEvent, ask_on_replies)
        return agent

    first = build(["sunny, I think"])
    paused = first("Weather?", output_type=Weather)
    assert paused.stop_reason == "interrupt"
    assert first.messages[-1].role == "user" and "not JSON" in first.messages[-1].text

    second = build([weather_json()])
    second.import_state(json.loads(json.dumps(first.export_state())))
    result = second.resume({second.interrupts[0].id: "ok"}, output_type=Weather)
    assert result.output == Weather(city="Oslo", celsius=21)
    assert len(second.messages) == 4
    assert_valid(second)


def test_after_invocation_hooks_see_the_answer_as_json_and_a_pause_there_keeps_it():
    seen: list[Any] = []

    def last_look(event: AfterInvocationEvent) -> None:
        seen.append(event.result.output)
        event.interrupt("publish")

    def build() -> Agent:
        agent = Agent(ScriptedModel([weather_json()]))
        agent.hooks.add_callback(AfterInvocationEvent, last_look)
        return agent

    first = build()
    assert first("Weather?", output_type=Weather).stop_reason == "interrupt"
    second = build()
    second.import_state(json.loads(json.dumps(first.export_state())))
    result = second.resume({second.interrupts[0].id: True}, output_type=Weather)
    assert result.output == Weather(city="Oslo", celsius=21)
    assert seen == [{"city": "Oslo", "celsius": 21}] * 2


AGENT_MODULE = """
import json
from pydantic import BaseModel
from interlude import Agent, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel

class Weather(BaseModel):
    city: str
    celsius: int

@tool
def book(city: str) -> str:
    '''Book a trip.'''
    return f"booked {city}"

def build(turns, db, session_id):
    store = SQLiteStore(db)
    agent = Agent(ScriptedModel(turns), tools=[book], session=store, session_id=session_id)
    agent.hooks.add_callback(BeforeToolCallEvent, lambda e: e.interrupt("approve"))
    return agent
"""


@pytest.mark.parametrize("typed", [False, True], ids=["json", "typed"])
def test_a_fresh_process_resumes_from_sqlite(tmp_path: Path, typed: bool):
    (tmp_path / "trip_agent.py").write_text(AGENT_MODULE)
    db = str(tmp_path / "sessions.db")
    starter = textwrap.dedent(
        f"""
        from interlude import ToolUse
        from trip_agent import Weather, build
        agent = build([[ToolUse("t1", "book", {{"city": "Oslo"}})]], {db!r}, "trip-1")
        paused = agent("Book Oslo", output_type=Weather)
        print(paused.interrupts[0].id)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", starter], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    interrupt_id = run.stdout.strip()
    typed_arg = ", output_type=Weather" if typed else ""
    resumer = textwrap.dedent(
        f"""
        import json
        from trip_agent import Weather, build
        turns = ['{{"city": "Oslo", "celsius": "warm"}}', '{{"city": "Oslo", "celsius": 21}}']
        agent = build(turns, {db!r}, "trip-1")
        result = agent.resume({{{interrupt_id!r}: True}}{typed_arg})
        print(type(result.output).__name__, json.dumps(
            result.output.model_dump() if hasattr(result.output, "model_dump") else result.output))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", resumer], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    kind, value = out.stdout.strip().split(" ", 1)
    assert kind == ("Weather" if typed else "dict")
    assert json.loads(value) == {"city": "Oslo", "celsius": 21}


# --- streaming ----------------------------------------------------------------------------------


async def test_streaming_yields_the_answer_as_text_events():
    agent = Agent(ScriptedModel([weather_json()]))
    events = [e async for e in agent.stream_async("Weather?", output_type=Weather)]
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert json.loads(text) == {"city": "Oslo", "celsius": 21}
    last = events[-1]
    assert isinstance(last, RunFinished) and isinstance(last.result, AgentResult)
    assert last.result.output == Weather(city="Oslo", celsius=21)


# --- golden file: a version 3 pause of a structured run -----------------------------------------

GOLDEN = Path(__file__).parent / "golden" / "structured_output_v3.json"


def check_first_reply(event: MessageAddedEvent) -> None:
    if "I think" in event.message.text:  # the hook that paused the golden run
        event.interrupt("check_reply")


@pytest.mark.parametrize("typed", [True, False], ids=["typed", "json"])
def test_golden_pause_in_the_middle_of_a_retry_loads_and_resumes(typed: bool) -> None:
    """Written once from a run paused by a hook on a bad answer: the pause holds the output
    schema with one answer sent back, and the reply and what was wrong, chained."""
    state = json.loads(GOLDEN.read_text())
    assert state["version"] == 3
    step = state["pause"]["step"]
    assert step["kind"] == step["then"]["kind"] == "message_added"
    assert state["pause"]["progress"]["output"]["retries"] == 1

    agent = Agent(ScriptedModel(["still sunny", weather_json()]), output_retries=2)
    agent.hooks.add_callback(MessageAddedEvent, check_first_reply)
    agent.import_state(state)
    result = agent.resume({agent.interrupts[0].id: "ok"}, output_type=Weather if typed else None)
    expected = {"city": "Oslo", "celsius": 21}
    assert result.output == (Weather(**expected) if typed else expected)
    # prompt, bad answer, what was wrong (the pause), another bad one, what was wrong, answer
    assert len(agent.messages) == 6


def test_golden_pause_past_its_retries_fails_with_the_stored_count() -> None:
    agent = Agent(ScriptedModel(["still sunny", "and sunny"]), output_retries=2)
    agent.hooks.add_callback(MessageAddedEvent, check_first_reply)
    agent.import_state(json.loads(GOLDEN.read_text()))
    with pytest.raises(OutputValidationError, match="after 2 retries"):
        agent.resume({agent.interrupts[0].id: "ok"})
    assert len(agent.model.requests) == 2


# --- hostile answers (review) ---------------------------------------------------------------


class Point(BaseModel):
    x: int


def test_an_answer_nested_too_deeply_is_sent_back_not_raised() -> None:
    deep = "[" * 100_000 + "]" * 100_000  # json.loads raises RecursionError on it
    model = ScriptedModel([deep, '{"x": 1}'])
    assert Agent(model)("Where?", output_type=Point).output == Point(x=1)
    assert "nested too deeply" in model.requests[1].messages[-1].text


def test_a_huge_bad_answer_is_quoted_briefly_back_to_the_model_and_in_the_error() -> None:
    huge = json.dumps({"x": "A" * 1_000_000})
    model = ScriptedModel([huge, huge])
    with pytest.raises(OutputValidationError) as caught:
        Agent(model, output_retries=1)("Where?", output_type=Point)
    assert len(str(caught.value)) < 2_000 and "is not of type 'integer'" in str(caught.value)
    sent_back = model.requests[1].messages[-1].text
    assert len(sent_back) < 2_000 and "at x:" in sent_back
    assert caught.value.output == huge  # the whole answer is still there for the caller


def test_a_lone_surrogate_in_a_final_result_answer_is_kept_escaped_in_the_reply_text() -> None:
    model = ScriptedModel(
        [[ToolUse("f1", "final_result", {"city": "Os\ud800lo", "celsius": 3})]],
        native_output=False,
    )
    result = Agent(model)("Weather?", output_type=Weather)
    assert result.output == Weather(city="Os\ud800lo", celsius=3)
    assert str(result) == '{"city": "Os\\ud800lo", "celsius": 3}'
    str(result).encode("utf-8")  # printable, storable as UTF-8
