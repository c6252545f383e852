"""A model's event stream assembled into one reply: shared by every place a model is called.

The loop's local executor and a durable engine's model activity both turn the stream into a
``ModelResponse`` here, so a reply means the same wherever the call ran.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable
from typing import Any

from .._frozen import _EMPTY, FrozenList
from .._messages import Message, Reasoning, Text, ToolUse
from .._stream import (
    ModelResponse,
    ModelStop,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolUseDelta,
    ToolUseStart,
)
from ..errors import ModelError

__all__ = ["INVALID_JSON_KEY", "assemble"]

INVALID_JSON_KEY = "__invalid_json__"
"""Key under which a tool use keeps arguments the model sent as malformed JSON."""

_Pending = tuple[str, str, "dict[str, object] | None", "list[str]"]


class _Reply:
    """The blocks of a reply as its stream comes in."""

    __slots__ = ("blocks", "latest", "reasoning", "signature", "text", "tools")

    def __init__(self) -> None:
        self.blocks: list[Text | Reasoning | ToolUse | None] = []
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.signature: str | None = None
        # Tool uses in stream order; a delta goes to the latest one with its id (a model may
        # repeat an id within one reply: those stay separate calls).
        self.tools: list[tuple[str, str, dict[str, object] | None, list[str]]] = []
        self.latest: dict[str, int] = {}

    def flush(self) -> None:
        if self.text:
            self.blocks.append(Text("".join(self.text)))
            self.text.clear()
        if self.reasoning or self.signature is not None:
            self.blocks.append(Reasoning("".join(self.reasoning), self.signature))
            self.reasoning.clear()
            self.signature = None

    def add(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            if self.reasoning:
                self.flush()
            self.text.append(event.text)
        elif isinstance(event, ToolUseStart):
            if self.text or self.reasoning or self.signature is not None:
                self.flush()
            self.latest[event.tool_use_id] = len(self.tools)
            self.tools.append((event.tool_use_id, event.name, event.input, []))
            self.blocks.append(None)  # the tool use's place: built once its input is whole
        elif isinstance(event, ToolUseDelta):
            slot = self.latest.get(event.tool_use_id)
            if slot is None:
                raise ModelError(f"tool input for unknown tool use {event.tool_use_id!r}")
            self.tools[slot][3].append(event.input_json)
        elif isinstance(event, ReasoningDelta):
            self._reasoning(event)

    def _reasoning(self, event: ReasoningDelta) -> None:
        if self.text or self.signature is not None:  # a signature closes a reasoning block
            self.flush()
        if event.redacted is not None:  # a whole encrypted block of its own
            self.flush()
            self.blocks.append(Reasoning("", event.signature, event.redacted))
            return
        self.reasoning.append(event.text)
        if event.signature is not None:
            self.signature = event.signature

    def message(self) -> Message:
        if self.text or self.reasoning or self.signature is not None:
            self.flush()
        blocks = self.blocks
        if self.tools:
            built = iter([_tool_use(*t) for t in self.tools])
            blocks = [next(built) if b is None else b for b in blocks]
        return Message("assistant", FrozenList(blocks))


async def assemble(
    stream: AsyncIterable[Any], emit: Callable[[StreamEvent], None] | None = None, model: Any = None
) -> ModelResponse:
    """The reply a model's event ``stream`` makes; each event but the stop is given to ``emit``
    as it comes. ModelError if the stream ends without a stop event (``model`` names it)."""
    reply = _Reply()
    text, tools, latest = reply.text, reply.tools, reply.latest
    stop: ModelStop | None = None
    async for event in stream:
        kind = type(event)
        if kind is ModelStop:
            stop = event
            continue
        if emit is not None:
            emit(event)
        if kind is TextDelta and not reply.reasoning:  # the common cases, inline
            text.append(event.text)
        elif kind is ToolUseDelta and event.tool_use_id in latest:
            tools[latest[event.tool_use_id]][3].append(event.input_json)
        else:
            reply.add(event)
    if stop is None:
        raise ModelError(f"the model stream of {type(model).__name__} ended without a stop event")
    return ModelResponse(reply.message(), stop.stop_reason, stop.usage)


def _tool_use(
    tool_use_id: str, name: str, whole: dict[str, object] | None, parts: list[str]
) -> ToolUse:
    if whole is not None:
        return ToolUse(tool_use_id, name, dict(whole))
    raw = "".join(parts).strip()
    if not raw or raw == "{}":  # no arguments: what the strict reader would make of "{}"
        return ToolUse(tool_use_id, name, _EMPTY)
    from .._json import loads

    try:  # strictly: NaN, Infinity or a key given twice make the arguments unreadable
        value = loads(raw, constants=False)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        # Unparseable arguments: keep them so the tool's validation names the problem.
        return ToolUse(tool_use_id, name, {INVALID_JSON_KEY: raw})
    return ToolUse(tool_use_id, name, value)
