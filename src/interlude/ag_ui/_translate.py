"""Interlude's stream events as AG-UI events, and a paused run's questions as AG-UI interrupts.

One :class:`Translator` per run keeps what the AG-UI stream needs and Interlude's events do not
carry: the id of the assistant message being streamed, which tool calls are open. A model that
does not stream (its reply arrives whole in ``MessageAppended``) is translated the same way.
A graph's node runs as an AG-UI subagent (``_graph``): its translator marks every event it
makes with the subagent's ``subagentRunId``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

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
    from .._result import StopReason

__all__ = [
    "METADATA_KEY",
    "Translator",
    "finished",
    "node_path_of",
    "tool_call_id",
    "wire_interrupt",
]

METADATA_KEY = "interlude"
"""The key of Interlude's own data in an interrupt's (and a resume entry's) metadata."""


def _new_id() -> str:
    return uuid.uuid4().hex


def wire_interrupt(
    question: Interrupt, thread_id: str, subagent: str | None = None
) -> WireInterrupt:
    """``question`` as an AG-UI interrupt: its id, reason (its text, or its name when the
    reason is not text), message (the reason's text, or its ``message``), the tool call it is
    about (the outermost, for a sub-agent's), its response schema and deadline (ISO 8601,
    UTC). ``metadata.interlude`` holds its name, its source, the digest of what it shows (echo
    it back to answer only this version of it), a structured reason, the tool use as shown,
    its default, and for a graph node's question the node path (``nodePath``, outermost
    first). ``subagent`` is the ``subagentRunId`` of the node that asked it, if any."""
    from ag_ui.core import Interrupt as WireInterrupt

    reason = question.reason
    nodes = node_path_of(question)
    outer = [u for u in question.via if not _is_node(u)]
    about = outer[0] if outer else question.tool_use
    scope = _leading_nodes(question.via)  # the node whose conversation ``about`` is in
    ours: dict[str, Any] = {
        "name": question.name,
        "source": question.source,
        "digest": question.digest,
    }
    if nodes:
        ours["nodePath"] = list(nodes)
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
        tool_call_id=None if about is None else tool_call_id(about.id, scope),
        response_schema=None if schema is None else thaw(schema),
        expires_at=None
        if expires is None
        else datetime.fromtimestamp(expires, UTC).isoformat().replace("+00:00", "Z"),
        metadata={METADATA_KEY: ours},
        subagent_run_id=subagent,
    )


def tool_call_id(tool_use_id: str, nodes: tuple[str, ...] = ()) -> str:
    """The AG-UI ``toolCallId`` of a tool use: its id, and for a graph node's call the node
    path first (``writer:t1``): two nodes' models number their calls alike, and a client
    keeps one thread's tool calls by id."""
    return f"{'/'.join(nodes)}:{tool_use_id}" if nodes else tool_use_id


def node_path_of(question: Interrupt) -> tuple[str, ...]:
    """The graph nodes ``question`` came up through, outermost first (empty: an agent's own;
    ``interlude.multiagent`` is only imported for a question that has node markers)."""
    if not any(_is_node(u) for u in question.via):
        return ()
    from ..multiagent import node_path

    return node_path(question)


def _leading_nodes(via: tuple[ToolUse, ...]) -> tuple[str, ...]:
    """The node markers ``via`` starts with, as a node path: the node that made the first
    tool call of ``via`` (or, with none, the question's own)."""
    out: list[str] = []
    for use in via:
        if not _is_node(use):
            break
        out.append(use.name)
    return tuple(out)


def _is_node(use: ToolUse) -> bool:
    """Whether ``use`` is a graph node's marker in a question's ``via`` (not a tool call)."""
    return use.id == f"node:{use.name}" and not use.input  # multiagent's node_marker(name)


