"""ScriptedModel and FunctionModel: deterministic models for tests and demos."""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from .._messages import Message, Reasoning, Text, ToolUse, Usage
from .._stream import (
    ModelEvent,
    ModelStop,
    ReasoningDelta,
    TextDelta,
    ToolUseDelta,
    ToolUseStart,
)
from .._tools import ToolSpec
from ..errors import ScriptError
from ..models import OutputSchema

__all__ = ["FunctionModel", "ModelRequest", "ScriptedModel", "Turn"]

Turn: TypeAlias = str | Sequence[ToolUse] | Message
"""A scripted reply: text that ends the turn, tool calls, or a whole assistant message."""


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """What a model was asked: the conversation, the tool specs and the system prompt, and
    the output schema of a run given ``output_type`` (with ``native_output=True``)."""

    messages: tuple[Message, ...]
    tool_specs: tuple[ToolSpec, ...]
    system_prompt: str | None
    output_schema: OutputSchema | None = None


def _events(turn: Turn, usage: Usage) -> list[ModelEvent]:
    if isinstance(turn, str):
        return [TextDelta(turn), ModelStop("end_turn", usage)]
    blocks = turn.content if isinstance(turn, Message) else list(turn)
    events: list[ModelEvent] = []
    has_tools = False
    for block in blocks:
        if isinstance(block, Text):
            events.append(TextDelta(block.text))
        elif isinstance(block, Reasoning):
            events.append(ReasoningDelta(block.text, block.signature, block.redacted))
        elif isinstance(block, ToolUse):
            has_tools = True
            events.append(ToolUseStart(block.id, block.name))
            events.append(ToolUseDelta(block.id, json.dumps(block.input)))
        else:
            raise ScriptError(f"a scripted turn cannot contain {type(block).__name__} blocks")
    events.append(ModelStop("tool_use" if has_tools else "end_turn", usage))
    return events


class ScriptedModel:
    """A model that plays back ``turns`` in order, one per call.

    Each turn is a string (a text reply that ends the turn), a list of :class:`ToolUse` (tool
    calls), or a whole assistant :class:`Message`. It records every request in ``requests``,
    raises ScriptError when called with no turn left, and ``unused`` / ``assert_done()``
    report turns never played.

    For a run given ``output_type``, a model with ``native_output=True`` (the default) is sent
    the output schema and answers with JSON text (a string turn); with ``native_output=False``
    it is given the ``final_result`` tool instead, and answers by calling it
    (``[ToolUse(id, "final_result", {...})]``).

    By default the script starts at its first turn in every process. With ``resumable=True``
    it plays the turn that fits the conversation it is sent instead: turn *n* for a
    conversation that holds *n* replies of the model so far; a call for the same conversation
    then gets the same turn again. An :class:`~interlude.App` makes the model of every agent
    its factories build resumable unless it was built with ``resumable=False``: a fresh
    process builds the agent anew to carry a paused session on, and a script started over
    would ask for the first tool call again.
    """

    def __init__(
        self,
        turns: Sequence[Turn],
        *,
        usage: Usage | None = None,
        native_output: bool = True,
        resumable: bool | None = None,
    ) -> None:
        self.native_output = native_output
        self.resumable = resumable
        """Whether it plays the turn that fits the conversation (None: not said; off, unless
        an App builds the agent)."""
        self._turns = list(turns)
        self._usage = usage or Usage(10, 5)
        for i, turn in enumerate(self._turns):
            if not isinstance(turn, str | Message | list | tuple):
                raise ScriptError(
                    f"turn {i}: expected str, list of ToolUse or Message, got {turn!r}"
                )
        self._position = 0
        self.requests: list[ModelRequest] = []

    @property
    def unused(self) -> list[Turn]:
        """The turns not played yet."""
        return self._turns[self._position :]

    def assert_done(self) -> None:
        """Raise ScriptError if some turns were never played."""
        if self.unused:
            raise ScriptError(
                f"{len(self.unused)} scripted turn(s) were never used: {self.unused!r}"
            )

    async def stream(
        self,
        messages: Sequence[Message],
        tool_specs: Sequence[ToolSpec],
        system_prompt: str | None,
        *,
        output_schema: OutputSchema | None = None,
    ) -> AsyncIterator[ModelEvent]:
        request = ModelRequest(tuple(messages), tuple(tool_specs), system_prompt, output_schema)
        self.requests.append(request)
        if self.resumable:  # the turn that fits the conversation, whatever played before
            self._position = sum(1 for m in messages if m.role == "assistant")
        if self._position >= len(self._turns):
            last = messages[-1] if messages else None
            raise ScriptError(
                f"ScriptedModel has no turn for call {len(self.requests)} (it has "
                f"{len(self._turns)}); last message: {last!r:.200}"
            )
        turn = self._turns[self._position]
        self._position += 1
        for event in _events(turn, self._usage):
            yield event


ReplyFn: TypeAlias = Callable[[ModelRequest], "Turn | Awaitable[Turn]"]


class FunctionModel:
    """A model whose every reply is computed by ``fn(request)`` (sync or async).

    ``fn`` returns a turn in the same forms as :class:`ScriptedModel` takes; ``native_output``
    is as there (the request's ``output_schema`` or its ``final_result`` tool spec).
    """

    def __init__(
        self, fn: ReplyFn, *, usage: Usage | None = None, native_output: bool = True
    ) -> None:
        self.native_output = native_output
        self._fn = fn
        self._usage = usage or Usage(10, 5)
        self.requests: list[ModelRequest] = []

    async def stream(
        self,
        messages: Sequence[Message],
        tool_specs: Sequence[ToolSpec],
        system_prompt: str | None,
        *,
        output_schema: OutputSchema | None = None,
    ) -> AsyncIterator[ModelEvent]:
        request = ModelRequest(tuple(messages), tuple(tool_specs), system_prompt, output_schema)
        self.requests.append(request)
        turn = self._fn(request)
        if inspect.isawaitable(turn):
            turn = await turn
        for event in _events(turn, self._usage):
            yield event
