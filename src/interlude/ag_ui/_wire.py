"""Interlude values in AG-UI's terms: questions as AG-UI interrupts, resume entries as answers.

An AG-UI interrupt carries the question's ``id``; its ``reason`` is the question's name (the
kind of thing asked, such as ``approve``), its ``message`` the question's reason as text, its
``toolCallId`` the tool call it is about, ``responseSchema`` and ``expiresAt`` (ISO 8601,
UTC) as the question has them. ``metadata.interlude`` holds the rest: the reason as JSON, the
question's ``digest`` (send it back as ``metadata.digest`` of the resume entry to have the
answer refused if the question changed meanwhile), its source, the calls it came through and
its default.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..errors import ResumeInputError, UnknownInterruptError

if TYPE_CHECKING:
    from ag_ui.core import Interrupt as WireInterrupt
    from ag_ui.core import ResumeEntry

    from .._interrupt import Interrupt
    from .._messages import JsonValue

__all__ = ["DECLINE", "answers_from", "iso", "wire_interrupt"]

DECLINE: JsonValue = False
"""The answer a ``cancelled`` resume entry gives: the question is declined (checked against
its response schema like any answer)."""


def iso(when: float) -> str:
    """``when`` (seconds since the epoch) as ISO 8601 in UTC, to the millisecond."""
    stamp = datetime.fromtimestamp(when, UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def wire_interrupt(question: Interrupt) -> WireInterrupt:
    """``question`` as an AG-UI interrupt."""
    from ag_ui.core import Interrupt as WireInterrupt

    reason = question.reason
    message = reason if isinstance(reason, str) else json.dumps(reason, ensure_ascii=False)
    detail: dict[str, JsonValue] = {
        "name": question.name,
        "reason": reason,
        "digest": question.digest,
        "source": question.source,
        "via": [use.name for use in question.via],
    }
    if question.has_default:
        detail["default"] = question.default
    return WireInterrupt(
        id=question.id,
        reason=question.name,
        message=message,
        tool_call_id=None if question.tool_use is None else question.tool_use.id,
        response_schema=question.response_schema,
        expires_at=None if question.expires_at is None else iso(question.expires_at),
        metadata={"interlude": detail},
    )


def answers_from(
    entries: Sequence[ResumeEntry],
    pending: Sequence[Interrupt],
    answered: dict[str, str],
) -> tuple[dict[str, JsonValue], dict[str, str]]:
    """The answers and ``shown`` digests of a run's ``resume`` entries, for ``resume``.

    ``answered`` maps the ids of questions answered earlier to who answered them. Refused
    before anything changes: an entry for the same question twice (ResumeInputError), for a
    question answered earlier (UnknownInterruptError naming who answered it) and, by
    ``resume`` itself, an unknown, expired, mistyped or stale one. ``cancelled`` declines.
    """
    open_ids = {q.id for q in pending}
    answers: dict[str, JsonValue] = {}
    shown: dict[str, str] = {}
    for entry in entries:
        iid = entry.interrupt_id
        if iid in answers:
            raise ResumeInputError(
                f"resume answers question {iid!r} twice; send one entry per question"
            )
        if iid not in open_ids and iid in answered:
            raise UnknownInterruptError(
                f"question {iid!r} was already answered (by {answered[iid]}); nothing changed. "
                "A run without resume[] shows where the thread stands"
            )
        answers[iid] = DECLINE if entry.status == "cancelled" else entry.payload
        digest = (entry.metadata or {}).get("digest")
        if digest is not None:
            if not isinstance(digest, str):
                raise ResumeInputError(f"metadata.digest of {iid!r} is not text")
            shown[iid] = digest
    return answers, shown
