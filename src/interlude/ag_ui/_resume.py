"""A run's ``resume[]`` entries as the answers ``Agent.resume`` takes, or why they are refused.

The agent checks the answers themselves (pending, JSON, response type, deadline, what was
shown) before anything changes. What only the wire knows is checked here first: an entry
given twice, one for a question answered already (in the audit trail, or recorded in the
inbox for a worker), a digest that is not the pending question's (stale), a person not in
the question's groups, a ``cancelled`` entry for a question whose answer cannot decline.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._messages import JsonValue
from ..errors import ResumeError
from ._translate import METADATA_KEY

if TYPE_CHECKING:
    from ag_ui.core import ResumeEntry

    from .._audit import AuditEntry
    from .._interrupt import Interrupt
    from ..sessions import RecordedAnswer

__all__ = ["Refused", "Resume", "resume_of"]


class Refused(ResumeError):
    """A resume entry refused before the agent saw it; ``code`` is the RUN_ERROR code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Resume:
    """What a run's ``resume[]`` asks of the agent: the answers (``cancelled`` entries as
    their question's decline), the digests the client echoed, and the ids cancelled after
    their deadline (settled by expiry, with their default or as declined)."""

    answers: dict[str, JsonValue] = field(default_factory=dict)
    shown: dict[str, str] = field(default_factory=dict)
    expired: list[str] = field(default_factory=list)


def resume_of(
    entries: Sequence[ResumeEntry],
    pending: Iterable[Interrupt],
    audit: Iterable[AuditEntry],
    recorded: Iterable[RecordedAnswer],
    groups: Collection[str],
    now: float,
) -> Resume:
    """The answers of ``entries`` to the ``pending`` questions, or :class:`Refused`."""
    asked = {q.id: q for q in pending}
    settled = {a.interrupt_id: a for a in audit if a.vote is None}
    waiting = {r.interrupt_id: r for r in recorded}
    seen: set[str] = set()
    out = Resume()
    for entry in entries:
        key = entry.interrupt_id
        if key in seen:
            raise Refused("duplicate", f"interrupt {key!r} is answered twice in resume[]")
        seen.add(key)
        question = asked.get(key)
        if question is None:
            raise _not_pending(key, settled.get(key), bool(asked))
        if key in waiting:
            r = waiting[key]
            raise Refused(
                "already_answered",
                f"interrupt {key!r} is answered already: {r.by} answered it in the inbox and "
                "a worker applies it",
            )
        if not question.may_answer(groups, now):
            raise Refused(
                "not_allowed",
                f"question {question.name!r} ({key}) may be answered only by the groups "
                f"{list(question.approvers)!r}",
            )
        digest = _digest(entry.metadata)
        if digest is not None:
            if digest != question.digest:
                raise Refused(
                    "stale",
                    f"question {question.name!r} ({key}) is not the one that was shown: its "
                    "data changed since; nothing was answered, look at it again",
                )
            out.shown[key] = digest
        expires = question.expires_at
        if entry.status == "cancelled" and expires is not None and expires <= now:
            out.expired.append(key)  # settled by its deadline in the same resume
            out.shown.pop(key, None)
            continue
        if entry.status == "cancelled":
            out.answers[key] = _decline(question, now)
        else:
            out.answers[key] = entry.payload
    return out


def _not_pending(key: str, answered: AuditEntry | None, paused: bool) -> Refused:
    if answered is not None:
        how = "its deadline settled it" if answered.expired else f"{answered.by} answered it"
        return Refused("already_answered", f"interrupt {key!r} is answered already: {how}")
    if not paused:
        return Refused("not_paused", f"interrupt {key!r}: the thread is not paused")
    return Refused("unknown_interrupt", f"no pending interrupt has id {key!r}")


def _digest(metadata: Mapping[str, Any] | None) -> str | None:
    """The digest a client echoed in an entry's ``metadata.interlude.digest``, if any."""
    ours = (metadata or {}).get(METADATA_KEY)
    if not isinstance(ours, Mapping):
        return None
    digest = ours.get("digest")
    if digest is not None and not isinstance(digest, str):
        raise Refused("invalid_resume", f"metadata.{METADATA_KEY}.digest is text, got {digest!r}")
    return digest


def _decline(question: Interrupt, now: float) -> JsonValue:
    """The answer that declines ``question`` (``"fail"`` for an in-doubt call, else ``False``
    or ``{"approve": false}``, whichever its response type takes)."""
    from .._agent import check_answers
    from ..errors import AnswerValidationError, ResumeInputError

    candidates: list[JsonValue] = ["fail"] if question.source == "in_doubt" else []
    candidates += [False, {"approve": False}]
    for value in candidates:
        try:
            check_answers({question.id: question}, {question.id: value}, now)
        except (AnswerValidationError, ResumeInputError):
            continue
        return value
    raise Refused(
        "invalid_answer",
        f"question {question.name!r} ({question.id}) cannot be cancelled: its response type "
        'takes no decline (false or {"approve": false}); answer it instead',
    )
