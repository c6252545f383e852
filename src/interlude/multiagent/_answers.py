"""The checks a graph's or swarm's ``resume`` makes before anything changes, and its audit.

They are an agent's (``Agent.resume``'s, reused through ``interlude._agent``'s public seam:
``check_by`` and ``check_answers``), made on every answer at once, whichever node it goes to:
the id must be pending, the answer JSON and of its question's response type
(AnswerValidationError), its deadline not passed (InterruptExpiredError), and, with ``shown=``,
the question the same as the one shown. A bad answer for one node leaves every node's pause
untouched. Each answer becomes one entry of the orchestration's audit trail, saying which node
it went to.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from .._agent import check_answers, check_by
from .._audit import AuditEntry
from .._frozen import freeze
from .._messages import JsonValue
from ..errors import NotPausedError, ResumeInputError
from ._events import node_path
from ._record import NodeRun

if TYPE_CHECKING:
    from .._interrupt import Interrupt
    from ._engine import EngineOwner

__all__ = ["Settled", "plan_expiry", "plan_resume"]


def plan_resume(
    owner: EngineOwner,
    answers: object,
    by: str | None,
    shown: Mapping[str, str] | None,
    now: float | None = None,
) -> tuple[dict[str, Mapping[str, JsonValue]], list[Mapping[str, JsonValue]]]:
    """The answers for each node (the orchestration's ids) and the audit entries, once every
    answer passed the checks (their errors otherwise, with nothing changed)."""
    kind = getattr(owner, "kind", "orchestration")
    if owner.record.status != "paused":
        raise NotPausedError(f"the {kind} is not paused; there is nothing to resume")
    if not isinstance(answers, Mapping) or not answers:
        raise ResumeInputError("answers must be a non-empty map of interrupt id to answer")
    if by is not None:
        check_by(by)
    now = _clock(owner)() if now is None else now
    asked: dict[str, Interrupt] = {}
    node_of: dict[str, str] = {}
    for name, run in owner.record.active.items():
        if run.waiting:
            for q in run.questions:
                asked[q.id], node_of[q.id] = q, name
    check_answers(asked, answers, now, shown)
    per_node: dict[str, dict[str, JsonValue]] = {}
    entries: list[Mapping[str, JsonValue]] = []
    for iid, answer in answers.items():
        per_node.setdefault(node_of[iid], {})[iid] = answer
        entry = AuditEntry.of(asked[iid], answer, "unknown" if by is None else by, now)
        path: list[JsonValue] = list(node_path(asked[iid]))
        entries.append(freeze({**entry.to_dict(), "node": path}))
    return {n: freeze(a) for n, a in per_node.items()}, entries


def _clock(owner: object) -> Callable[[], float]:
    """The owner's clock (``time.time`` for one without)."""
    clock = getattr(owner, "clock", None)
    return clock if callable(clock) else time.time


Settled = dict[str, NodeRun]
"""The runs a ``resume_expired`` carries on, by node, with what they are given."""


def plan_expiry(
    owner: EngineOwner, now: float | None = None
) -> tuple[Settled, list[Mapping[str, JsonValue]]]:
    """The runs with an expired question, each given its settlement, and the audit entries
    (``by == "expiry"``); ResumeInputError if none has expired (nothing changes then).

    A node-hook question is settled by the graph: its default becomes its answer, else it is
    marked expired (asked again, it raises InterruptExpiredError: fail closed). A question of a
    node's agent (or nested graph) is settled by that node's own ``resume_expired``, so the
    agent's trail and pause stay its own."""
    kind = getattr(owner, "kind", "orchestration")
    if owner.record.status != "paused":
        raise NotPausedError(f"the {kind} is not paused; there is nothing to settle")
    now = _clock(owner)() if now is None else now
    runs: Settled = {}
    entries: list[Mapping[str, JsonValue]] = []
    deadlines: list[float] = []
    for name, run in owner.record.active.items():
        if not run.waiting:
            continue
        given: dict[str, JsonValue] = {}
        expired: list[str] = []
        settle = False
        for q in run.questions:
            if q.expires_at is None:
                continue
            if q.expires_at > now:
                deadlines.append(q.expires_at)
                continue
            entry = AuditEntry.of_expiry(q, now).to_dict()
            entries.append(freeze({**entry, "node": list(node_path(q))}))
            if q.id in run.inner:
                settle = True
                continue
            expired.append(q.id)
            if q.has_default:
                given[q.id] = q.default
        if settle or expired:
            runs[name] = run.but(
                given=freeze(given), by=None, expired=(*run.expired, *expired), settle=settle
            )
    if not runs:
        raise ResumeInputError(
            "no pending interrupt has expired"
            + (f" (the next deadline is in {min(deadlines) - now:.0f} s)" if deadlines else "")
        )
    return runs, entries
