"""Which notifications are due for what a store holds, with their deterministic ids and the
payloads delivered."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal, get_args

from .._messages import JsonValue
from ..sessions import Notification, PendingInterrupt

__all__ = ["EVENTS", "Event", "closing", "due_events", "notification", "notification_id"]

Event = Literal["asked", "deadline_near", "escalated", "expired", "answered"]
EVENTS: tuple[str, ...] = get_args(Event)
"""The events delivered, in the order they happen to a question."""


def notification_id(session_id: str, interrupt_id: str, event: str) -> str:
    """The same id for the same event about the same question, whoever computes it and however
    often: receivers de-duplicate by it."""
    text = json.dumps([session_id, interrupt_id, event], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _seconds(interrupt: object, name: str, default: float | None = None) -> float | None:
    """A question's ``warn_before`` or ``escalate_after`` (seconds), read so that this works
    with Interrupts that have the field and those that do not."""
    value = getattr(interrupt, name, None)
    if value is None:
        return default
    if hasattr(value, "total_seconds"):
        value = value.total_seconds()
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def due_events(
    p: PendingInterrupt, now: float, warn_before: float | None
) -> list[tuple[str, float]]:
    """The events due at ``now`` for a pending question, each with when it became due:
    ``asked`` always; ``deadline_near`` from ``warn_before`` (the question's own, else the
    given default) before its deadline until the deadline; ``expired`` once the deadline
    passed; ``escalated`` once ``escalate_after`` seconds passed since it was raised."""
    q = p.interrupt
    due: list[tuple[str, float]] = [("asked", p.raised_at)]
    deadline = q.expires_at
    if deadline is not None:
        warn = _seconds(q, "warn_before", warn_before)
        if deadline <= now:
            due.append(("expired", deadline))
        elif warn is not None and now >= deadline - warn:
            due.append(("deadline_near", deadline - warn))
    escalate = _seconds(q, "escalate_after")
    if escalate is not None and now >= p.raised_at + escalate:
        due.append(("escalated", p.raised_at + escalate))
    return due


def closing(asked: Notification, audit: list[dict[str, JsonValue]]) -> tuple[str, dict[str, Any]]:
    """The event that closed a question no longer pending, from its session's audit trail:
    ``expired`` (settled by its deadline), ``answered`` (with who answered, when and what), or
    ``withdrawn`` (no answer recorded: the pause was discarded)."""
    for entry in reversed(audit):
        if isinstance(entry, dict) and entry.get("interrupt_id") == asked.interrupt_id:
            answer = {"by": entry.get("by"), "at": entry.get("at"), "answer": entry.get("answer")}
            expired = entry.get("expired") is True or entry.get("by") == "expiry"
            return ("expired" if expired else "answered"), {"answer": answer}
    return "withdrawn", {}


def notification(
    event: str,
    *,
    session_id: str,
    interrupt_id: str,
    agent: str | None,
    question: dict[str, JsonValue],
    at: float,
    now: float,
    extra: dict[str, Any] | None = None,
) -> Notification:
    """A pending notification due now, with its payload (the link is added when delivered)."""
    nid = notification_id(session_id, interrupt_id, event)
    payload: dict[str, JsonValue] = {
        "id": nid,
        "event": event,
        "session_id": session_id,
        "agent": agent,
        "question": question,
        "at": at,
    }
    payload.update(extra or {})
    withdrawn = event == "withdrawn"  # a record that closes the question, never delivered
    return Notification(
        id=nid,
        session_id=session_id,
        interrupt_id=interrupt_id,
        event=event,
        payload=payload,
        created_at=now,
        status="skipped" if withdrawn else "pending",
        next_attempt_at=None if withdrawn else now,
    )
