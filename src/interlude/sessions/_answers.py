"""Recorded answers, shared by the stores: checking what ``record_answers`` is given, reading
back what a store kept, and the work order of ``sessions_to_resume``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeGuard

from .._json import loads as strict_json
from .._messages import JsonValue
from ..errors import (
    AlreadyAnsweredError,
    CallTakenError,
    SessionConflictError,
    SessionCorruptError,
    SessionError,
    StateFormatError,
)
from ._protocol import RecordedAnswer

__all__ = [
    "answer_entries",
    "answered_ids",
    "call_taken",
    "check_version",
    "queued_first",
    "claim_deadline",
    "conflict",
    "no_session",
    "read_answer",
    "read_answer_rows",
    "resume_order",
    "reserved_by_other",
]


def _is_time(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def answer_entries(
    session_id: str, answers: list[dict[str, JsonValue]]
) -> list[dict[str, JsonValue]]:
    """The answers of a ``record_answers`` call as the objects a store keeps (``interrupt_id``,
    ``answer``, ``by``, ``at``, ``shown``; ``at`` a float). StateFormatError if one is not of
    that shape; SessionConflictError if an interrupt id appears twice."""
    entries: list[dict[str, JsonValue]] = []
    seen: set[str] = set()
    for i, a in enumerate(answers):
        if not isinstance(a, dict):
            raise StateFormatError(
                f"session {session_id!r}: answer {i} is a {type(a).__name__}, not an object"
            )
        iid, by, at, shown = a.get("interrupt_id"), a.get("by"), a.get("at"), a.get("shown")
        problem = None
        if not isinstance(iid, str):
            problem = "has no interrupt id"
        elif "answer" not in a:
            problem = "has no 'answer'"
        elif not isinstance(by, str):
            problem = f"has by {by!r}, not a name"
        elif not _is_time(at):
            problem = f"has at {at!r}, not a time"
        elif not (shown is None or isinstance(shown, str)):
            problem = f"has shown {shown!r}, not a digest or null"
        if problem is not None:
            raise StateFormatError(f"session {session_id!r}: answer {i} {problem}")
        assert isinstance(iid, str) and _is_time(at)
        if iid in seen:
            raise SessionConflictError(
                f"session {session_id!r}: interrupt {iid!r} is answered twice in one call; "
                "nothing was recorded"
            )
        seen.add(iid)
        entry: dict[str, JsonValue] = {"interrupt_id": iid, "answer": a["answer"], "by": by}
        entries.append(entry | {"at": float(at), "shown": shown})
    return entries


def answered_ids(audit: list[dict[str, JsonValue]]) -> list[str]:
    """The questions a save's audit entries answer (a vote too; not a deadline's settling):
    a save may answer none of them while another answer to it waits in the queue."""
    if not audit:
        return []
    return [
        iid
        for e in audit
        if isinstance(e, dict)
        and isinstance(iid := e.get("interrupt_id"), str)
        and not e.get("expired")
    ]


def queued_first(session_id: str, answer: RecordedAnswer) -> AlreadyAnsweredError:
    """The refusal of a save that answers a question whose answer waits in the queue (recorded
    first, by another door): the first answer wins; the save wrote nothing."""
    return AlreadyAnsweredError(
        f"session {session_id!r}: question {answer.interrupt_id!r} was answered first by "
        f"{answer.by} (recorded, waiting to be applied): the first answer wins; nothing was "
        "saved",
        interrupt_id=answer.interrupt_id,
        by=answer.by,
    )


def check_version(session_id: str, stored: int, expected: int | None) -> None:
    """SessionConflictError when answers checked against version ``expected`` of a session
    would be recorded at version ``stored``: it moved on meanwhile (check them again)."""
    if expected is not None and stored != expected:
        raise SessionConflictError(
            f"session {session_id!r} is at version {stored}, not {expected}: it changed while "
            "the answers were checked; nothing was recorded"
        )


def conflict(session_id: str, interrupt_id: str) -> AlreadyAnsweredError:
    return AlreadyAnsweredError(
        f"session {session_id!r}: interrupt {interrupt_id!r} already has a recorded answer "
        "(the first answer wins); nothing was recorded",
        interrupt_id=interrupt_id,
    )


def no_session(session_id: str) -> SessionError:
    return SessionError(f"there is no session {session_id!r} to record answers for")


def read_answer(session_id: str, seq: object, raw: object, where: str = "") -> RecordedAnswer:
    """A stored answer (its JSON text, or an object already parsed) with its ``seq``;
    SessionCorruptError, naming the session (and ``where`` it is kept), if it is malformed."""
    place = f" ({where})" if where else ""

    def corrupt(detail: str) -> SessionCorruptError:
        return SessionCorruptError(
            f"session {session_id!r} is corrupt{place}: recorded answer {seq!r} {detail}"
        )

    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise corrupt("has no valid seq")
    data: Any = raw
    if isinstance(raw, bytes | str):
        try:
            data = strict_json(raw)
        except (ValueError, RecursionError) as exc:  # bad JSON, bad UTF-8, nested too deeply
            raise corrupt(f"is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise corrupt(f"is a {type(data).__name__}, not an object")
    iid, by, at, shown = data.get("interrupt_id"), data.get("by"), data.get("at"), data.get("shown")
    if not isinstance(iid, str) or not isinstance(by, str) or not _is_time(at):
        raise corrupt("lacks its interrupt id, who answered, or when")
    if "answer" not in data or not (shown is None or isinstance(shown, str)):
        raise corrupt("lacks its answer or has a bad digest")
    return RecordedAnswer(
        seq=seq, interrupt_id=iid, answer=data["answer"], by=by, at=float(at), shown=shown
    )


def read_answer_rows(
    session_id: str, rows: Iterable[Sequence[Any]], where: str = "in the database"
) -> list[RecordedAnswer]:
    """Rows of ``(seq, interrupt_id, data)`` as answers; SessionCorruptError if one is
    malformed or filed under another question than its data names."""
    found = []
    for seq, iid, raw in rows:
        answer = read_answer(session_id, seq, raw, where)
        if answer.interrupt_id != iid:
            raise SessionCorruptError(
                f"session {session_id!r} is corrupt ({where}): recorded answer {seq} is filed "
                f"under {iid!r}"
            )
        found.append(answer)
    return found


def claim_deadline(claim: object) -> float | None:
    """When a stored run claim's lease runs out (its ``expires_at``), or None if it has none."""
    expires = claim.get("expires_at") if isinstance(claim, dict) else None
    if type(expires) is float:  # as claims are made
        return expires
    return float(expires) if _is_time(expires) else None


def resume_order(since: dict[str, float], limit: int | None) -> list[str]:
    """Session ids by the time their oldest work became due, then id, cut to ``limit``."""
    found = sorted(since, key=lambda sid: (since[sid], sid))
    return found if limit is None else found[:limit]


def reserved_by_other(reservation: object, owner: str, now: float) -> bool:
    """Whether a stored reservation (``{"owner", "until"}``, or None) keeps ``owner`` from a
    session at ``now``: it is another owner's and has not lapsed (``until > now``). A
    reservation that is not of that shape holds nobody off (it is advisory)."""
    if not isinstance(reservation, dict):
        return False
    until = reservation.get("until")
    return reservation.get("owner") != owner and _is_time(until) and until > now


def call_taken(session_id: str, key: str, holder: str) -> CallTakenError:
    """The refusal of a save of ``session_id`` that starts call ``key``, which ``holder``
    claimed first (see ``CallClaims``)."""
    return CallTakenError(
        f"session {session_id!r}: the tool call {key} was claimed first by session {holder!r} "
        "(forked from it, or it from this one); nothing was written",
        key=key,
        holder=holder,
    )
