"""The model interface: an async stream of typed events from the conversation.

A model needs one method. Provider adapters live in submodules and are imported only when used:
``interlude.models.openai.OpenAIModel``, ``.anthropic.AnthropicModel``,
``.bedrock.BedrockModel``, ``.ollama.OllamaModel``, or a ``"provider:model"`` string given to
``Agent(model=...)`` (see :func:`model_from_string`).
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
from ._resolve import model_from_string
from ._retry import RetryPolicy

__all__ = [
    "Model",
    "ModelEvent",
    "ModelResponse",
    "ModelStop",
    "ModelStopReason",
    "ReasoningDelta",
    "RetryPolicy",
    "TextDelta",
    "ToolSpec",
    "ToolUseDelta",
    "ToolUseStart",
    "model_from_string",
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
