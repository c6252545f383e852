"""Interlude's stream events as AG-UI events.

Text streams as ``TEXT_MESSAGE_START`` / ``_CONTENT`` / ``_END`` (one message per model reply's
text), tool calls as ``TOOL_CALL_START`` / ``_ARGS`` / ``_END`` as the model streams them, and
each finished call as ``TOOL_CALL_RESULT``. A model that does not stream still gives the same
events, made from its reply. The run's end is built by :func:`finish`: a ``STATE_SNAPSHOT`` of
``agent.state``, then ``RUN_FINISHED`` with the interrupt outcome (a pause) or the final text as
``result`` (success).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .._messages import Text, ToolUse
from .._stream import (
    MessageAppended,
    TextDelta,
    ToolCallFinished,
    ToolUseDelta,
    ToolUseStart,
)
from ._wire import wire_interrupt

if TYPE_CHECKING:
    from ag_ui.core import BaseEvent

    from .._interrupt import Interrupt
    from .._messages import JsonValue
    from .._stream import StreamEvent

__all__ = ["Translator", "finish"]


class Translator:
    """Turns one run's Interlude events into AG-UI events (``events``), keeping which text
    message and tool calls are open."""

    __slots__ = ("_announced", "_count", "_open_tools", "_run_id", "_text_id", "_texted")

    def __init__(self, run_id: str) -> None:
        self._run_id = run_id
        self._count = 0
        self._text_id: str | None = None
        self._texted = False  # this model reply's text was streamed
        self._open_tools: list[str] = []
        self._announced: set[str] = set()

    def _new_id(self) -> str:
        self._count += 1
        return f"{self._run_id}:{self._count}"

    def events(self, event: StreamEvent) -> list[BaseEvent]:
        """The AG-UI events for ``event`` (none for the events AG-UI has no word for)."""
        if isinstance(event, TextDelta):
            return self._text(event.text)
        if isinstance(event, ToolUseStart):
            out = self._close_text()
            out += self._tool_start(event.tool_use_id, event.name)
            if event.input is not None:
                out += self._tool_args(event.tool_use_id, json.dumps(event.input))
            return out
        if isinstance(event, ToolUseDelta):
            return self._tool_args(event.tool_use_id, event.input_json)
        if isinstance(event, MessageAppended) and event.message.role == "assistant":
            return self._reply(event.message.content)
        if isinstance(event, ToolCallFinished):
            from ag_ui.core import ToolCallResultEvent

            result = event.result
            text = "".join(b.text for b in result.content if isinstance(b, Text))
            if result.status == "error":
                text = text or "error"
            return [
                ToolCallResultEvent(
                    message_id=self._new_id(),
                    tool_call_id=result.tool_use_id,
                    content=text,
                    role="tool",
                )
            ]
        return []

    def _text(self, delta: str) -> list[BaseEvent]:
        from ag_ui.core import TextMessageContentEvent, TextMessageStartEvent

        if not delta:
            return []
        out: list[BaseEvent] = []
        if self._text_id is None:
            self._text_id = self._new_id()
            out.append(TextMessageStartEvent(message_id=self._text_id, role="assistant"))
        self._texted = True
        out.append(TextMessageContentEvent(message_id=self._text_id, delta=delta))
        return out

    def _close_text(self) -> list[BaseEvent]:
        from ag_ui.core import TextMessageEndEvent

        if self._text_id is None:
            return []
        ended = TextMessageEndEvent(message_id=self._text_id)
        self._text_id = None
        return [ended]

    def _tool_start(self, tool_use_id: str, name: str) -> list[BaseEvent]:
        from ag_ui.core import ToolCallStartEvent

        self._announced.add(tool_use_id)
        self._open_tools.append(tool_use_id)
        return [ToolCallStartEvent(tool_call_id=tool_use_id, tool_call_name=name)]

    def _tool_args(self, tool_use_id: str, delta: str) -> list[BaseEvent]:
        from ag_ui.core import ToolCallArgsEvent

        if not delta or tool_use_id not in self._open_tools:
            return []
        return [ToolCallArgsEvent(tool_call_id=tool_use_id, delta=delta)]

    def _reply(self, content: list[Any]) -> list[BaseEvent]:
        """The model's whole reply: close what streamed, and announce what did not."""
        from ag_ui.core import ToolCallEndEvent

        out = self._close_text()
        texted, self._texted = self._texted, False
        if not texted:
            for block in content:
                if isinstance(block, Text) and block.text:
                    out += self._text(block.text)
            out += self._close_text()
            self._texted = False
        for block in content:
            if isinstance(block, ToolUse) and block.id not in self._announced:
                out += self._tool_start(block.id, block.name)
                out += self._tool_args(block.id, json.dumps(block.input))
        out += [ToolCallEndEvent(tool_call_id=i) for i in self._open_tools]
        self._open_tools.clear()
        return out

    def close(self) -> list[BaseEvent]:
        """End what is still open (a run that stopped mid-reply)."""
        from ag_ui.core import ToolCallEndEvent

        out = self._close_text()
        out += [ToolCallEndEvent(tool_call_id=i) for i in self._open_tools]
        self._open_tools.clear()
        return out


def finish(
    thread_id: str,
    run_id: str,
    pending: list[Interrupt],
    text: str | None,
    state: dict[str, JsonValue],
) -> list[BaseEvent]:
    """A run's last events: the state, then ``RUN_FINISHED``: the interrupt outcome when
    questions are ``pending``, else success with the final ``text`` as ``result``."""
    from ag_ui.core import (
        RunFinishedEvent,
        RunFinishedInterruptOutcome,
        RunFinishedSuccessOutcome,
        StateSnapshotEvent,
    )

    events: list[BaseEvent] = [StateSnapshotEvent(snapshot=state)]
    if pending:
        outcome = RunFinishedInterruptOutcome(interrupts=[wire_interrupt(q) for q in pending])
        events.append(RunFinishedEvent(thread_id=thread_id, run_id=run_id, outcome=outcome))
    else:
        success = RunFinishedSuccessOutcome()
        events.append(
            RunFinishedEvent(thread_id=thread_id, run_id=run_id, result=text, outcome=success)
        )
    return events
