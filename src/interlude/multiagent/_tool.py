"""A whole graph or swarm as a tool of an agent, built on the public tool seam.

Like ``Agent.as_tool``: each call runs a fresh copy (no session) on ``{"prompt": text}`` and
returns the copy's final text. When the copy pauses, its whole exported state becomes the
call's ``checkpoint`` and its questions are relayed (``ToolContext.relay``): the calling agent
pauses with them under ids scoped by its tool call. On the caller's resume the body runs
again: the copy is loaded from the checkpoint and resumed with the answers relayed down.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._messages import Text, ToolResult, ToolUse
from .._tools import ToolSpec, task_prompt, task_tool_name, task_tool_spec
from ..errors import ConfigurationError, StateFormatError

if TYPE_CHECKING:
    from .._tools import ToolContext
    from ._base import Orchestration
    from ._events import MultiAgentResult

__all__ = ["OrchestrationTool"]


class OrchestrationTool:
    """A tool that hands its ``prompt`` to a fresh copy of a graph or swarm."""

    idempotent = False
    """Recovery asks before running the orchestration again whose process stopped mid-call."""

    def __init__(self, owner: Orchestration, name: str | None, description: str | None) -> None:
        if owner.session_id is not None:
            raise ConfigurationError(
                f"a {owner.kind} used as a tool keeps its state in the calling agent's pause; "
                "build it without session="
            )
        tool_name = task_tool_name(owner.name if name is None else name, owner.kind)
        self.owner = owner
        self._name = tool_name
        self._spec = task_tool_spec(
            tool_name,
            description or f"Hand a task to the {tool_name} {owner.kind} and get its answer.",
        )

    def __repr__(self) -> str:
        return f"OrchestrationTool({self._name!r})"

    @property
    def policy_source(self) -> str:
        """Where a policy sees this tool come from: ``graph:<tool name>`` (a swarm's too)."""
        return f"graph:{self._name}"

    @property
    def name(self) -> str:
        return self._name

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    async def run(self, tool_use: ToolUse, context: ToolContext) -> ToolResult:
        prompt = task_prompt(self._name, tool_use)
        copy = self.owner.copy()
        saved = context.checkpoint
        if saved is None:
            result = await copy.invoke_async(prompt)
        else:
            if not isinstance(saved, dict):
                raise StateFormatError(
                    f"the checkpoint of call {tool_use.id!r} is not a {self.owner.kind} state"
                )
            copy.import_state(saved)
            result = await _carry_on(copy, context)
        if result.stop_reason == "interrupt":
            context.checkpoint = copy.export_state()
            context.relay(copy.interrupts)
        return ToolResult(tool_use.id, "success", [Text(str(result))])


async def _carry_on(copy: Orchestration, context: ToolContext) -> MultiAgentResult:
    """Resume the copy with the answers relayed down since its questions went up; with none
    for it (the caller's resume answered other questions), it stays paused."""
    answers = context.relayed_answers(copy.interrupts)
    if answers:
        return await copy.resume_async(answers)
    return copy.result()
