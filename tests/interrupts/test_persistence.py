"""Contract items 23-24: the pause as versioned JSON; golden files of saved pauses.

Golden files: ``golden/*.json`` hold ``export_state()`` of paused agents, written once by

    INTERLUDE_REGEN_GOLDEN=1 .venv/bin/python -m pytest tests/interrupts -k golden

and kept, so that a pause saved by this version keeps loading. Normally the test loads each file
into a fresh agent (built by ``helpers_agent.build_agent``) and resumes it.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from interlude import Agent, ToolUse
from interlude.errors import StateError, StateFormatError, StateMismatchError
from interlude.hooks import BeforeToolCallEvent
from interlude.testing import ScriptedModel

from .helpers_agent import (
    Policy,
    Tally,
    build_agent,
    make_tools,
    summary,
    tool_results,
    tu,
    turns_from_json,
)

GOLDEN_DIR = Path(__file__).parent / "golden"
REGEN = os.environ.get("INTERLUDE_REGEN_GOLDEN") == "1"


def _json_roundtrip(data: Any) -> Any:
    return json.loads(json.dumps(data))


def _plain_json(value: Any, where: str = "state") -> None:
    """Only dict (str keys), list, str, int, float, bool, None."""
    if isinstance(value, dict):
        for k, v in value.items():
            assert isinstance(k, str), f"{where}: key {k!r}"
            _plain_json(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _plain_json(v, f"{where}[{i}]")
    else:
        assert value is None or type(value) in (str, int, float, bool), (
            f"{where}: {type(value).__name__}"
        )


def _paused_agent() -> tuple[Agent, Tally]:
    agent, _model, tally, _policy = build_agent(
        {"approve": ["t2"], "after_tool_on_error": True},
        [
            [
                tu("t1", "lookup", query="a"),
                tu("t2", "lookup", query="b"),
                tu("t3", "fail_with", kind="value"),
            ],
            "done",
        ],
    )
    assert agent("hi").stop_reason == "interrupt"
    return agent, tally


# --- 23: plain, versioned JSON -------------------------------------------------------------------


def test_export_state_is_plain_versioned_json():
    agent, _ = _paused_agent()
    state = agent.export_state()
    _plain_json(state)
    assert state["format"] == "interlude.agent-state" and state["version"] == 3
    assert state["pause"] is not None
    assert json.loads(json.dumps(state)) == state


def test_state_round_trips_through_a_fresh_agent():
    agent, _ = _paused_agent()
    state = _json_roundtrip(agent.export_state())
    fresh, _, _, _ = build_agent({"approve": ["t2"], "after_tool_on_error": True}, ["done"])
    fresh.import_state(state)
    assert fresh.is_paused and fresh.interrupts == agent.interrupts
    assert fresh.messages == agent.messages

    def strip(d: Any) -> Any:
        if isinstance(d, dict):
            return {k: strip(v) for k, v in d.items() if k != "traceback"}
        if isinstance(d, list):
            return [strip(v) for v in d]
        return d

    assert strip(fresh.export_state()) == strip(state)


@pytest.mark.parametrize(
    "change",
    [
        lambda s: s.update(version=4),
        lambda s: s.update(version=0),
        lambda s: s.update(version="1"),
        lambda s: s.pop("version"),
        lambda s: s.update(format="something-else"),
    ],
    ids=["v4", "v0", "string-version", "no-version", "wrong-format"],
)
def test_unknown_version_is_refused_and_nothing_changes(change):
    agent, _ = _paused_agent()
    state = _json_roundtrip(agent.export_state())
    change(state)
    target, _ = _paused_agent()
    before = copy.deepcopy(target.export_state())
    with pytest.raises(StateFormatError) as info:
        target.import_state(state)
    if "version" in state and state.get("format") == "interlude.agent-state":
        assert repr(state["version"]) in str(info.value)
    assert target.export_state() == before


def _break(path: str, value: Any):
    def change(state: dict[str, Any]) -> None:
        node: Any = state
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[int(k)] if isinstance(node, list) else node[k]
        last = keys[-1]
        if value is KeyError:
            del node[last]
        elif isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return change


MALFORMED = {
    "not-a-mapping": None,
    "messages-not-list": _break("messages", "oops"),
    "bad-role": _break("messages.0.role", "system"),
    "bad-block": _break("messages.1.content.0.type", "video"),
    "state-not-object": _break("state", [1]),
    "step-kind": _break("pause.step.kind", "teleport"),
    "call-phase": _break("pause.step.calls.1.phase", "halfway"),
    "calls-empty": _break("pause.step.calls", []),
    "after-without-result": _break("pause.step.calls.2.result", KeyError),
    "interrupts-not-list": _break("pause.interrupts", {"x": 1}),
    "interrupt-without-id": _break("pause.interrupts.0.id", KeyError),
    "answers-not-object": _break("pause.progress.answers", []),
    "cycles-not-int": _break("pause.progress.cycles", "1"),
    "tools-not-list": _break("tools", "lookup"),
    "unknown-interrupt-source": _break("pause.interrupts.0.source", "teleport"),
    "batch-index-out-of-range": _break("pause.step.message_index", 7),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_state_is_refused_and_nothing_is_half_loaded(case):
    agent, _ = _paused_agent()
    state = _json_roundtrip(agent.export_state())
    if MALFORMED[case] is None:
        state = [state]
    else:
        MALFORMED[case](state)
    target, _, _, _ = build_agent({}, ["x"])
    target("earlier conversation")
    before = copy.deepcopy(target.export_state())
    with pytest.raises(StateFormatError):
        target.import_state(state)
    assert target.export_state() == before
    assert not target.is_paused


def test_a_pause_without_questions_imports_as_a_stopped_run():
    """A state whose pause waits on nothing is a run's journal: it is carried on by recover()."""
    agent, _ = _paused_agent()
    state = _json_roundtrip(agent.export_state())
    state["pause"]["interrupts"] = []
    target, _, _, _ = build_agent({}, ["x"])
    target.import_state(state)
    assert target.needs_recovery and not target.is_paused


