"""The stop reason every adapter reports for a reply that holds tool uses."""

from __future__ import annotations

from .._stream import ModelStopReason

__all__ = ["with_tool_uses"]


def with_tool_uses(reason: ModelStopReason, has_tool_uses: bool) -> ModelStopReason:
    """``"tool_use"`` when the reply holds tool uses, unless it was cut off (``max_tokens``)
    or filtered: providers (and gateways) often say ``end_turn`` / ``stop`` after tool calls."""
    if has_tool_uses and reason not in ("max_tokens", "content_filtered"):
        return "tool_use"
    return reason
