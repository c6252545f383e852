"""Sessions, questions, results and audit entries in words: the pieces ``interlude`` prints
(the ``_render`` output and the Temporal commands share them)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .._messages import Image, Json, Message, Reasoning, Text, ToolResult, ToolUse

if TYPE_CHECKING:
    from .. import Interrupt
    from .._agent import Position

__all__ = [
    "_age",
    "_decisions_and_votes",
    "_interrupt_json",
    "_named",
    "_shown",
    "_state_words",
    "_transcript",
    "audit_line",
    "claim_words",
    "node_of",
    "result_summary",
    "undo_words",
]


def _decisions_and_votes(
    pause: Position | None, audit: list[dict[str, Any]]
) -> tuple[dict[str, dict[str, Any]], dict[str, tuple[Any, tuple[str, ...]]]]:
    """The approval decisions remembered (as ``Agent.decisions`` gives them, every audit entry
    counted: ``show`` has no signing key) and the votes so far toward a quorum."""
    from .._agent import remembered_decisions
    from .._audit import AuditEntry
    from ..errors import StateFormatError

    entries = []
    for entry in audit:
        try:
            entries.append(AuditEntry.from_dict(entry))
        except StateFormatError:
            continue  # the chain line reports a damaged trail
    run = {} if pause is None else pause.progress.decisions
    votes = {} if pause is None else dict(pause.progress.votes)
    return remembered_decisions(entries, run, False), votes


def audit_line(entry: dict[str, Any]) -> str:
    """One audit entry in words: ``2026-11-23 17:40:02  ana answered approve: true  (shown
    sha256:1a2b3c4d)``."""
    at = entry.get("at")
    when = _clock(at) if isinstance(at, int | float) else "(no time)"
    name = entry.get("name") or entry.get("interrupt_id") or "?"
    answer = json.dumps(entry.get("answer"), ensure_ascii=False)
    if len(answer) > 80:
        answer = answer[:77] + "..."
    by = entry.get("by") or "unknown"
    parent = entry.get("answer")
    if name == "undo" and not entry.get("interrupt_id") and isinstance(parent, dict):
        line = f"{when}  {undo_words(entry)}"
    elif name == "fork" and not entry.get("interrupt_id") and isinstance(parent, dict):
        at_point = json.dumps(parent.get("checkpoint"), ensure_ascii=False)
        origin = json.dumps(parent.get("session"), ensure_ascii=False)
        line = f"{when}  {by} forked this session from {origin} at {at_point}"
    elif name == "moved" and not entry.get("interrupt_id") and isinstance(parent, dict):
        line = f"{when}  {by} moved this session from {parent.get('from')} to {parent.get('to')}"
    elif entry.get("expired"):
        line = f"{when}  {name} expired unanswered: {answer}"
    else:
        line = f"{when}  {by} answered {name}: {answer}"
        vote = entry.get("vote")
        if isinstance(vote, list) and len(vote) == 2:
            line += f" (vote {vote[0]} of {vote[1]})"
    shown = entry.get("shown")
    if isinstance(shown, str) and shown:
        algorithm, _, digest = shown.rpartition(":")
        line += f"  (shown {algorithm + ':' if algorithm else ''}{digest[:8]})"
    return line


def undo_words(entry: dict[str, Any], *, with_by: bool = True) -> str:
    """An ``undo`` audit entry in words: ``ana undid c5 (mail) by mail.undo: success,
    "retracted" (undo to m4)``, or ``ana left c5 (mail) as it is``; without ``by``:
    ``c5 (mail) undone by mail.undo: ...``."""
    about = entry.get("answer")
    about = about if isinstance(about, dict) else {}
    call = f"{about.get('call')} ({about.get('tool')})"
    by = entry.get("by") or "unknown"
    to = about.get("checkpoint")
    where = f" (undo to {to})" if isinstance(to, str) else " (a declined call's rollback)"
    if about.get("skipped"):
        done = f"left {call} as it is" if with_by else f"{call} left as it is (--skip)"
    else:
        result = json.dumps(about.get("result"), ensure_ascii=False)
        if len(result) > 60:
            result = result[:57] + "..."
        how = f"by {about.get('compensation')}: {about.get('status')}, {result}"
        done = f"undid {call} {how}" if with_by else f"{call} undone {how}"
    return f"{by} {done}{where}" if with_by else done


def claim_words(claim: dict[str, Any], now: float | None = None) -> str:
    """Who holds a run claim, since when and until when, in words."""
    import time

    now = time.time() if now is None else now
    parts = [f"held by {claim.get('owner') or 'an unnamed process'}"]
    since = claim.get("since")
    if isinstance(since, int | float):
        parts.append(f"since {_clock(since)} ({_age(now - since)} ago)")
    expires = claim.get("expires_at")
    if isinstance(expires, int | float):
        parts.append(
            f"its claim runs out at {_clock(expires)} (in {_age(expires - now)}) unless renewed"
        )
    return ", ".join(parts)


def _clock(when: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when))


def _state_words(state: str, questions: int) -> str:
    if state == "paused":
        return f"paused: {questions} question{'' if questions == 1 else 's'}"
    return {"stopped": "stopped run", "running": "running", "idle": "idle"}.get(state, state)


def node_of(i: Interrupt) -> str | None:
    """The node of a graph (or swarm) that asked ``i`` ("writer"; "outer/inner" through a
    nested one), None for an agent's own question."""
    if not any(u.id.startswith("node:") for u in i.via):
        return None  # the usual case: interlude.multiagent is not imported for it
    from ..multiagent import describe_node

    return describe_node(i)


