"""``escalated`` and a question's own ``warn_before``: the Interrupt fields come with approvals
and escalation (issue 23); until an Interrupt has them, this test says so and skips."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from interlude import Interrupt
from interlude.notify import Notifications, Notifier, Webhook
from interlude.sessions import SessionUpdate, SQLiteStore

from .receivers import Receiver

FIELDS = {f.name for f in dataclasses.fields(Interrupt)}


@pytest.mark.skipif(
    not {"warn_before", "escalate_after"} <= FIELDS,
    reason="Interrupt has no warn_before/escalate_after yet (issue 23, approvals and escalation)",
)
def test_escalated_and_the_questions_own_warning(tmp_path: Path, receiver: Receiver) -> None:
    question = Interrupt(  # type: ignore[call-arg]
        id="q1",
        name="approve",
        source="before_tool_call",
        raised_at=1000.0,
        expires_at=2000.0,
        warn_before=100.0,
        escalate_after=300.0,
    )
    store = SQLiteStore(tmp_path / "s.db")
    pending = [question.to_dict()]
    update = SessionUpdate(
        expected_version=0,
        first_index=0,
        new_messages=[],
        pause=None,
        pending=pending,
        tools=[],
        format_version=1,
    )
    asyncio.run(store.save("s1", update))
    now = [1000.0]
    notifier = Notifier(
        store, Notifications(targets=(Webhook(receiver.url),)), clock=lambda: now[0]
    )

    def events_at(t: float) -> list[str]:
        now[0] = t
        asyncio.run(notifier.run_once())
        return [r.json["event"] for r in receiver.got]

    assert events_at(1299.0) == ["asked"]
    assert events_at(1300.0) == ["asked", "escalated"]
    assert events_at(1899.0) == ["asked", "escalated"]
    assert events_at(1900.0) == ["asked", "escalated", "deadline_near"]
    assert receiver.got[1].json["at"] == 1300.0 and receiver.got[2].json["at"] == 1900.0
