"""Contract items 18 and 23 for real: pauses resumed in a fresh Python process.

This process builds paused agents (``helpers_agent.build_agent``) and hands their
``export_state()``, as JSON text, to ``resume_child.py`` in a new interpreter (``python -m
tests.interrupts.resume_child`` from the repository root), which builds the
same agent definition, imports each state and resumes it. One child process serves every
scenario; each test below checks one scenario's summary.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.interrupts import helpers_agent
from tests.interrupts.helpers_agent import build_agent, summary, tu, turns_from_json, turns_to_json
from tests.support.processes import ROOT

MODULE = helpers_agent.__name__
"""What the child imports to build the same agents: by its full name, which the child (run
from the repository root) finds, and the name the saved exceptions' classes carry."""

SCENARIOS: dict[str, dict[str, Any]] = {
    "custom_exception_keep": {
        "config": {"after_tool_on_error": True},
        "turns": [
            [
                tu("t1", "fail_with", kind="custom", message="custom failure"),
                tu("t2", "lookup", query="a"),
            ],
            "done",
        ],
        "answers": {"on_error": "keep"},
    },
    "builtin_exception_rewrite": {
        "config": {"after_tool_on_error": True},
        "turns": [[tu("t1", "fail_with", kind="value", message="bad value")], "done"],
        "answers": {"on_error": "rewrite:fixed"},
    },
    "unrebuildable_exception": {
        "config": {"after_tool_on_error": True},
        "turns": [[tu("t1", "fail_with", kind="local", message="lost class")], "done"],
        "answers": {"on_error": "keep"},
    },
    "retry_in_child": {
        "config": {"after_tool_on_error": True},
        "turns": [[tu("t1", "fail_with", kind="custom", message="again")], "done"],
        "answers": {"on_error": "retry"},
    },
    "sequential_rounds": {
        "config": {"approve": ["t1"]},
        "executor": "sequential",
        "turns": [
            [
                tu("t1", "lookup", query="a"),
                tu("t2", "lookup", query="b"),
                tu("t3", "confirm", item="c"),
            ],
            "done",
        ],
        "answers": {"approve": "yes"},
        "rounds": [{"confirm": "ok"}],
    },
    "after_model": {
        "config": {"after_model": True},
        "turns": ["final words"],
        "answers": {"review": "ok"},
    },
    "chain_first_hop": {
        "config": {"after_tool_on_error": True, "after_tool_second": True},
        "turns": [[tu("t1", "fail_with", kind="custom", message="chained")], "done"],
        "answers": {"on_error": "keep"},
        "export": True,
    },
}


