"""The context handed to a tool that asks for it (a parameter annotated ``ToolContext``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._interrupt import Answers, Interrupter, InterruptSource
from .._messages import ToolUse

if TYPE_CHECKING:
    from .._agent._agent import Agent

__all__ = ["ToolContext"]


class ToolContext(Interrupter):
    """What a running tool can see and do: its tool use, the agent, and ``interrupt(...)``.

    A tool that interrupts from its own body is run again from the top on resume, and then
    ``interrupt(name)`` returns the answer.
    """

    __slots__ = ("_answers", "_callback_index", "_names", "_scope", "agent", "tool_use")
    _source: InterruptSource = "tool_call"

    def __init__(self, tool_use: ToolUse, agent: Agent, answers: Answers) -> None:
        self.tool_use = tool_use
        self.agent = agent
        self._answers = answers
        self._scope = tool_use.id
        self._names = None
        self._callback_index = 0

    def _interrupt_tool_use(self) -> ToolUse | None:
        return self.tool_use
