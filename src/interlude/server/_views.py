"""The JSON shapes the API returns (the HTML pages render the same data)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING, Any

from ..operate import answer_key

if TYPE_CHECKING:
    from .._interrupt import Interrupt
    from ..operate import SessionView
    from ..sessions import PendingInterrupt, RecordedAnswer

__all__ = [
    "fingerprint",
    "interrupt_json",
    "node_of",
    "pending_json",
    "session_json",
    "shown_digest",
]


def node_of(i: Interrupt) -> str | None:
    """The node of a graph (or swarm) that asked ``i`` ("writer"; "outer/inner" through a
    nested one), None for an agent's own question."""
    if not any(u.id.startswith("node:") for u in i.via):
        return None  # the usual case: interlude.multiagent is not imported for it
    from ..multiagent import describe_node

    return describe_node(i)


def interrupt_json(session_id: str, i: Interrupt, now: float) -> dict[str, Any]:
    """A question as shown: its key (bound to its session), tool and input, reason, answer
    schema, deadline, digest, and who may answer (groups, quorum, escalation)."""
    return {
        "id": answer_key(session_id, i.id),
        "question_id": i.id,
        "name": i.name,
        "node": node_of(i),
        "reason": i.reason,
        "source": i.source,
        "tool": None if i.tool_use is None else i.tool_use.name,
        "input": None if i.tool_use is None else i.tool_use.input,
        "shown": shown_digest(i),
        "response_schema": i.response_schema,
        "raised_at": i.raised_at,
        "expires_at": i.expires_at,
        "expired": i.expires_at is not None and i.expires_at <= now,
        "has_default": i.has_default,
        "default": i.default if i.has_default else None,
        "approvers": list(i.approvers),
        "quorum": i.quorum,
        "escalate_to": list(i.escalate_to),
        "escalates_at": None if i.escalate_after is None else i.raised_at + i.escalate_after,
        "escalated": i.escalated(now),
    }


def shown_digest(i: Interrupt) -> str | None:
    """The question's ``shown`` digest, or None when it cannot be computed (text that is not
    Unicode, such as a lone surrogate, in its data)."""
    try:
        return i.digest
    except UnicodeError:
        return None


def pending_json(p: PendingInterrupt, now: float) -> dict[str, Any]:
    return {
        "session": p.session_id,
        "agent": p.agent,
        **interrupt_json(p.session_id, p.interrupt, now),
        "raised_at": p.raised_at,
        "age_seconds": round(max(now - p.raised_at, 0.0), 1),
    }


def recorded_json(r: RecordedAnswer) -> dict[str, Any]:
    return dict(r.to_dict())


def session_json(
    view: SessionView, now: float, groups: Collection[str] | None = None
) -> dict[str, Any]:
    """The session as the API returns it; with ``groups`` (the asker's), each question says
    whether they may answer it now (``may_answer``)."""
    out = {
        "session": view.session_id,
        "agent": view.agent,
        "kind": view.kind,
        "version": view.version,
        "running": view.running,
        "stopped": view.stopped,
        "messages": [m.to_dict() for m in view.messages],
        "interrupts": [_question_json(view, i, now, groups) for i in view.interrupts],
        "recorded": [recorded_json(r) for r in view.recorded],
        "audit": [e.to_dict() for e in view.audit],
        "decisions": view.decisions,
    }
    workflow = getattr(view, "workflow", None)  # a WorkflowView: what Temporal says of the run
    if workflow is not None:
        out["workflow"] = workflow
    return out


def _question_json(
    view: SessionView, i: Interrupt, now: float, groups: Collection[str] | None
) -> dict[str, Any]:
    voted, voters = view.votes.get(i.id, (None, ()))
    return {
        **interrupt_json(view.session_id, i, now),
        "votes": {"answer": voted, "by": list(voters)} if voters else None,
        "may_answer": True if groups is None else i.may_answer(groups, now),
    }


def fingerprint(items: Iterable[tuple[str, str, bool, bool, bool]]) -> str:
    """A short digest of the pending list's state (session, question, expired, answered,
    escalated)."""
    text = json.dumps(sorted(items))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
