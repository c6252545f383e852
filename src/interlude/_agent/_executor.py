"""Where a run's model calls and tool bodies happen: the one seam for running them elsewhere.

The loop decides everything (steps, hooks, answers, the journal); an executor only performs
the two things that reach outside it. ``LocalExecutor`` performs them in this process, as
every agent does by default; an integration (e.g. a durable execution engine running each
as an activity) gives the agent another one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .._messages import ToolResult, ToolUse
    from .._stream import ModelResponse
    from .._tools._context import ToolContext
    from .._tools._spec import AgentTool
    from ._loop import Run
    from ._state import ToolCall

__all__ = ["LOCAL", "Executor", "LocalExecutor"]


class Executor(Protocol):
    async def call_model(self, run: Run) -> ModelResponse:
        """The model's reply to the conversation as it stands (streamed events emitted)."""
        ...

    async def run_tool(
        self, run: Run, call: ToolCall, tool: AgentTool, tool_use: ToolUse, context: ToolContext
    ) -> ToolResult:
        """The tool's result for ``tool_use`` (the call as the before-hooks left it). May raise
        InterruptSignal (the tool asked a question) or any exception (the tool failed)."""
        ...


class LocalExecutor:
    """Model calls and tool bodies in this process."""

    async def call_model(self, run: Run) -> ModelResponse:
        return await run._call_model()

    async def run_tool(
        self, run: Run, call: ToolCall, tool: AgentTool, tool_use: ToolUse, context: ToolContext
    ) -> ToolResult:
        return await tool.run(tool_use, context)


LOCAL = LocalExecutor()
