"""``interlude show`` prints the votes so far toward a quorum and the remembered decisions."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from interlude import Agent, ToolUse, tool
from interlude.cli import main
from interlude.hooks import BeforeToolCallEvent
from interlude.testing import ScriptedModel


@tool(needs_approval=True)
def pay(amount: int) -> str:
    """Pay."""
    return "paid"


@tool
def deploy(env: str) -> str:
    """Deploy."""
    return "deployed"


def _two_of_ops(event: BeforeToolCallEvent) -> None:
    if event.tool_use.name == "deploy":
        event.interrupt("deploy", {"env": "prod"}, approvers=["ops"], quorum=2)


def test_show_prints_votes_and_decisions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    turns = [[ToolUse("t1", "pay", {"amount": 5})], [ToolUse("t2", "deploy", {"env": "prod"})]]
    agent = Agent(
        ScriptedModel([*turns, "ok"]),
        tools=[pay, deploy],
        session=store,
        session_id="s1",
        clock=time.time,
    )
    agent.hooks.add_callback(BeforeToolCallEvent, _two_of_ops)
    [question] = agent("go").interrupts
    agent.resume({question.id: {"approve": True, "remember": "session", "note": "small"}}, by="ana")
    [deploy_q] = agent.interrupts
    agent.resume({deploy_q.id: True}, by="ana")  # one vote of two

    assert main(["--store", store, "show", "s1"]) == 0
    text = capsys.readouterr().out
    assert "1 of 2 approvals: ana" in text
    assert "Remembered decisions:" in text and "pay: approve, for the session (note: small)" in text
    assert "(vote 1 of 2)" in text

    assert main(["--store", store, "--json", "show", "s1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["decisions"] == {"pay": {"approve": True, "scope": "session", "note": "small"}}
    assert doc["votes"] == {deploy_q.id: {"answer": True, "by": ["ana"]}}
