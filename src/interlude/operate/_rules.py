"""Who may answer and how votes count, where people answer (the inbox): the checks
``Inbox.record`` applies before an answer is stored, and the words of its refusals.

Groups are checked here, not by ``resume`` (the application's own call, which knows names, not
groups). Votes toward a quorum are checked against the pause's votes exactly as ``resume``
counts them, so an answer the worker's resume would refuse is never recorded.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from .._messages import JsonValue
from ..errors import (
    AlreadyAnsweredError,
    NotAllowedToAnswerError,
    ResumeInputError,
    SessionConflictError,
)

if TYPE_CHECKING:
    from .._audit import AuditEntry
    from .._interrupt import Interrupt
    from ..sessions import RecordedAnswer

__all__ = [
    "Votes",
    "answered_first",
    "check_allowed",
    "check_taken",
    "check_votes",
    "queue_conflict",
    "who_may_answer",
]

Votes = Mapping[str, tuple[JsonValue, tuple[str, ...]]]
"""Question id -> (the answer voted for, who voted, in order)."""


def who_may_answer(question: Interrupt, now: float) -> str:
    """Who may answer ``question`` at ``now``, in words ("anyone", "members of ops")."""
    if not question.approvers:
        return "anyone"
    groups = list(question.approvers)
    if question.escalated(now):
        groups += [g for g in question.escalate_to if g not in groups]
    text = "members of " + ", ".join(groups)
    if question.escalate_after is not None and not question.escalated(now):
        text += f" (and of {', '.join(question.escalate_to)} once it escalates)"
    return text


def check_allowed(
    asked: Mapping[str, Interrupt],
    answers: Mapping[str, JsonValue],
    groups: Collection[str],
    now: float,
    by: str,
) -> None:
    """NotAllowedToAnswerError for the first answered question ``by`` (a member of
    ``groups``) may not answer at ``now``; unknown ids are left to ``check_answers``."""
    for iid in answers:
        question = asked.get(iid)
        if question is None or question.may_answer(groups, now):
            continue
        theirs = ", ".join(groups) or "no group"
        raise NotAllowedToAnswerError(
            f"{by} ({theirs}) may not answer question {question.name!r} ({iid}): only "
            f"{who_may_answer(question, now)} may; nothing was recorded",
            interrupt_id=iid,
        )


def check_votes(
    asked: Mapping[str, Interrupt], answers: Mapping[str, JsonValue], by: str, votes: Votes
) -> None:
    """Refuse a vote ``resume`` would refuse, naming the votes so far: SessionConflictError
    (409) when ``by`` voted already, ResumeInputError (422) for another answer than the one
    voted for so far."""
    from .._agent import same_person, vote_problem

    for iid, value in answers.items():
        question = asked.get(iid)
        if question is None:
            continue
        problem = vote_problem(question, value, by, votes)
        if problem is None:
            continue
        if same_person(by, votes.get(iid, (None, ()))[1]):
            raise SessionConflictError(f"{problem}; nothing was recorded")
        raise ResumeInputError(f"{problem}; nothing was recorded")


def queue_conflict(
    session_id: str,
    asked: Mapping[str, Interrupt],
    votes: Votes,
    queued: Sequence[RecordedAnswer],
    by: str,
) -> SessionConflictError | None:
    """The error for answers refused because the queue already holds one for a question (the
    store keeps one recorded answer per question, the first wins): "being applied, try again"
    for a vote that leaves its quorum short, "answered first" for one that settles it. None if
    no queued answer is to a question answered here."""
    from .._agent import declines, same_person

    if not queued:
        return None
    first: list[RecordedAnswer] = []
    waiting: list[RecordedAnswer] = []
    for r in queued:
        question = asked.get(r.interrupt_id)
        voters = votes.get(r.interrupt_id, (None, ()))[1]
        short = (
            question is not None
            and question.quorum > 1
            and not declines(r.answer)
            and len(voters) + 1 < question.quorum
        )
        (waiting if short else first).append(r)
    if first:
        return answered_first(session_id, {r.interrupt_id: r.by for r in first})
    parts = []
    for r in waiting:
        question = asked[r.interrupt_id]
        names = [*votes.get(r.interrupt_id, (None, ()))[1], r.by]
        you = " (yours)" if same_person(r.by, [by]) else ""
        parts.append(
            f"{r.by}'s vote{you} on {question.name!r} ({r.interrupt_id}) is being applied "
            f"({len(names)} of {question.quorum} with it: {', '.join(names)})"
        )
    return SessionConflictError(
        f"session {session_id!r}: {'; '.join(parts)}: try again in a moment; nothing was recorded"
    )


def check_taken(
    session_id: str,
    answers: Mapping[str, JsonValue],
    audit: Sequence[AuditEntry],
    recorded: Sequence[RecordedAnswer],
) -> None:
    """AlreadyAnsweredError for answers to questions someone answered first: settled in the
    audit trail, or with an answer recorded and waiting to be applied (first wins, whichever
    door it came through). The store checks this again, atomically, as it saves."""
    first = {  # a vote short of its quorum leaves the question pending: not an answer
        e.interrupt_id: e.by
        for e in audit
        if e.interrupt_id in answers and not e.expired and e.settles
    }
    first.update((r.interrupt_id, r.by) for r in recorded if r.interrupt_id in answers)
    if first:
        raise answered_first(session_id, first)


def answered_first(session_id: str, first: Mapping[str, str]) -> AlreadyAnsweredError:
    """The error for answers to questions someone answered first (named, by question)."""
    who = "; ".join(f"{iid} by {by}" for iid, by in first.items())
    iid, by = next(iter(first.items()))
    return AlreadyAnsweredError(
        f"session {session_id!r}: already answered ({who}): the first answer wins; nothing "
        "was recorded",
        interrupt_id=iid,
        by=by,
    )
