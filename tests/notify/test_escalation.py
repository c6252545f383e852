"""``escalated`` and a question's own ``warn_before``, from a real agent's question."""

from __future__ import annotations

import asyncio
from pathlib import Path

from interlude import Agent, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.notify import Notifications, Notifier, Webhook
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel

from .receivers import Receiver


@tool
def deploy(env: str) -> str:
    """Deploy."""
    return "deployed"


def _ask(event: BeforeToolCallEvent) -> None:
    answer = event.interrupt(
        "deploy",
        {"env": "prod"},
        approvers=["ops"],
        escalate_after=300,
        escalate_to=["leads"],
        expires_in=1000,
        warn_before=100,
    )
    if answer is not True:
        event.cancel("not approved")


def test_escalated_and_the_questions_own_warning(tmp_path: Path, receiver: Receiver) -> None:
    now = [1000.0]
    store = SQLiteStore(tmp_path / "s.db")
    agent = Agent(
        ScriptedModel([[ToolUse("t1", "deploy", {"env": "prod"})], "ok"]),
        tools=[deploy],
        session=store,
        session_id="s1",
        clock=lambda: now[0],
    )
    agent.hooks.add_callback(BeforeToolCallEvent, _ask)
    [question] = agent("ship it").interrupts
    assert (question.escalate_after, question.escalate_to) == (300.0, ("leads",))
    notifier = Notifier(
        store, Notifications(targets=(Webhook(receiver.url),)), clock=lambda: now[0]
    )

    def events_at(t: float) -> list[str]:
        now[0] = t
        asyncio.run(notifier.run_once())
        return [r.json["event"] for r in receiver.got]

    assert events_at(1299.0) == ["asked"]
    assert not question.may_answer(["leads"], 1299.0) and question.may_answer(["ops"], 1299.0)
    assert events_at(1300.0) == ["asked", "escalated"]
    assert question.may_answer(["leads"], 1300.0)  # escalation widened who may answer
    assert events_at(1899.0) == ["asked", "escalated"]
    assert events_at(1900.0) == ["asked", "escalated", "deadline_near"]
    assert receiver.got[1].json["at"] == 1300.0 and receiver.got[2].json["at"] == 1900.0
    escalated = receiver.got[1].json["question"]
    assert escalated["escalate_to"] == ["leads"] and escalated["approvers"] == ["ops"]
    agent.close()
