"""Replaying a session's record as the events a stream gave, with no model or tool call.

For each message of the conversation, the events :meth:`Agent.stream_async` yields for it: a
model reply's text and reasoning as one delta per block and its tool uses as a start and one
delta of their input (JSON as the scripted and most provider models stream it), then
``MessageAppended``; a batch's results as ``ToolCallStarted`` / ``ToolCallFinished`` per call,
then ``MessageAppended``. The record ends with ``InterruptRaised`` for each open question and
``RunFinished``. What the record does not keep is not replayed: how the model split its text
into deltas, usage, tool progress, and the questions of earlier pauses (their answers are in
the audit trail; see ``Agent.checkpoints``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .._messages import Reasoning, Text, ToolResult, ToolUse
from .._result import AgentResult
from .._stream import (
    InterruptRaised,
    MessageAppended,
    ReasoningDelta,
    RunFinished,
    StreamEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolUseDelta,
    ToolUseStart,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._interrupt import Interrupt
    from .._messages import Message

__all__ = ["replay_events"]


def _reply(message: Message) -> list[StreamEvent]:
    out: list[StreamEvent] = []
    for block in message.content:
        if isinstance(block, Text):
            out.append(TextDelta(block.text))
        elif isinstance(block, Reasoning):
            out.append(ReasoningDelta(block.text, block.signature, block.redacted))
        elif isinstance(block, ToolUse):
            out.append(ToolUseStart(block.id, block.name))
            out.append(ToolUseDelta(block.id, json.dumps(block.input)))
    out.append(MessageAppended(message))
    return out


def replay_events(messages: Sequence[Message], pending: Sequence[Interrupt]) -> list[StreamEvent]:
    """The events of the record: ``messages`` and the questions open now (``pending``)."""
    uses: dict[str, ToolUse] = {}
    events: list[StreamEvent] = []
    last_reply: Message | None = None
    for message in messages:
        if message.role == "assistant":
            uses.update((b.id, b) for b in message.content if isinstance(b, ToolUse))
            events += _reply(message)
            last_reply = message
            continue
        for block in message.content:
            if isinstance(block, ToolResult) and block.tool_use_id in uses:
                events.append(ToolCallStarted(uses[block.tool_use_id]))
                events.append(ToolCallFinished(block))
        events.append(MessageAppended(message))
    events += [InterruptRaised(q) for q in pending]
    if pending:
        result = AgentResult(stop_reason="interrupt", interrupts=list(pending))
    else:
        result = AgentResult(stop_reason="end_turn", message=last_reply)
    events.append(RunFinished(result))
    return events
