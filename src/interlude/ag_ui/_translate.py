"""Interlude's stream events as AG-UI events, and a paused run's questions as AG-UI interrupts.

One :class:`Translator` per run keeps what the AG-UI stream needs and Interlude's events do not
carry: the id of the assistant message being streamed, which tool calls are open. A model that
does not stream (its reply arrives whole in ``MessageAppended``) is translated the same way.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .._frozen import thaw
from .._messages import Message, ToolResult, ToolUse
from .._stream import (
    MessageAppended,
    StreamEvent,
    TextDelta,
    ToolCallFinished,
    ToolUseDelta,
    ToolUseStart,
)

if TYPE_CHECKING:
    from ag_ui.core import BaseEvent
    from ag_ui.core import Interrupt as WireInterrupt

    from .._interrupt import Interrupt
    from .._result import AgentResult

__all__ = ["METADATA_KEY", "Translator", "wire_interrupt"]

METADATA_KEY = "interlude"
"""The key of Interlude's own data in an interrupt's (and a resume entry's) metadata."""


def _new_id() -> str:
    return uuid.uuid4().hex


def wire_interrupt(question: Interrupt, thread_id: str) -> WireInterrupt:
    """``question`` as an AG-UI interrupt: its id, reason (its text, or its name when the
    reason is not text), message (the reason's text, or its ``message``), the tool call it is
    about (the outermost, for a sub-agent's), its response schema and deadline (ISO 8601,
    UTC). ``metadata.interlude`` holds its name, its source, the digest of what it shows (echo
    it back to answer only this version of it), a structured reason, the tool use as shown
    and its default."""
    from ag_ui.core import Interrupt as WireInterrupt

    reason = question.reason
    about = question.via[0] if question.via else question.tool_use
    ours: dict[str, Any] = {
        "name": question.name,
        "source": question.source,
        "digest": question.digest,
    }
    if reason is not None and not isinstance(reason, str):
        ours["reason"] = thaw(reason)
    if question.tool_use is not None:
        ours["toolUse"] = {"name": question.tool_use.name, "input": thaw(question.tool_use.input)}
    if question.has_default:
        ours["default"] = thaw(question.default)
    if question.quorum != 1:
        ours["quorum"] = question.quorum
    expires, schema = question.expires_at, question.response_schema
    text = reason if isinstance(reason, str) and reason else None
    shown = reason.get("message") if isinstance(reason, Mapping) else text
    from .._interrupt import answer_key

    return WireInterrupt(
        id=answer_key(thread_id, question.id),  # names its thread: no other thread takes it
        reason=text or question.name,
        message=shown if isinstance(shown, str) else None,
        tool_call_id=None if about is None else about.id,
        response_schema=None if schema is None else thaw(schema),
        expires_at=None
        if expires is None
        else datetime.fromtimestamp(expires, UTC).isoformat().replace("+00:00", "Z"),
        metadata={METADATA_KEY: ours},
    )


class Translator:
    """Turns one run's Interlude events into AG-UI events (text, tool calls, their results)."""

    def __init__(self) -> None:
        self._text: str | None = None  # the id of the assistant text message being streamed
        self._streamed_text = False  # whether this model reply's text came as deltas
        self._open: dict[str, str] = {}  # tool use id -> parent message id, started, not ended
        self._started: set[str] = set()  # tool use ids whose TOOL_CALL_START was sent
        self._message: str | None = None  # the id of the current model reply

    def events(self, event: StreamEvent) -> Iterator[BaseEvent]:
        """The AG-UI events for one Interlude event (none for those AG-UI has no word for)."""
        if isinstance(event, TextDelta):
            yield from self._text_delta(event.text)
        elif isinstance(event, ToolUseStart):
            yield from self._tool_start(event.tool_use_id, event.name, event.input)
        elif isinstance(event, ToolUseDelta):
            yield from self._tool_args(event.tool_use_id, event.input_json)
        elif isinstance(event, MessageAppended):
            yield from self._appended(event.message)
        elif isinstance(event, ToolCallFinished):
            yield self._result(event.result)

    def close(self) -> Iterator[BaseEvent]:
        """End what is still open (before RUN_FINISHED or RUN_ERROR)."""
        from ag_ui.core import TextMessageEndEvent, ToolCallEndEvent

        if self._text is not None:
            yield TextMessageEndEvent(message_id=self._text)
            self._text = None
        for tool_use_id in list(self._open):
            yield ToolCallEndEvent(tool_call_id=tool_use_id)
            del self._open[tool_use_id]

    def _reply_id(self) -> str:
        if self._message is None:
            self._message = _new_id()
        return self._message

    def _text_delta(self, text: str) -> Iterator[BaseEvent]:
        from ag_ui.core import TextMessageContentEvent, TextMessageStartEvent

        if not text:
            return
        if self._text is None:
            self._text = self._reply_id()
            yield TextMessageStartEvent(message_id=self._text, role="assistant")
        self._streamed_text = True
        yield TextMessageContentEvent(message_id=self._text, delta=text)

    def _tool_start(
        self, tool_use_id: str, name: str, given: dict[str, Any] | None
    ) -> Iterator[BaseEvent]:
        from ag_ui.core import TextMessageEndEvent, ToolCallStartEvent

        if self._text is not None:
            yield TextMessageEndEvent(message_id=self._text)
            self._text = None
        parent = self._reply_id()
        self._open[tool_use_id] = parent
        self._started.add(tool_use_id)
        yield ToolCallStartEvent(
            tool_call_id=tool_use_id, tool_call_name=name, parent_message_id=parent
        )
        if given is not None:
            yield from self._tool_args(tool_use_id, json.dumps(thaw(given)))

    def _tool_args(self, tool_use_id: str, fragment: str) -> Iterator[BaseEvent]:
        from ag_ui.core import ToolCallArgsEvent

        if fragment and tool_use_id in self._open:
            yield ToolCallArgsEvent(tool_call_id=tool_use_id, delta=fragment)

    def _appended(self, message: Message) -> Iterator[BaseEvent]:
        """An assistant reply is complete: send what did not stream, then end it."""
        if message.role != "assistant":
            return
        if not self._streamed_text and message.text:
            yield from self._text_delta(message.text)
        for use in message.tool_uses:
            if use.id not in self._started:
                yield from self._tool_start(use.id, use.name, _input(use))
        yield from self.close()
        self._message, self._streamed_text = None, False

    def _result(self, result: ToolResult) -> BaseEvent:
        from ag_ui.core import ToolCallResultEvent

        text = result.text
        if result.status == "error":
            text = f"error: {text}"
        return ToolCallResultEvent(
            message_id=_new_id(), tool_call_id=result.tool_use_id, content=text, role="tool"
        )


def _input(use: ToolUse) -> dict[str, Any]:
    return dict(thaw(use.input))


def finished(
    thread_id: str, run_id: str, result: AgentResult, translator: Translator
) -> Iterator[BaseEvent]:
    """The end of a run: what is open is ended, then RUN_FINISHED with its outcome (the
    questions still open when it paused; never success while one is)."""
    from ag_ui.core import (
        RunFinishedCancelledOutcome,
        RunFinishedEvent,
        RunFinishedInterruptOutcome,
        RunFinishedOutcome,
        RunFinishedSuccessOutcome,
    )

    yield from translator.close()
    outcome: RunFinishedOutcome
    output: Any = None
    if result.stop_reason == "interrupt":
        interrupts = [wire_interrupt(q, thread_id) for q in result.interrupts]
        outcome = RunFinishedInterruptOutcome(interrupts=interrupts)
    elif result.stop_reason == "cancelled":
        outcome = RunFinishedCancelledOutcome()
    else:
        outcome = RunFinishedSuccessOutcome()
        output = _jsonable(result.output)
    yield RunFinishedEvent(thread_id=thread_id, run_id=run_id, outcome=outcome, result=output)


def _jsonable(value: Any) -> Any:
    """A run's output as JSON (a pydantic model or dataclass through its data), None if none."""
    if value is None:
        return None
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return thaw(value)
