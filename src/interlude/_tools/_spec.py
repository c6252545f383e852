"""What a model is told about a tool, and the small protocol every tool meets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .._messages import JsonValue, ToolResult, ToolUse

if TYPE_CHECKING:
    from ._context import ToolContext

__all__ = ["AgentTool", "ToolSpec"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool's name, description and JSON Schema of its input."""

    name: str
    description: str
    input_schema: dict[str, JsonValue] = field(default_factory=dict)


@runtime_checkable
class AgentTool(Protocol):
    """A tool an agent can run. ``@tool`` makes one from a function.

    ``run`` returns the result for ``tool_use``; an exception it raises becomes an error result
    (and is shown to the after-tool hooks).
    """

    @property
    def name(self) -> str: ...

    @property
    def spec(self) -> ToolSpec: ...

    async def run(self, tool_use: ToolUse, context: ToolContext) -> ToolResult: ...