MISMATCH = {
    # case: (config, first turn, executor, the tool the new agent lacks)
    "before-phase": (
        {"approve": ["t2"], "after_tool_on_error": True},
        None,
        "concurrent",
        "lookup",
    ),
    "after-phase": (
        {"approve": ["t2"], "after_tool_on_error": True},
        None,
        "concurrent",
        "fail_with",
    ),
    "body-phase": ({}, [tu("t1", "confirm", item="x")], "concurrent", "confirm"),
    "not-started": (
        {"approve": ["t1"]},
        [tu("t1", "lookup", query="a"), tu("t2", "flaky", key="k")],
        "sequential",
        "flaky",
    ),
    "message-added": (
        {"message_added_role": "assistant"},
        [tu("t1", "lookup", query="a")],
        "concurrent",
        "lookup",
    ),
    "after-model": ({"after_model": True}, [tu("t1", "lookup", query="a")], "concurrent", "lookup"),
}


@pytest.mark.parametrize("case", list(MISMATCH))
def test_pause_needing_a_missing_tool_is_a_mismatch_and_nothing_changes(case):
    config, turn, executor, missing = MISMATCH[case]
    if turn is None:
        agent, _ = (
            _paused_agent()
        )  # t2 (lookup) waits in its before-hook, t3 (fail_with) in its after-hook
    else:
        agent, _, _, _ = build_agent(config, [turn, "done"], executor)
        assert agent("hi").stop_reason == "interrupt"
    state = _json_roundtrip(agent.export_state())
    tally = Tally()
    tools = [t for t in make_tools(tally) if t.name != missing]
    target = Agent(ScriptedModel(["x"]), tools=tools)
    target("earlier")
    before = copy.deepcopy(target.export_state())
    with pytest.raises(StateMismatchError, match=repr(missing)) as info:
        target.import_state(state)
    assert isinstance(info.value, StateError)
    assert target.export_state() == before


def test_missing_tool_of_a_finished_call_is_not_needed():
    """Only unfinished calls need their tool; t1 (lookup) already finished."""
    agent, _model, _tally, _policy = build_agent(
        {"approve": ["t2"]},
        [[tu("t1", "lookup", query="a"), tu("t2", "confirm", item="b")], "done"],
    )
    agent("hi")
    state = _json_roundtrip(agent.export_state())
    tally2 = Tally()
    tools = [t for t in make_tools(tally2) if t.name != "lookup"]
    target = Agent(ScriptedModel(["done"]), tools=tools, hooks=[Policy({"approve": ["t2"]})])
    target.import_state(state)
    r = target.resume({target.interrupts[0].id: "yes"})
    assert r.stop_reason == "interrupt" and [i.name for i in r.interrupts] == ["confirm"]
    r = target.resume({r.interrupts[0].id: "ok"})
    assert r.stop_reason == "end_turn"
    assert [x.text for x in tool_results(target.messages)] == ["found a", "b: ok"]
    assert tally2.counts["lookup"] == 0


