"""The model interface: an async stream of typed events from the conversation.

A model needs one method. Provider adapters live in submodules and are imported only when used:
``interlude.models.openai.OpenAIModel``, ``.anthropic.AnthropicModel``,
``.bedrock.BedrockModel``, ``.ollama.OllamaModel``, or a ``"provider:model"`` string given to
``Agent(model=...)`` (see :func:`model_from_string`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

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
from .._tools import ToolSpec

# What the loop takes of a reply besides the public names (not in __all__): the assembler of a
# model's stream, and the key a tool use whose input was not JSON keeps its raw text under.

if TYPE_CHECKING:
    from ._assemble import INVALID_JSON_KEY as INVALID_JSON_KEY
    from ._assemble import assemble as assemble
    from ._resolve import model_from_string
    from ._retry import RetryPolicy
    from ._schema import OutputSchema

_LAZY = {
    "model_from_string": "._resolve",
    "RetryPolicy": "._retry",
    "OutputSchema": "._schema",
    "assemble": "._assemble",
    "INVALID_JSON_KEY": "._assemble",
}


def __getattr__(name: str) -> object:
    """``RetryPolicy``, ``OutputSchema``, ``model_from_string`` and the stream assembler,
    loaded on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "Model",
    "ModelEvent",
    "ModelResponse",
    "ModelStop",
    "ModelStopReason",
    "OutputSchema",
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

    Structured output (``agent(prompt, output_type=T)``) needs nothing more: the model is
    given a ``final_result`` tool whose input is the answer. A model that can constrain its
    reply to a JSON Schema natively says so with an attribute ``native_output = True``; its
    ``stream`` is then also given ``output_schema=OutputSchema(...)`` (as a keyword, only when
    a run asks for structured output) and the final reply's text is the JSON answer.
    """

    def stream(
        self,
        messages: Sequence[Message],
        tool_specs: Sequence[ToolSpec],
        system_prompt: str | None,
    ) -> AsyncIterator[ModelEvent]: ...
