"""Hostile and broken input to the state: only the project's own errors come out, quickly, and
nothing changes; a conversation with an unanswered tool use is never sent to a model."""

from __future__ import annotations

import copy
import json
import math
import time
from typing import Any

import pytest

from interlude import Agent, Message, Text, ToolResult, ToolUse, tool
from interlude.errors import (
    ModelError,
    ResumeInputError,
    SessionConflictError,
    StateFormatError,
)
from interlude.hooks import BeforeToolCallEvent
from interlude.sessions import MemoryStore
from interlude.testing import FunctionModel, ModelRequest, ScriptedModel


@tool
def act(n: int) -> str:
    """Act.

    Args:
        n: Which.
    """
    return f"did {n}"


def approve(event: BeforeToolCallEvent) -> None:
    event.interrupt("approve")


def _paused(**kw: Any) -> Agent:
    agent = Agent(ScriptedModel([[ToolUse("t1", "act", {"n": 1})], "done"]), tools=[act], **kw)
    agent.hooks.add_callback(BeforeToolCallEvent, approve)
    assert agent("go").stop_reason == "interrupt"
    return agent


def _state() -> dict[str, Any]:
    return json.loads(json.dumps(_paused().export_state()))


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _refused(state: Any, match: str | None = None) -> None:
    target = Agent(ScriptedModel([]), tools=[act])
    before = target.export_state()
    start = time.perf_counter()
    with pytest.raises(StateFormatError, match=match):
        target.import_state(state)
    # quickly: a check that went deep (recursion, a walk per level) would take minutes
    assert time.perf_counter() - start < 5.0
    assert target.export_state() == before


def test_a_state_ending_in_unanswered_tool_uses_is_refused():
    state = _state()
    state["pause"] = None  # the batch that would answer the tool use is gone
    _refused(state, "without results")


@pytest.mark.parametrize(
    "bad",
    [{1, 2}, b"bytes", object(), math.nan, math.inf],
    ids=["set", "bytes", "object", "nan", "infinity"],
)
def test_values_json_cannot_carry_are_refused(bad):
    state = _state()
    state["state"] = {"x": bad}
    _refused(state, "not plain JSON")
    state = _state()
    state["messages"][0]["content"][0]["text"] = bad
    _refused(state)


def test_a_huge_raised_at_is_refused():
    state = _state()
    state["pause"]["interrupts"][0]["raised_at"] = int("9" * 400)
    _refused(state, "raised_at")


@pytest.mark.parametrize("where", ["message", "state", "answer"])
def test_json_nested_100000_deep_is_refused_quickly(where):
    state = _state()
    deep = _nested(100_000)
    if where == "message":
        state["messages"][1]["content"][0]["input"] = {"n": deep}
    elif where == "state":
        state["state"] = {"deep": deep}
    else:
        state["pause"]["progress"]["answers"] = {"x": deep}
    _refused(state, "nested too deeply")


@pytest.mark.parametrize("depth", [2, 5000])
def test_a_chain_of_message_added_steps_is_refused(depth):
    state = _state()
    step: dict[str, Any] = {"kind": "before_model_call"}
    for _ in range(depth):
        step = {"kind": "message_added", "index": 0, "then": step}
    state["pause"]["step"] = step
    _refused(state, "cannot follow another|nested too deeply")


def test_a_hostile_value_in_an_error_message_is_shortened():
    state = _state()
    state["tools"] = {"x": "y" * 1_000_000}
    with pytest.raises(StateFormatError) as info:
        Agent(ScriptedModel([]), tools=[act]).import_state(state)
    assert len(str(info.value)) < 300


