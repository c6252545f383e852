"""A session's history as checkpoints: the steps its record holds, oldest first.

Nothing extra is stored for it: the record is the conversation (every prompt, model reply and
tool result, append-only in every store), the audit trail (every answer, with who and when)
and the pause (the questions open now). A checkpoint names one step of it:

- ``m<i>``: message ``i`` of the conversation, of kind ``prompt`` (a user message of text),
  ``model_reply`` or ``tool_result`` (the results of a batch of tool calls);
- an interrupt id: a question, of kind ``question``: an answered one (from the audit trail)
  or one open now (from the pause);
- ``answer:<interrupt id>``: the answer given to it, of kind ``answer``;
- ``fork``: where a forked session begins (first in its trail; see ``_fork``).

A question about a tool call sits right after the model reply that asked for the call (its id
carries the call's id: ``v1:<source>:<tool use id>:...``); a question about no call, after the
last message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .._messages import Message, Text, ToolResult, ToolUse

if TYPE_CHECKING:
    from .._audit import AuditEntry
    from .._interrupt import Interrupt
    from ._state import ToolCall

__all__ = ["FORK", "TOOL_SOURCES", "Checkpoint", "batches_of", "checkpoints_of", "tool_use_of"]

FORK = "fork"
"""The name of the audit entry a forked session's trail begins with."""

TOOL_SOURCES = ("before_tool_call", "tool_call", "after_tool_call", "in_doubt")
"""The sources of questions about one tool call (their id's scope is the call's id)."""

CheckpointKind = Literal["prompt", "model_reply", "tool_result", "question", "answer", "fork"]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One step of a session's record (see :meth:`Agent.checkpoints`).

    ``id`` is what :meth:`Agent.fork` takes; ``kind`` one of ``prompt``, ``model_reply``,
    ``tool_result``, ``question``, ``answer`` and ``fork``; ``when`` the time it happened
    (epoch seconds) where the record keeps it (answers, open questions and forks; None for
    messages and answered questions, whose time is not stored); ``summary`` a short text;
    ``message_index`` the conversation message it is at or after (-1: before the first).
    """

    id: str
    kind: CheckpointKind
    when: float | None
    summary: str
    message_index: int


def batches_of(messages: Sequence[Message]) -> dict[int, tuple[ToolCall, ...]]:
    """The calls of each model reply that asked for tools, by message index, with the ids
    they ran under (a model's repeated id runs as ``<id>#<n>``, as the loop numbers it)."""
    from ._loop import _unique_calls

    seen: dict[str, int] = {}
    out: dict[int, tuple[ToolCall, ...]] = {}
    for index, message in enumerate(messages):
        if message.role == "assistant":
            uses = [b for b in message.content if isinstance(b, ToolUse)]
            if uses:
                out[index] = _unique_calls(uses, seen)
    return out


def tool_use_of(interrupt_id: str) -> str | None:
    """The id of the tool call a question is about, read from its id, or None."""
    parts = interrupt_id.split(":")
    if len(parts) >= 4 and parts[0] == "v1" and parts[1] in TOOL_SOURCES:
        return parts[2]
    return None


def _short(value: object, limit: int = 72) -> str:
    import json

    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _result_text(result: ToolResult) -> str:
    """What a tool result says: its text, else its structured data as JSON (a tool that
    returned a list or an object), else what kinds of blocks it holds."""
    import json

    from .._frozen import thaw
    from .._messages import Json

    if result.text:
        return result.text
    data = [b.value for b in result.content if isinstance(b, Json)]
    if data:
        shown = [thaw(v) for v in data]
        return json.dumps(shown[0] if len(shown) == 1 else shown, ensure_ascii=False)
    kinds = sorted({type(b).__name__.lower() for b in result.content})
    return f"({', '.join(kinds)})" if kinds else "(empty)"


def _said(reason: object) -> str:
    """A question's reason as a line: its text, or the text of its ``question`` or
    ``message`` field (a reason of details shows what it asks, not its JSON)."""
    if isinstance(reason, dict):
        for key in ("question", "message"):
            if isinstance(reason.get(key), str):
                return _short(reason[key], 56)
    return _short(reason, 56)


def _message_checkpoint(index: int, message: Message) -> Checkpoint:
    uses = [b for b in message.content if isinstance(b, ToolUse)]
    results = [b for b in message.content if isinstance(b, ToolResult)]
    text = " ".join(b.text for b in message.content if isinstance(b, Text))
    if message.role == "assistant":
        calls = ", ".join(f"{u.name}({_short(u.input, 40)})" for u in uses)
        summary = " ".join(p for p in (_short(text) if text else "", calls) if p)
        return Checkpoint(f"m{index}", "model_reply", None, summary or "(empty reply)", index)
    if results:
        shown = "; ".join(f"{r.status}: {_short(_result_text(r), 40)}" for r in results)
        return Checkpoint(f"m{index}", "tool_result", None, shown, index)
    return Checkpoint(f"m{index}", "prompt", None, _short(text) or "(no text)", index)


def checkpoints_of(
    messages: Sequence[Message],
    audit: Sequence[AuditEntry],
    pending: Sequence[Interrupt] = (),
) -> list[Checkpoint]:
    """The checkpoints of a record, oldest first (see the module's docstring)."""
    asked_at = {
        call.tool_use.id: index for index, calls in batches_of(messages).items() for call in calls
    }
    last = len(messages) - 1
    keyed: list[tuple[tuple[int, int, int], Checkpoint]] = [
        ((i, 0, 0), _message_checkpoint(i, m)) for i, m in enumerate(messages)
    ]

    def place(interrupt_id: str) -> int:
        use = tool_use_of(interrupt_id)
        return asked_at.get(use, last) if use is not None else last

    for seq, entry in enumerate(audit, start=1):
        if entry.name == FORK and not entry.interrupt_id:
            parent = entry.answer if isinstance(entry.answer, dict) else {}
            summary = f"forked from {parent.get('session')!r} at {parent.get('checkpoint')!r}"
            keyed.append(((-1, 0, seq), Checkpoint(FORK, "fork", entry.at, summary, -1)))
            continue
        if not entry.interrupt_id:  # a trail entry about no question (forgotten decisions)
            continue
        at = place(entry.interrupt_id)
        question = Checkpoint(entry.interrupt_id, "question", None, entry.name, at)
        who = "expired" if entry.expired else f"{entry.by} answered"
        answer = Checkpoint(
            f"answer:{entry.interrupt_id}",
            "answer",
            entry.at,
            f"{who} {entry.name}: {_short(entry.answer, 48)}",
            at,
        )
        keyed.append(((at, 1, seq * 2), question))
        keyed.append(((at, 1, seq * 2 + 1), answer))
    for seq, q in enumerate(pending, start=len(audit) * 2 + 2):
        at = place(q.id)
        reason = f"{q.name}: {_said(q.reason)}" if q.reason is not None else q.name
        keyed.append(((at, 1, seq), Checkpoint(q.id, "question", q.raised_at, reason, at)))
    keyed.sort(key=lambda pair: pair[0])
    seen: set[str] = set()
    out: list[Checkpoint] = []
    for _, checkpoint in keyed:  # a question answered by a quorum's votes: listed once
        if checkpoint.id in seen and checkpoint.kind == "question":
            continue
        seen.add(checkpoint.id)
        out.append(checkpoint)
    return out