@pytest.fixture(scope="module")
def child() -> dict[str, Any]:
    """Pause every scenario here, resume them all in one fresh interpreter."""
    job: dict[str, Any] = {"module": MODULE, "scenarios": []}
    parent: dict[str, Any] = {}
    for name, sc in SCENARIOS.items():
        executor = sc.get("executor", "concurrent")
        agent, model, tally, _policy = build_agent(sc["config"], sc["turns"], executor)
        result = agent("hi")
        assert result.stop_reason == "interrupt", name
        ids = {i.name: i.id for i in result.interrupts}
        parent[name] = {"counts": dict(tally.counts), "model_calls": len(model.requests)}
        job["scenarios"].append(
            {
                "name": name,
                "config": sc["config"],
                "executor": executor,
                "turns": turns_to_json(sc["turns"][1:]),
                "state": json.loads(json.dumps(agent.export_state())),
                "answers": {ids[n]: a for n, a in sc["answers"].items()},
                "rounds": sc.get("rounds", []),
                "export": sc.get("export", False),
            }
        )
    proc = subprocess.run(
        [sys.executable, "-m", "tests.interrupts.resume_child"],
        cwd=ROOT,
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    out["_parent"] = parent
    return out


def _replays(s: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in s["log"] if e["replay"]]


def _results(s: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(r["id"], r["status"], r["text"]) for r in s["tool_results"]]


def test_child_did_not_import_the_test_modules(child):
    assert MODULE in child["modules"]
    assert not any(m.rsplit(".", 1)[-1].startswith("test_") for m in child["modules"])


def test_custom_exception_keeps_its_class_in_another_process(child):
    s = child["custom_exception_keep"]
    assert "error" not in s, s
    assert s["stop_reason"] == "end_turn" and s["text"] == "done"
    assert child["_parent"]["custom_exception_keep"]["counts"] == {"fail_with": 1, "lookup": 1}
    assert s["counts"] == {}  # neither the failed tool nor the finished sibling ran again
    assert s["model_calls"] == 1
    [e] = _replays(s)
    assert e["event"] == "after_tool" and e["answer"] == "keep"
    assert e["exception"]["type"] == f"{MODULE}.CustomToolError"
    assert e["exception"]["is_custom"] and not e["exception"]["is_replayed"]
    assert (
        e["exception"]["args"] == ["custom failure"] and e["exception"]["str"] == "custom failure"
    )
    assert (e["tool"], e["cancel_message"]) == ("fail_with", None)
    assert _results(s) == [
        ("t1", "error", "CustomToolError: custom failure"),
        ("t2", "success", "found a"),
    ]


def test_builtin_exception_keeps_its_class_and_result_can_be_rewritten(child):
    s = child["builtin_exception_rewrite"]
    assert s["stop_reason"] == "end_turn" and s["counts"] == {}
    [e] = _replays(s)
    assert e["exception"]["type"] == "builtins.ValueError" and e["exception"]["is_value_error"]
    assert e["exception"]["args"] == ["bad value"]
    assert e["result"] == "ValueError: bad value"
    assert _results(s) == [("t1", "success", "fixed")]


def test_unrebuildable_exception_is_a_replayed_exception_in_another_process(child):
    s = child["unrebuildable_exception"]
    assert s["stop_reason"] == "end_turn" and s["counts"] == {}
    [e] = _replays(s)
    x = e["exception"]
    assert x["is_replayed"] and x["type"] == "interlude.errors.ReplayedException"
    assert x["type_name"] == f"{MODULE}.make_tools.<locals>.fail_with.<locals>.LocalError"
    assert x["message"] == "lost class"
    assert "LocalError: lost class" in x["traceback_text"] and "fail_with" in x["traceback_text"]
    assert _results(s) == [("t1", "error", "LocalError: lost class")]


def test_retry_in_another_process_runs_the_tool_exactly_once_more(child):
    s = child["retry_in_child"]
    # The retried tool failed again, so its after-hook asks afresh: answers do not carry over
    # a retry. The tool ran exactly once in the child.
    assert s["stop_reason"] == "interrupt"
    assert child["_parent"]["retry_in_child"]["counts"] == {"fail_with": 1}
    assert s["counts"] == {"fail_with": 1}
    assert [e["replay"] for e in s["log"]] == [True, False]
    assert _results(s) == []  # held back while the question is open


def test_sequential_batch_continues_in_order_in_another_process(child):
    s = child["sequential_rounds"]
    assert child["_parent"]["sequential_rounds"]["counts"] == {}
    assert s["stop_reason"] == "end_turn" and s["model_calls"] == 1
    assert s["counts"] == {"lookup": 2, "confirm": 2, "confirm_after": 1}
    assert _results(s) == [
        ("t1", "success", "found a"),
        ("t2", "success", "found b"),
        ("t3", "success", "c: ok"),
    ]


def test_after_model_pause_does_not_call_the_model_again_in_another_process(child):
    s = child["after_model"]
    assert child["_parent"]["after_model"]["model_calls"] == 1
    assert s["stop_reason"] == "end_turn" and s["text"] == "final words"
    assert s["model_calls"] == 0
    [e] = _replays(s)
    assert e["text"] == "final words" and e["answer"] == "ok"


def test_re_interrupt_in_another_process_keeps_the_kept_data_for_the_next_one(child):
    """parent pauses -> child answers one question, is asked another, saves -> parent resumes."""
    s = child["chain_first_hop"]
    assert s["stop_reason"] == "interrupt" and s["pending"] == ["double_check"]
    assert s["counts"] == {} and s["tool_results"] == []
    [e] = _replays(s)
    assert e["answer"] == "keep" and e["exception"]["is_custom"]

    sc = SCENARIOS["chain_first_hop"]
    agent, model, tally, policy = build_agent(
        sc["config"], turns_from_json(turns_to_json(sc["turns"][1:]))
    )
    agent.import_state(s["state"])
    result = agent.resume({s["pending_ids"][0]: "sure"})
    final = summary(agent, result, model, tally, policy)
    assert final["stop_reason"] == "end_turn" and final["counts"] == {}
    [e] = _replays(final)
    assert (e["answer"], e["second"]) == ("keep", "sure")  # every answer so far
    assert e["exception"]["is_custom"] and e["exception"]["args"] == ["chained"]
    assert e["result"] == "CustomToolError: chained"
    assert _results(final) == [("t1", "error", "CustomToolError: chained")]
