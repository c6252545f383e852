"""Typed events: what a model streams to the loop, and what the agent streams to its caller."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from ._messages import JsonValue, Message, ToolResult, ToolUse, Usage

if TYPE_CHECKING:
    from ._interrupt import Interrupt
    from ._result import AgentResult

__all__ = [
    "InterruptRaised",
    "MessageAppended",
    "ModelEvent",
    "ModelResponse",
    "ModelStop",
    "ModelStopReason",
    "ReasoningDelta",
    "RunFinished",
    "StreamEvent",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallProgress",
    "ToolCallStarted",
    "ToolUseDelta",
    "ToolUseStart",
]

ModelStopReason = Literal["end_turn", "tool_use", "max_tokens", "content_filtered"]

# --- model events: a Model yields these --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of reply text."""

    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of reasoning text (and, at its end, the provider's signature if any).

    ``redacted`` carries a whole block of encrypted reasoning (opaque text) instead.
    """

    text: str
    signature: str | None = None
    redacted: str | None = None


@dataclass(frozen=True, slots=True)
class ToolUseStart:
    """The model starts a tool call; ``input`` is given when the provider sends it whole."""

    tool_use_id: str
    name: str
    input: dict[str, JsonValue] | None = None


@dataclass(frozen=True, slots=True)
class ToolUseDelta:
    """A fragment of a tool call's JSON arguments."""

    tool_use_id: str
    input_json: str


@dataclass(frozen=True, slots=True)
class ModelStop:
    """The model's last event: why it stopped, and the tokens it used."""

    stop_reason: ModelStopReason
    usage: Usage = field(default_factory=Usage)


ModelEvent: TypeAlias = TextDelta | ReasoningDelta | ToolUseStart | ToolUseDelta | ModelStop

# --- agent events: agent.stream_async yields these (and the model's deltas) --------------------


@dataclass(frozen=True, slots=True)
class MessageAppended:
    """A message was added to the conversation."""

    message: Message


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """A tool's body is about to run (after the before-tool hooks let it)."""

    tool_use: ToolUse


@dataclass(frozen=True, slots=True)
class ToolCallProgress:
    """A running tool said how far it has got (``ToolContext.report_progress``; an MCP server's
    progress notifications): ``progress`` out of ``total`` (None when unknown)."""

    tool_use: ToolUse
    progress: float
    total: float | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCallFinished:
    """A tool use has its final result (after the after-tool hooks)."""

    result: ToolResult


@dataclass(frozen=True, slots=True)
class InterruptRaised:
    """The run will pause for this interrupt."""

    interrupt: Interrupt


@dataclass(frozen=True, slots=True)
class RunFinished:
    """The last event of a stream: the run's result."""

    result: AgentResult


StreamEvent: TypeAlias = (
    TextDelta
    | ReasoningDelta
    | ToolUseStart
    | ToolUseDelta
    | MessageAppended
    | ToolCallStarted
    | ToolCallProgress
    | ToolCallFinished
    | InterruptRaised
    | RunFinished
)


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """One complete model reply: the assistant message, why the model stopped, tokens used."""

    message: Message
    stop_reason: ModelStopReason
    usage: Usage = field(default_factory=Usage)

    def to_dict(self) -> dict[str, JsonValue]:
        """The reply as JSON-compatible data."""
        return {
            "message": self.message.to_dict(),
            "stop_reason": self.stop_reason,
            "usage": self.usage.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "response") -> ModelResponse:
        """Rebuild a reply from :meth:`to_dict` output; StateFormatError if malformed."""
        from ._messages import _obj, _show, message_from_dict
        from .errors import StateFormatError

        d = _obj(data, where)
        stop = d.get("stop_reason")
        if stop not in ("end_turn", "tool_use", "max_tokens", "content_filtered"):
            raise StateFormatError(f"{where}.stop_reason: unknown stop reason {_show(stop)}")
        return cls(
            message_from_dict(d.get("message"), f"{where}.message"),
            stop,
            Usage.from_dict(d.get("usage"), f"{where}.usage"),
        )
