"""The notification outbox, shared by the stores: checking what ``add_notifications`` is given,
reading back what a store kept, and the rules of claiming and settling a delivery."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Literal, get_args

from .._json import loads as strict_json
from ..errors import SessionCorruptError, StateFormatError
from ._protocol import CLOSING_EVENTS, Notification, NotificationStatus, check_session_id

__all__ = [
    "CLOSING_EVENTS",
    "check_notifications",
    "due_order",
    "notification_from_row",
    "read_notification",
    "settled",
]

_STATUSES = frozenset(get_args(NotificationStatus))


def _is_time(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_notifications(notifications: list[Notification]) -> list[Notification]:
    """The notifications of an ``add_notifications`` call, checked (StateFormatError for one
    that cannot be stored), without repeated ids (the first kept)."""
    import json

    seen: set[str] = set()
    out = []
    for i, n in enumerate(notifications):
        if not isinstance(n, Notification):
            raise StateFormatError(f"notification {i} is a {type(n).__name__}, not a Notification")
        check_session_id(n.session_id)
        problem = None
        if not (isinstance(n.id, str) and n.id and isinstance(n.interrupt_id, str)):
            problem = "needs an id and an interrupt id (text)"
        elif not (isinstance(n.event, str) and n.event):
            problem = f"has event {n.event!r}, not a name"
        elif n.status not in _STATUSES:
            problem = f"has status {n.status!r}, not one of {sorted(_STATUSES)}"
        elif not isinstance(n.payload, dict):
            problem = "has a payload that is not an object"
        elif not _is_time(n.created_at) or not (
            n.next_attempt_at is None or _is_time(n.next_attempt_at)
        ):
            problem = "has a created_at or next_attempt_at that is not a time"
        elif n.status == "pending" and n.next_attempt_at is None:
            problem = "is pending without a next_attempt_at"
        if problem is not None:
            raise StateFormatError(f"notification {n.id!r} {problem}")
        json.dumps(n.payload)  # TypeError now rather than in the transaction
        if n.id not in seen:
            seen.add(n.id)
            out.append(n)
    return out


def read_notification(raw: object, where: str) -> Notification:
    """A stored notification (its JSON text, or an object already parsed); SessionCorruptError,
    naming ``where`` it is kept, if it is malformed."""
    data: Any = raw
    if isinstance(raw, bytes | str):
        try:
            data = strict_json(raw)
        except (ValueError, RecursionError) as exc:
            raise SessionCorruptError(f"a notification {where} is not valid JSON ({exc})") from None
    d = data if isinstance(data, dict) else {}
    ok = (
        all(isinstance(d.get(k), str) for k in ("id", "session_id", "interrupt_id", "event"))
        and isinstance(d.get("payload"), dict)
        and _is_time(d.get("created_at"))
        and d.get("status") in _STATUSES
        and isinstance(d.get("attempts"), int)
        and (d.get("next_attempt_at") is None or _is_time(d.get("next_attempt_at")))
        and (d.get("last_error") is None or isinstance(d.get("last_error"), str))
    )
    if not ok:
        raise SessionCorruptError(f"a notification {where} is malformed: {str(raw)[:200]!r}")
    nxt = d["next_attempt_at"]
    return Notification(
        id=d["id"],
        session_id=d["session_id"],
        interrupt_id=d["interrupt_id"],
        event=d["event"],
        payload=d["payload"],
        created_at=float(d["created_at"]),
        status=d["status"],
        attempts=d["attempts"],
        next_attempt_at=None if nxt is None else float(nxt),
        last_error=d["last_error"],
    )


def notification_from_row(row: tuple[Any, ...]) -> Notification:
    """A notification from a database row (id, session_id, interrupt_id, event, status,
    attempts, next_attempt_at, created_at, last_error, payload JSON), checked; the SQL
    stores' one reading of their outbox table."""
    keys = ("id", "session_id", "interrupt_id", "event", "status", "attempts", "next_attempt_at")
    data: dict[str, Any] = dict(zip(keys, row[:7], strict=True))
    data["created_at"], data["last_error"] = row[7], row[8]
    try:
        data["payload"] = json.loads(row[9])
    except (ValueError, TypeError, RecursionError):
        data["payload"] = None  # reported as malformed by read_notification
    return read_notification(data, "in the database")


def due_order(n: Notification) -> tuple[float, str]:
    return (n.next_attempt_at or 0.0, n.id)


def settled(
    n: Notification,
    outcome: Literal["sent", "retry", "failed"],
    retry_at: float | None,
    error: str | None,
) -> Notification:
    """``n`` after a delivery attempt with ``outcome``."""
    if outcome == "sent":
        return replace(n, status="sent", attempts=n.attempts + 1, next_attempt_at=None)
    if outcome == "retry":
        if retry_at is None:
            raise StateFormatError(f"notification {n.id!r}: a retry needs retry_at")
        return replace(
            n, status="pending", attempts=n.attempts + 1, next_attempt_at=retry_at, last_error=error
        )
    if outcome == "failed":
        return replace(
            n, status="failed", attempts=n.attempts + 1, next_attempt_at=None, last_error=error
        )
    raise StateFormatError(f"unknown delivery outcome {outcome!r}")