def _interrupt_json(i: Interrupt) -> dict[str, Any]:
    node = node_of(i)
    return {
        "id": i.id,
        "name": i.name,
        **({"node": node} if node is not None else {}),
        "reason": i.reason,
        "source": i.source,
        "tool": None if i.tool_use is None else i.tool_use.name,
        "input": None if i.tool_use is None else i.tool_use.input,
        "shown": i.digest,
        "response_schema": i.response_schema,
        "expires_at": i.expires_at,
        **({"default": i.default} if i.has_default else {}),
    }


def _named(i: Interrupt) -> str:
    """A question's name, with the node that asked it ("city (node writer)")."""
    node = node_of(i)
    return i.name if node is None else f"{i.name} (node {node})"


def _shown(i: Interrupt) -> str:
    what = "" if i.tool_use is None else f"{i.tool_use.name} {json.dumps(i.tool_use.input)}"
    reason = "" if i.reason is None else json.dumps(i.reason, ensure_ascii=False)
    shown = " - ".join(x for x in (what, reason) if x) or "(no details)"
    if i.expires_at is not None:
        import time

        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(i.expires_at))
        passed = i.expires_at <= time.time()  # first, so that a narrow row keeps it
        shown = (
            f"[expired {when}: settle with expire] {shown}"
            if passed
            else (f"[deadline {when}] {shown}")
        )
    return shown


def _age(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def _transcript(messages: list[Message]) -> Iterator[str]:
    for m in messages:
        for block in m.content:
            if isinstance(block, Text) and block.text:
                yield f"{m.role}: {block.text}"
            elif isinstance(block, ToolUse):
                yield f"  -> {block.name} {json.dumps(block.input)}"
            elif isinstance(block, ToolResult):
                yield f"  <- {block.status}: {_result_text(block)}"
            elif isinstance(block, Reasoning):
                yield f"  (thinking) {block.text[:80]}"
            elif isinstance(block, Image):
                yield f"{m.role}: [image {block.media_type}]"


def result_summary(result: ToolResult, limit: int = 48) -> str:
    """A tool result in a few words: its text, or its JSON (a list as its item count and
    first item), cut to ``limit`` characters."""
    parts = []
    for b in result.content:
        if isinstance(b, Text):
            parts.append(b.text)
        elif isinstance(b, Json) and isinstance(b.value, list):
            n = len(b.value)
            head = f"{n} item{'' if n == 1 else 's'}"
            if n:
                more = ", ..." if n > 1 else ""
                head += f": {json.dumps(b.value[0], ensure_ascii=False)}{more}"
            parts.append(f"[{head}]")
        elif isinstance(b, Json):
            parts.append(json.dumps(b.value, ensure_ascii=False))
        else:
            parts.append("[image]")
    text = " ".join(" ".join(parts).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _result_text(result: ToolResult) -> str:
    parts = [
        b.text if isinstance(b, Text) else json.dumps(b.value) if isinstance(b, Json) else "[image]"
        for b in result.content
    ]
    text = " ".join(parts)
    return text if len(text) <= 160 else text[:157] + "..."
