"""The model interface: an async stream of typed events from the conversation.

A model needs one method. Provider adapters live in submodules and are imported only when used.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol, runtime_checkable

from .._messages import Message
from .._stream import (
    ModelEvent,
    ModelResponse,
    ModelStop,
    ModelStopReason,
    ReasoningDelta,
    TextDelta,
    ToolUseDelta,
    ToolUseStart,
)
from .._tools._spec import ToolSpec

__all__ = [
    "Model",
    "ModelEvent",
    "ModelResponse",
    "ModelStop",
    "ModelStopReason",
    "ReasoningDelta",
    "TextDelta",
    "ToolSpec",
    "ToolUseDelta",
    "ToolUseStart",
]


@runtime_checkable
class Model(Protocol):
    """Anything that streams a reply to a conversation.

    ``stream`` must end with exactly one :class:`ModelStop`. ``messages`` is the live
    conversation: read it, do not change it.
    """

    def stream(
        self,
        messages: Sequence[Message],
        tool_specs: Sequence[ToolSpec],
        system_prompt: str | None,
    ) -> AsyncIterator[ModelEvent]: ...