def test_single_before_tool_pause_is_small():
    agent, _model, _tally, _policy = build_agent(
        {"approve": ["lookup"]}, [[tu("t1", "lookup", query="a")], "done"]
    )
    agent("hi")
    state = agent.export_state()
    size = len(json.dumps(state["pause"]))
    assert 0 < size < 2048, size
    assert state["pause"] is not None
    without = dict(state, pause=None)
    assert len(json.dumps(state)) - len(json.dumps(without)) < 2048


def test_a_pause_with_a_non_json_reason_never_exports_broken_json():
    """export_state() promises plain JSON. A reason that is not JSON must be refused clearly:
    by interrupt() (InterruptError), or by export_state() (StateFormatError, as it does for a
    non-JSON agent.state) -- never handed out as data that json.dumps cannot write."""
    import datetime

    from interlude.errors import InterludeError

    def before(event):
        event.interrupt("approve", reason={"deadline": datetime.date(2030, 1, 1)})

    h_tools = make_tools(Tally())
    agent = Agent(ScriptedModel([[tu("t1", "lookup", query="a")], "done"]), tools=h_tools)
    agent.hooks.add_callback(BeforeToolCallEvent, before)
    try:
        result = agent("hi")
    except InterludeError:
        return  # refused when asked: fine
    assert result.stop_reason == "interrupt"
    try:
        state = agent.export_state()
    except StateFormatError as exc:
        assert "reason" in str(exc) or "JSON" in str(exc)
        return
    json.dumps(state)  # otherwise it must really be JSON


def test_pause_is_durable_in_a_session_store(tmp_path):
    """Item 24: with a store, the pause is stored when the run returns; an agent built anew on
    the same store and session id (here a subprocess) resumes it and nothing runs twice."""
    import subprocess
    import sys
    import textwrap

    from interlude.sessions import SQLiteStore
    from interlude.testing.conformance import build_agent

    db, counter = tmp_path / "s.db", tmp_path / "runs"
    paused = build_agent(
        SQLiteStore(db), "item24", [[ToolUse("t1", "record", {"item": "a"})]], counter
    )("go")
    assert paused.stop_reason == "interrupt"
    child = textwrap.dedent(f"""
        from pathlib import Path
        from interlude.sessions import SQLiteStore
        from interlude.testing.conformance import build_agent
        agent = build_agent(SQLiteStore({str(db)!r}), "item24", ["done"], Path({str(counter)!r}))
        print(agent.resume({{{paused.interrupts[0].id!r}: True}}).stop_reason)
    """)
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "end_turn"
    assert counter.read_text().split() == ["a"]


# --- golden files --------------------------------------------------------------------------------


def _t(id: str, name: str, **input: Any) -> dict[str, Any]:
    return {"id": id, "name": name, "input": input}