class Translator:
    """Turns one run's Interlude events into AG-UI events (text, tool calls, their results);
    with ``subagent``, each event is attributed to that subagent (a graph's node at
    ``nodes``, which also scopes its tool call ids: :func:`tool_call_id`)."""

    def __init__(self, subagent: str | None = None, nodes: tuple[str, ...] = ()) -> None:
        self._subagent = subagent
        self._nodes = nodes
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
            yield TextMessageEndEvent(message_id=self._text, subagent_run_id=self._subagent)
            self._text = None
        for tool_use_id in list(self._open):
            yield ToolCallEndEvent(
                tool_call_id=tool_call_id(tool_use_id, self._nodes), subagent_run_id=self._subagent
            )
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
            yield TextMessageStartEvent(
                message_id=self._text, role="assistant", subagent_run_id=self._subagent
            )
        self._streamed_text = True
        yield TextMessageContentEvent(
            message_id=self._text, delta=text, subagent_run_id=self._subagent
        )

    def _tool_start(
        self, tool_use_id: str, name: str, given: dict[str, Any] | None
    ) -> Iterator[BaseEvent]:
        from ag_ui.core import TextMessageEndEvent, ToolCallStartEvent

        if self._text is not None:
            yield TextMessageEndEvent(message_id=self._text, subagent_run_id=self._subagent)
            self._text = None
        parent = self._reply_id()
        self._open[tool_use_id] = parent
        self._started.add(tool_use_id)
        yield ToolCallStartEvent(
            tool_call_id=tool_call_id(tool_use_id, self._nodes),
            tool_call_name=name,
            parent_message_id=parent,
            subagent_run_id=self._subagent,
        )
        if given is not None:
            yield from self._tool_args(tool_use_id, json.dumps(thaw(given)))

    def _tool_args(self, tool_use_id: str, fragment: str) -> Iterator[BaseEvent]:
        from ag_ui.core import ToolCallArgsEvent

        if fragment and tool_use_id in self._open:
            yield ToolCallArgsEvent(
                tool_call_id=tool_call_id(tool_use_id, self._nodes),
                delta=fragment,
                subagent_run_id=self._subagent,
            )

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
            message_id=_new_id(),
            tool_call_id=tool_call_id(result.tool_use_id, self._nodes),
            content=text,
            role="tool",
            subagent_run_id=self._subagent,
        )


class Closing(Protocol):
    """What ends a run's open messages and tool calls (a :class:`Translator`, or a graph's
    translator of its nodes)."""

    def close(self) -> Iterator[BaseEvent]: ...


def _input(use: ToolUse) -> dict[str, Any]:
    return dict(thaw(use.input))


def finished(
    thread_id: str,
    run_id: str,
    stop_reason: StopReason,
    interrupts: list[Interrupt],
    translator: Closing,
    *,
    output: Any = None,
    subagent_of: Callable[[Interrupt], str | None] | None = None,
) -> Iterator[BaseEvent]:
    """The end of a run: what is open is ended, then RUN_FINISHED with its outcome (the
    questions still open when it paused; never success while one is). ``output`` is a
    successful run's output (its JSON is the event's ``result``); ``subagent_of`` names the
    subagent (a graph's node) each question belongs to."""
    from ag_ui.core import (
        RunFinishedCancelledOutcome,
        RunFinishedEvent,
        RunFinishedInterruptOutcome,
        RunFinishedOutcome,
        RunFinishedSuccessOutcome,
    )

    yield from translator.close()
    outcome: RunFinishedOutcome
    result: Any = None
    if stop_reason == "interrupt":
        wire = [
            wire_interrupt(q, thread_id, None if subagent_of is None else subagent_of(q))
            for q in interrupts
        ]
        outcome = RunFinishedInterruptOutcome(interrupts=wire)
    elif stop_reason == "cancelled":
        outcome = RunFinishedCancelledOutcome()
    else:
        outcome = RunFinishedSuccessOutcome()
        result = _jsonable(output)
    yield RunFinishedEvent(thread_id=thread_id, run_id=run_id, outcome=outcome, result=result)


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