@pytest.mark.parametrize("answer", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
def test_nan_and_infinity_answers_are_refused_and_change_nothing(answer):
    agent = _paused()
    before = agent.export_state()
    with pytest.raises(ResumeInputError, match="not JSON-compatible"):
        agent.resume({agent.interrupts[0].id: answer})
    assert agent.export_state() == before and agent.is_paused


def test_a_deeply_nested_answer_is_refused():
    agent = _paused()
    with pytest.raises(ResumeInputError, match="nested too deeply"):
        agent.resume({agent.interrupts[0].id: _nested(100_000)})
    assert agent.is_paused


def test_an_unanswered_tool_use_in_a_given_conversation_is_answered_for_the_model():
    seen: list[list[Message]] = []

    def reply(request: ModelRequest) -> str:
        seen.append(list(request.messages))
        return "ok"

    given = [
        Message("user", [Text("earlier")]),
        Message("assistant", [ToolUse("old1", "act", {"n": 1}), ToolUse("old2", "act", {"n": 2})]),
        Message("user", [ToolResult("old1", "success", [Text("did 1")])]),  # old2 missing
        Message("assistant", [Text("then something else")]),
        Message("assistant", [ToolUse("old3", "act", {"n": 3})]),  # never answered
    ]
    agent = Agent(FunctionModel(reply), tools=[act], messages=copy.deepcopy(given))
    assert str(agent("and now?")) == "ok"
    sent = seen[0]
    results = [b for b in sent[2].content if isinstance(b, ToolResult)]
    assert [(r.tool_use_id, r.status) for r in results] == [("old1", "success"), ("old2", "error")]
    assert "no result in the conversation" in results[1].text
    assert sent[4].tool_uses[0].id == "old3"
    [closing] = sent[5].content[:1]
    assert isinstance(closing, ToolResult) and closing.tool_use_id == "old3"
    assert closing.status == "error"
    assert sent[5].content[1:] == [Text("and now?")]  # the prompt follows the results
    assert agent.messages[: len(given)] == given  # the conversation itself is not rewritten


def test_resuming_a_session_loaded_mid_run_names_the_run_s_owner():
    store = MemoryStore()
    seen: list[str] = []

    def meanwhile(event: BeforeToolCallEvent) -> None:
        other = Agent(ScriptedModel([]), tools=[act], session=store, session_id="busy")
        try:
            other.resume({"v1:before_tool_call:t1:x": True})
        except SessionConflictError as exc:
            seen.append(str(exc))

    agent = Agent(
        ScriptedModel([[ToolUse("t1", "act", {"n": 1})], "done"]),
        tools=[act],
        session=store,
        session_id="busy",
    )
    agent.hooks.add_callback(BeforeToolCallEvent, meanwhile)
    assert str(agent("go")) == "done"
    assert len(seen) == 1 and "being run by" in seen[0]


def test_a_direct_tool_call_while_paused_runs_and_leaves_the_pause_alone():
    agent = _paused()
    before = agent.export_state()
    from interlude.errors import DirectToolInterruptError

    # The approval hook applies to direct calls too: a direct call cannot pause, so it says so.
    with pytest.raises(DirectToolInterruptError):
        agent.tool.act(n=5)
    assert agent.export_state() == before
    plain = Agent(ScriptedModel([[ToolUse("t1", "act", {"n": 1})], "done"]), tools=[act])
    plain.hooks.add_callback(BeforeToolCallEvent, lambda e: e.interrupt("ok", response=True))
    assert plain.tool.act(n=2).text == "did 2"


def test_a_broken_script_is_not_a_model_error():
    from interlude.errors import ScriptError

    assert not issubclass(ScriptError, ModelError)
    with pytest.raises(ScriptError):
        Agent(ScriptedModel([]))("hi")


def test_the_repaired_view_carries_the_run_s_new_messages_to_every_model_call():
    seen: list[list[Message]] = []

    def reply(request: ModelRequest) -> str | list[ToolUse]:
        seen.append(list(request.messages))
        return [ToolUse("t9", "act", {"n": 9})] if len(seen) == 1 else "done"

    given = [
        Message("user", [Text("earlier")]),
        Message("assistant", [ToolUse("old1", "act", {"n": 1})]),  # never answered
    ]
    agent = Agent(FunctionModel(reply), tools=[act], messages=copy.deepcopy(given))
    assert str(agent("go on")) == "done"
    second = seen[1]
    assert second[-2].tool_uses[0].id == "t9"  # the run's own tool use and its result
    last = second[-1].content[0]
    assert isinstance(last, ToolResult) and (last.tool_use_id, last.text) == ("t9", "did 9")
    assert second[2].content[0].tool_use_id == "old1"  # still repaired
