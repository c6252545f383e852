"""``agent.tool.<name>(**kwargs)``: an agent's tools called from code, hooks included."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._messages import JsonValue, ToolResult, ToolUse
from .._sync import run_sync
from ..errors import DirectToolInterruptError, UnknownToolError
from ._state import Progress, ToolBatch, ToolCall

if TYPE_CHECKING:
    from .._tools import AgentTool
    from ._agent import Agent

__all__ = ["DirectTool", "ToolCaller"]


class ToolCaller:
    """``agent.tool.<name>(**kwargs)``: run a tool directly, hooks included.

    The call is not recorded in the conversation. It returns the :class:`ToolResult`; an
    interrupt raises DirectToolInterruptError and changes nothing.
    """

    def __init__(self, agent: Agent) -> None:
        self._agent = agent

    def __getattr__(self, name: str) -> DirectTool:
        tools = self._agent._tools
        tool = tools.get(name) or tools.get(name.replace("_", "-"))
        if tool is None:
            raise UnknownToolError(
                f"the agent has no tool {name!r} (tools: {', '.join(tools) or 'none'})"
            )
        return DirectTool(self._agent, tool)

    def __dir__(self) -> list[str]:
        return list(self._agent._tools)


class DirectTool:
    """One tool of an agent, callable from code."""

    def __init__(self, agent: Agent, tool: AgentTool) -> None:
        self._agent, self._tool = agent, tool

    def __call__(self, **kwargs: JsonValue) -> ToolResult:
        return run_sync(self.call_async(**kwargs))

    async def call_async(self, **kwargs: JsonValue) -> ToolResult:
        import os

        from ._batch import run_call
        from ._loop import Run

        tool_use = ToolUse(f"direct_{os.urandom(6).hex()}", self._tool.name, dict(kwargs))
        call = ToolCall(tool_use)
        run = Run(self._agent, Progress(), None, None, direct=True)
        run.step = ToolBatch(-1, (call,))  # a batch of its own, never appended
        interrupts = await run_call(run, call, False)
        if interrupts:
            names = ", ".join(repr(i.name) for i in interrupts)
            raise DirectToolInterruptError(
                f"direct call of tool {self._tool.name!r} was interrupted ({names}); direct calls "
                "cannot pause. Run the tool through the agent to ask for approval.",
                interrupts,
            )
        result = run.batch().calls[0].result
        assert result is not None
        return result
