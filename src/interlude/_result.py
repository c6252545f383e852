"""What a run returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ._interrupt import Interrupt
from ._messages import Message, Usage

__all__ = ["AgentResult", "StopReason"]

StopReason = Literal[
    "end_turn", "max_tokens", "content_filtered", "interrupt", "cancelled", "undone"
]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentResult:
    """How a run ended.

    ``interrupts`` lists every question awaiting an answer when ``stop_reason`` is
    ``"interrupt"``, and is empty otherwise. ``str(result)`` is the reply text. ``output`` is
    the validated final answer of a run given ``output_type=T``: a T, or its JSON data when
    the process that finished the run was not given T; None for a plain text run.
    """

    stop_reason: StopReason
    message: Message | None = None
    interrupts: list[Interrupt] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    output: Any = None

    def __str__(self) -> str:
        return "" if self.message is None else self.message.text
