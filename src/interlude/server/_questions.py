"""A pending question as the session page shows it to one approver: what was shown, who may
answer (and whether this approver may, now), the votes so far toward a quorum, escalation,
and the form to answer with."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from ._approval_form import REMEMBER, form_of
from ._views import node_of, shown_digest

if TYPE_CHECKING:
    from .._interrupt import Interrupt
    from .._messages import JsonValue
    from ..operate import SessionView

__all__ = ["clock_text", "decision_lines", "question_item", "short_id", "votes_line", "worded"]


def clock_text(when: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when))


def short_id(interrupt_id: str) -> str:
    return hashlib.sha256(interrupt_id.encode()).hexdigest()[:8]


def votes_line(question: Interrupt, voters: Collection[str]) -> str | None:
    """ "1 of 2 approvals: ana" for a question with a quorum (None without one)."""
    if question.quorum == 1:
        return None
    names = f": {', '.join(voters)}" if voters else ""
    return f"{len(voters)} of {question.quorum} approvals{names}"


def question_item(
    view: SessionView, i: Interrupt, groups: Collection[str], now: float, answered_by: str | None
) -> dict[str, Any]:
    """What the session page needs of question ``i`` for an approver in ``groups``."""
    from ..operate import who_may_answer

    title, sentence, details = worded(i.reason)
    voters = view.votes.get(i.id, (None, ()))[1]
    return {
        "interrupt": i,
        "title": title or i.name,
        "node": node_of(i),
        "reason_text": sentence,
        "short": short_id(i.id),
        "shown": shown_digest(i) or "",
        "form": form_of(i),
        "remember": REMEMBER,
        "input_json": None
        if i.tool_use is None
        else json.dumps(i.tool_use.input, indent=2, ensure_ascii=False),
        "reason_json": details,
        "schema_json": None
        if i.response_schema is None
        else json.dumps(i.response_schema, indent=2, ensure_ascii=False),
        "raised": clock_text(i.raised_at),
        "deadline": None if i.expires_at is None else clock_text(i.expires_at),
        "expired": i.expires_at is not None and i.expires_at <= now,
        "answered_by": answered_by,
        "may_answer": i.may_answer(groups, now),
        "who": who_may_answer(i, now),
        "votes": votes_line(i, voters),
        "voted": voters,
        "escalated": i.escalated(now) and bool(i.escalate_to),
        "escalates": None
        if i.escalate_after is None
        else clock_text(i.raised_at + i.escalate_after),
    }


def decision_lines(decisions: Mapping[str, Mapping[str, JsonValue]]) -> list[str]:
    """The remembered decisions in words: "pay: approved for the session (note: ...)"."""
    lines = []
    for tool, d in sorted(decisions.items()):
        verdict = "approved" if d.get("approve") else "declined"
        scope = "the rest of this run" if d.get("scope") == "run" else "the session"
        note = f" (note: {d['note']})" if d.get("note") else ""
        lines.append(f"{tool}: {verdict} for {scope}{note}")
    return lines


def worded(reason: object) -> tuple[str | None, str | None, str | None]:
    """How a person reads a question's reason: (a title, a sentence, details as JSON). Short
    text is the title, longer text the sentence; an object's ``question`` (or ``message``) is
    the title and the rest of it the details; anything else is details."""
    if isinstance(reason, str) and reason.strip():
        text = reason.strip()
        return (text, None, None) if len(text) <= 120 else (None, text, None)
    if reason is None:
        return None, None, None
    if isinstance(reason, dict):
        for key in ("question", "message"):
            value = reason.get(key)
            if isinstance(value, str) and value.strip():
                rest = {k: v for k, v in reason.items() if k != key}
                return value.strip(), None, _json(rest) if rest else None
    return None, None, _json(reason)


def _json(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)
