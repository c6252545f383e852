"""Tool-result messages the loop writes itself: for the calls of a batch that never finished
(the run stopped, was cancelled or was discarded), and for tool uses a conversation was given
without (providers refuse a tool use with no result, so the model is never sent one)."""

from __future__ import annotations

from collections.abc import Sequence

from .._messages import ContentBlock, Message, Text, ToolResult
from ._state import Step, ToolBatch, ToolCall, outstanding_batch

__all__ = ["UNANSWERED", "answered", "close_batch", "closing_message"]

UNANSWERED = (
    "not run: this tool use has no result in the conversation (it was given to the agent "
    "without one, or the run that made it stopped before it finished)"
)


def answered(messages: list[Message]) -> list[Message]:
    """``messages`` itself if every tool use in it (but a trailing one, still to be run) is
    answered by a result in the message after it; otherwise a repaired copy, where each
    missing result is an error result saying so. Providers refuse a conversation with an
    unanswered tool use, so the model is never sent one."""
    out: list[Message] = []
    changed = False
    n, i = len(messages), 0
    while i < n:
        m = messages[i]
        out.append(m)
        uses = m.tool_uses if m.role == "assistant" and i < n - 1 else []
        nxt = messages[i + 1] if uses else None
        if nxt is None:
            i += 1
            continue
        results = (
            [b for b in nxt.content if isinstance(b, ToolResult)] if nxt.role == "user" else []
        )
        if sorted(r.tool_use_id for r in results) == sorted(t.id for t in uses):
            i += 1
            continue
        changed = True
        answers: list[ContentBlock] = []
        for t in uses:
            match = next((r for r in results if r.tool_use_id == t.id), None)
            if match is not None:
                results.remove(match)
            answers.append(match or ToolResult(t.id, "error", [Text(UNANSWERED)]))
        if nxt.role == "user":  # its results first (providers want them first), then the rest
            others = [b for b in nxt.content if not isinstance(b, ToolResult)]
            out.append(Message("user", [*answers, *others]))
            i += 2
        else:
            out.append(Message("user", answers))
            i += 1
    return out if changed else messages


def closing_message(messages: Sequence[Message], step: Step | None, reason: str) -> Message | None:
    """The tool-result message that answers a conversation ending in tool uses, or None.

    If ``step`` holds the batch of those tool uses, calls it finished give their results;
    every other call gets ``reason`` (see :func:`close_batch`).
    """
    last = len(messages) - 1
    if last < 0 or messages[last].role != "assistant" or not messages[last].tool_uses:
        return None
    batch = None if step is None else outstanding_batch(step)
    if batch is None or batch.message_index != last:
        batch = ToolBatch(last, tuple(ToolCall(tu) for tu in messages[last].tool_uses))
    return close_batch(batch, reason)


def close_batch(batch: ToolBatch, reason: str) -> Message:
    """The tool-result message for a batch, in tool-use order.

    Finished calls give their result; the others an error saying ``reason`` and how far the
    call got, so the model is never told a tool did not run when it may have.
    """
    results: list[ToolResult] = []
    for call in batch.calls:
        if call.phase == "done" and call.result is not None:
            result = call.result
            if result.tool_use_id != call.answer_id:
                result = ToolResult(call.answer_id, result.status, result.content)
            results.append(result)
            continue
        text = reason
        if call.phase in ("body", "running"):
            text += "; the tool had started and may have had effects"
        elif call.phase == "after" and call.result is not None:
            text += (
                f"; the tool ran (status {call.result.status!r}), but its result was withheld "
                "because the after-tool hooks did not finish"
            )
        results.append(ToolResult(call.answer_id, "error", [Text(text)]))
    return Message("user", list(results))
