"""A call whose process stopped while it ran is in doubt: recovery asks a person, or re-runs
tools that are safe to run twice. Nothing is silently re-run, nothing that ran is called not run.

The crash itself is made by editing an exported state the way a journal left by a killed
process reads (the crash matrix kills real processes); here the decisions are what is tested.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from interlude import Agent, ToolUse, tool
from interlude.errors import AgentPausedError, NotPausedError, ResumeInputError
from interlude.hooks import BeforeToolCallEvent
from interlude.testing import ScriptedModel

sent: list[str] = []
looked_up: list[str] = []


@tool
def send(to: str) -> str:
    """Send a letter.

    Args:
        to: Who.
    """
    sent.append(to)
    return f"sent to {to}"


@tool(idempotent=True)
def lookup(key: str) -> str:
    """Look something up (safe to repeat).

    Args:
        key: What.
    """
    looked_up.append(key)
    return f"{key}=42"


def approve_send(event: BeforeToolCallEvent) -> None:
    if event.tool_use.name == "send" and event.interrupt("approve") is not True:
        event.cancel("not approved")


@pytest.fixture(autouse=True)
def _clear() -> None:
    sent.clear()
    looked_up.clear()


def _agent(turns: list[Any], **kw: Any) -> Agent:
    agent = Agent(ScriptedModel(turns), tools=[send, lookup], **kw)
    agent.hooks.add_callback(BeforeToolCallEvent, approve_send)
    return agent


def _stopped_state(in_doubt: str) -> dict[str, Any]:
    """A state as a process leaves it when killed while tool ``in_doubt`` ran: the journal
    holds the batch with that call started (phase running) and no question."""
    agent = _agent([[ToolUse("t1", "send", {"to": "ana"}), ToolUse("t2", "lookup", {"key": "k"})]])
    assert agent("go").stop_reason == "interrupt"  # lookup ran; send waits for approval
    state = json.loads(json.dumps(agent.export_state()))
    for call in state["pause"]["step"]["calls"]:
        if call["tool_use"]["name"] == in_doubt:
            tool_use = call["tool_use"]
            call.clear()
            call.update(
                tool_use=tool_use, phase="running", tool_name=in_doubt, started_at=1_700_000_000.0
            )
    state["pause"]["interrupts"] = []
    sent.clear()
    looked_up.clear()
    return state


def _recovering(tool_name: str, **kw: Any) -> Agent:
    agent = _agent(["done"], **kw)
    agent.import_state(_stopped_state(tool_name))
    assert agent.needs_recovery and not agent.is_paused
    return agent


def test_an_in_doubt_call_asks_a_person_showing_the_call_and_when_it_started():
    agent = _recovering("send")
    with pytest.raises(AgentPausedError, match="recover"):
        agent("something new")
    with pytest.raises(NotPausedError, match="recover"):
        agent.resume({"x": 1})
    asked = agent.recover()
    assert asked.stop_reason == "interrupt" and sent == [] and looked_up == []
    [q] = asked.interrupts
    assert q.source == "in_doubt" and q.name == "in_doubt"
    assert q.tool_use == ToolUse("t1", "send", {"to": "ana"})
    assert isinstance(q.reason, dict) and q.reason["started_at"] == 1_700_000_000.0
    assert "2023-11-14T22:13:20" in str(q.reason["message"])


def test_fail_tells_the_model_the_call_may_have_run():
    agent = _recovering("send")
    q = agent.recover().interrupts[0]
    assert agent.resume({q.id: "fail"}).stop_reason == "end_turn"
    t1, t2 = agent.messages[2].content
    assert t1.status == "error" and "may have had effects" in t1.text
    assert (t2.status, t2.text) == ("success", "k=42")  # finished before the crash: kept
    assert sent == [] and looked_up == []


def test_rerun_runs_the_call_once_more():
    agent = _recovering("send")
    q = agent.recover().interrupts[0]
    assert agent.resume({q.id: "rerun"}).stop_reason == "end_turn"
    assert sent == ["ana"]  # approved before it started: not asked again
    assert agent.messages[2].content[0].text == "sent to ana"


def test_a_given_result_is_recorded_as_the_tool_s_result():
    agent = _recovering("send")
    q = agent.recover().interrupts[0]
    assert agent.resume({q.id: {"result": "sent to ana (checked by hand)"}}).stop_reason == (
        "end_turn"
    )
    r = agent.messages[2].content[0]
    assert (r.status, r.text) == ("success", "sent to ana (checked by hand)") and sent == []


@pytest.mark.parametrize("bad", ["yes", True, None, {"result": 1, "extra": 2}, ["rerun"]])
def test_a_bad_answer_is_refused_and_changes_nothing(bad):
    agent = _recovering("send")
    q = agent.recover().interrupts[0]
    before = agent.export_state()
    with pytest.raises(ResumeInputError, match="'rerun', 'fail'"):
        agent.resume({q.id: bad})
    assert agent.export_state() == before and sent == []


def test_an_idempotent_tool_runs_again_without_asking():
    agent = _recovering("lookup")
    result = agent.recover()
    # lookup re-ran on its own; send (never started) still waits for its approval.
    assert looked_up == ["k"] and sent == []
    assert [i.name for i in result.interrupts] == ["approve"]


def test_the_agent_wide_policy_reruns_every_in_doubt_call():
    agent = _recovering("send", in_doubt="rerun")
    assert agent.recover().stop_reason == "end_turn"
    assert sent == ["ana"]


def test_discarding_a_stopped_run_says_the_call_may_have_run():
    agent = _recovering("send")
    agent.discard_pause()
    assert not agent.needs_recovery
    t1 = agent.messages[2].content[0]
    assert t1.status == "error" and "may have had effects" in t1.text


def test_bad_policy_is_a_configuration_error():
    from interlude.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="in_doubt"):
        Agent(ScriptedModel([]), in_doubt="maybe")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="session_lease"):
        Agent(ScriptedModel([]), session_lease=0)