GOLDEN: dict[str, dict[str, Any]] = {
    "before_tool": {
        "config": {"approve": ["lookup"]},
        "turns": [[_t("t1", "lookup", query="a")], "done"],
        "pending": ["approve"],
        "answers": {"approve": "yes"},
        "expect": {
            "model_calls": 1,
            "counts": {"lookup": 1},
            "text": "done",
            "results": [["t1", "success", "found a"]],
        },
    },
    "tool_call_body": {
        "config": {},
        "turns": [[_t("t1", "confirm", item="x")], "done"],
        "pending": ["confirm"],
        "answers": {"confirm": "fine"},
        "expect": {
            "model_calls": 1,
            "counts": {"confirm": 1, "confirm_after": 1},
            "text": "done",
            "results": [["t1", "success", "x: fine"]],
        },
    },
    "after_tool_exception": {
        "config": {"after_tool_on_error": True},
        "turns": [[_t("t1", "fail_with", kind="value", message="bad value")], "done"],
        "pending": ["on_error"],
        "answers": {"on_error": "rewrite:handled"},
        "expect": {
            "model_calls": 1,
            "counts": {},
            "text": "done",
            "results": [["t1", "success", "handled"]],
        },
    },
    "after_model": {
        "config": {"after_model": True},
        "turns": ["final words"],
        "pending": ["review"],
        "answers": {"review": "ok"},
        "expect": {"model_calls": 0, "counts": {}, "text": "final words", "results": []},
    },
    "message_added": {
        "config": {"message_added_role": "assistant"},
        "turns": [[_t("t1", "lookup", query="a")], "done"],
        "pending": ["seen"],
        "answers": {"seen": "ok"},
        "expect": {
            "model_calls": 1,
            "counts": {"lookup": 1},
            "text": "done",
            "results": [["t1", "success", "found a"]],
        },
    },
    "concurrent_batch": {
        "config": {"approve": ["t2"], "after_tool_on_error": True},
        "turns": [
            [
                _t("t1", "lookup", query="a"),
                _t("t2", "lookup", query="b"),
                _t("t3", "fail_with", kind="custom", message="custom failure"),
            ],
            "done",
        ],
        "pending": ["approve", "on_error"],
        "answers": {"approve": "yes", "on_error": "keep"},
        "expect": {
            "model_calls": 1,
            "counts": {"lookup": 1},
            "text": "done",
            "results": [
                ["t1", "success", "found a"],
                ["t2", "success", "found b"],
                ["t3", "error", "CustomToolError: custom failure"],
            ],
        },
    },
}


def _regenerate(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    agent, _model, _tally, _policy = build_agent(spec["config"], turns_from_json(spec["turns"]))
    result = agent("hi")
    assert result.stop_reason == "interrupt"
    state = _json_roundtrip(agent.export_state())
    (GOLDEN_DIR / f"{name}.json").write_text(json.dumps(state, indent=1, sort_keys=True) + "\n")
    return state


@pytest.mark.parametrize("name", list(GOLDEN))
def test_golden_pause_loads_and_resumes(name):
    spec = GOLDEN[name]
    path = GOLDEN_DIR / f"{name}.json"
    if REGEN:
        _regenerate(name, spec)
    assert path.exists(), f"missing golden file {path}; run with INTERLUDE_REGEN_GOLDEN=1 once"
    state = json.loads(path.read_text())
    # Golden files stay at version 1: old pauses keep loading.
    assert state["format"] == "interlude.agent-state" and state["version"] == 1
    assert state["pause"] is not None

    remaining = turns_from_json(spec["turns"][1:])  # the first turn was played before the pause
    agent, model, tally, policy = build_agent(spec["config"], remaining)
    agent.import_state(state)
    assert agent.is_paused
    pending = {i.name: i.id for i in agent.interrupts}
    assert sorted(pending) == sorted(spec["pending"])
    result = agent.resume({pending[n]: a for n, a in spec["answers"].items()})
    got = summary(agent, result, model, tally, policy)
    expect = spec["expect"]
    assert got["stop_reason"] == "end_turn" and not got["paused"]
    assert got["text"] == expect["text"]
    assert got["model_calls"] == expect["model_calls"]
    assert got["counts"] == expect["counts"]  # finished work did not run again
    assert [[r["id"], r["status"], r["text"]] for r in got["tool_results"]] == expect["results"]
    replays = [e for e in got["log"] if e["replay"]]
    assert sorted(e.get("event") for e in replays) == sorted(
        {
            "approve": "before_tool",
            "on_error": "after_tool",
            "review": "after_model",
            "seen": "message_added",
            "confirm": None,
        }[n]
        for n in spec["pending"]
        if n != "confirm"
    )
    for e in replays:
        assert (
            e["answer"]
            == spec["answers"][
                {
                    "before_tool": "approve",
                    "after_tool": "on_error",
                    "after_model": "review",
                    "message_added": "seen",
                }[e["event"]]
            ]
        )
    if name == "after_tool_exception":
        [e] = replays
        assert e["exception"]["type"] == "builtins.ValueError" and e["exception"]["is_value_error"]
        assert e["exception"]["args"] == ["bad value"] and e["exception"]["str"] == "bad value"
    if name == "after_model":
        [e] = replays
        assert e["text"] == "final words"
