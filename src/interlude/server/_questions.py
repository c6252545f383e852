"""A pending question as the pages show it to one approver: what was shown (in words: its
title, a sentence, the details that say more than the call), who may answer (and whether this
approver may, now), the votes so far toward a quorum, escalation, and the form to answer
with."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._approval_form import REMEMBER, form_of
from ._views import node_of, shown_digest

if TYPE_CHECKING:
    from .._interrupt import Interrupt
    from .._messages import JsonValue, ToolUse
    from ..operate import SessionView

__all__ = [
    "clock_text",
    "decision_lines",
    "plain",
    "policy_line",
    "question_item",
    "short_id",
    "shown_summary",
    "votes_line",
    "worded",
]


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

    title, sentence, details = worded(i.reason, i.tool_use)
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
        "reason_json": None if details is None else _json(details),
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
        "policy": policy_line(i.reason, "policy"),
        "shadow": policy_line(i.reason, "shadow"),
        "voted": voters,
        "escalated": i.escalated(now) and bool(i.escalate_to),
        "escalates": None
        if i.escalate_after is None
        else clock_text(i.raised_at + i.escalate_after),
    }


def policy_line(reason: object, key: str) -> str | None:
    """Which rule of the agent's policy asked (``key`` "policy"), or what its shadow policy
    would have done ("shadow"), in words; None if the question says neither."""
    verdict = reason.get(key) if isinstance(reason, Mapping) else None
    if not isinstance(verdict, Mapping):
        return None
    version = verdict.get("policy")
    named = f"policy {version}" if isinstance(version, str) else "the policy"
    rule = verdict.get("rule")
    which = f"rule {rule}" if isinstance(rule, int) else "its default"
    text = verdict.get("rule_text")
    shown = f" ({text})" if isinstance(text, str) and isinstance(rule, int) else ""
    why = verdict.get("why")
    because = f"; the rule could not be evaluated: {why}" if isinstance(why, str) else ""
    if key == "shadow":
        return f"Shadow {named} would {verdict.get('then')}: {which}{shown}{because}"
    return f"Asked by {named}, {which}{shown}{because}"


def decision_lines(decisions: Mapping[str, Mapping[str, JsonValue]]) -> list[str]:
    """The remembered decisions in words: "pay: approved for the session (note: ...)"."""
    lines = []
    for tool, d in sorted(decisions.items()):
        verdict = "approved" if d.get("approve") else "declined"
        scope = "the rest of this run" if d.get("scope") == "run" else "the session"
        note = f" (note: {d['note']})" if d.get("note") else ""
        lines.append(f"{tool}: {verdict} for {scope}{note}")
    return lines


def worded(
    reason: object, tool_use: ToolUse | None = None
) -> tuple[str | None, str | None, object | None]:
    """How a person reads a question's reason: (a title, a sentence, details). Short text is
    the title, longer text the sentence; an object's ``question`` (or ``message``) is the
    title and the rest of it the details, less what the page shows already (a ``tool`` that
    names the call's tool, a field the call's input holds with the same value); anything else
    is details."""
    if isinstance(reason, str) and reason.strip():
        text = reason.strip()
        return (text, None, None) if len(text) <= 120 else (None, text, None)
    if reason is None:
        return None, None, None
    if isinstance(reason, Mapping):
        rest = _unshown(reason, tool_use)
        for key in ("question", "message"):
            value = reason.get(key)
            if isinstance(value, str) and value.strip():
                rest.pop(key, None)
                return value.strip(), None, rest or None
        return None, None, rest or None
    return None, None, reason


def _unshown(reason: Mapping[str, object], tool_use: ToolUse | None) -> dict[str, object]:
    """The fields of ``reason`` the page does not show already with the call."""
    if tool_use is None:
        return dict(reason)
    given = tool_use.input
    return {
        k: v
        for k, v in reason.items()
        if not (k == "tool" and v == tool_use.name)
        and not (k in given and given[k] == v)
        and k not in _OWN_LINES
    }


_OWN_LINES = ("policy", "shadow")
"""Reason fields the page shows on lines of their own (see ``policy_line``)."""


def shown_summary(i: Interrupt, limit: int = 160) -> str:
    """What question ``i`` shows, in a line for the list (whose other columns have its title
    and tool): the call's input, a long reason's sentence, and the details, in words."""
    _, sentence, details = worded(i.reason, i.tool_use)
    parts = [] if i.tool_use is None or not i.tool_use.input else [plain(i.tool_use.input)]
    parts += [p for p in (sentence, None if details is None else plain(details)) if p]
    return _cut(" - ".join(parts), limit)


def plain(value: object, limit: int = 160) -> str:
    """A JSON value in words, for a line: ``key: value, ...`` for an object, ``2 items: a,
    b`` for a list, text as itself; cut at ``limit`` characters (built no further)."""
    text = ""
    for piece in _pieces(value, top=True):
        text += piece[: limit + 1]
        if len(text) > limit:
            break
    return _cut(" ".join(text.split()), limit)


def _pieces(value: object, *, top: bool = False) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        yield ("" if value else "(empty)") if top else "("
        for n, (key, item) in enumerate(value.items()):
            yield f"{', ' if n else ''}{key}: "
            yield from _pieces(item)
        yield "" if top else ")"
    elif isinstance(value, Sequence):
        count = len(value)
        yield f"{count} item{'' if count == 1 else 's'}: " if top and count else "["
        for n, item in enumerate(value):
            yield ", " if n else ""
            yield from _pieces(item)
        yield "" if top and count else "]"
    else:
        yield json.dumps(value, ensure_ascii=False)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _json(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)
