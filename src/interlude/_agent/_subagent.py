"""Agents as tools: one agent runs another as a tool, and the other's questions travel up.

``Agent.as_tool`` makes a tool whose body runs a fresh copy of the agent on the prompt the
model gives and returns the copy's final text. When the copy pauses, the tool relays its
questions (``ToolContext.relay``): the parent pauses with all of them, under ids scoped by the
parent's tool call, and keeps the copy's whole state (its ``export_state()``) as the call's
checkpoint, so it lives in the parent's pause, its export and its session, under the parent's
signature. On the parent's resume the body runs again: it loads that state into a new copy and
resumes it with the answers given to its questions, so the copy carries on where it stopped and
nothing it finished (model replies, tool runs) happens again.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from .._messages import Text, ToolResult, ToolUse
from .._result import AgentResult
from .._tools import ToolSpec, task_prompt, task_tool_name, task_tool_spec
from ..errors import ConfigurationError, StateFormatError

if TYPE_CHECKING:
    from .._interrupt import Interrupt
    from .._tools import ToolContext
    from ._agent import Agent

__all__ = ["SubAgentTool"]

MAX_DEPTH = 8
"""How deep sub-agents nest: a call that would run a copy deeper than this is an error result."""

_CHAIN: ContextVar[tuple[Agent, ...]] = ContextVar("interlude_subagent_chain", default=())
"""The agents whose runs enclose the current task, outermost first: the calling agent at the
top, then the agent of each sub-agent call (asyncio tasks inherit it)."""


class SubAgentTool:
    """A tool that hands its ``prompt`` to a copy of ``agent`` and returns the final text.

    Each call runs its own copy: a new conversation, a copy of the agent's ``state``, and the
    agent's model, tools, hooks, system prompt, limits, conversation manager, tracing, name and
    signing key; time comes from the calling agent's clock, so a deadline passes for both at
    once. The agent itself is never run or changed, and several calls (also of one agent) can
    run at once.
    """

    idempotent = False
    """Recovery asks before running a sub-agent again whose process stopped mid-call."""

    def __init__(self, agent: Agent, name: str | None, description: str | None) -> None:
        if agent._session is not None:
            raise ConfigurationError(
                "an agent used as a tool keeps its state in the calling agent's pause; build "
                "it without session="
            )
        tool_name = task_tool_name(agent.name if name is None else name, "agent")
        if description is not None and not isinstance(description, str):
            raise ConfigurationError(f"description must be text, got {description!r}")
        self.agent = agent
        self._name = tool_name
        self._spec = task_tool_spec(
            tool_name,
            description or f"Hand a task to the {tool_name} agent and get its final answer.",
        )

    def __repr__(self) -> str:
        return f"SubAgentTool({self._name!r})"

    @property
    def policy_source(self) -> str:
        """Where a policy sees this tool come from: ``agent:<tool name>``."""
        return f"agent:{self._name}"

    @property
    def name(self) -> str:
        return self._name

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    async def run(self, tool_use: ToolUse, context: ToolContext) -> ToolResult:
        prompt = task_prompt(self._name, tool_use)
        chain = _CHAIN.get() or (context.agent,)
        if any(agent is self.agent for agent in chain):  # else copies without end
            raise ConfigurationError(
                f"tool {self._name!r} was not run: it would run agent {self._name!r} inside "
                "its own run (an agent cannot be its own sub-agent, directly or through others)"
            )
        if len(chain) > MAX_DEPTH:
            raise ConfigurationError(
                f"tool {self._name!r} was not run: sub-agents nest at most {MAX_DEPTH} deep"
            )
        sub = self._copy(context.agent)
        saved = context.checkpoint
        token = _CHAIN.set((*chain, self.agent))
        try:
            if saved is None:
                result = await sub.invoke_async(prompt)
            else:
                if not isinstance(saved, dict):
                    raise StateFormatError(
                        f"the checkpoint of sub-agent call {tool_use.id!r} is not an agent "
                        f"state (got {type(saved).__name__})"
                    )
                sub.import_state(saved)
                result = await _carry_on(sub, context)
        finally:
            _CHAIN.reset(token)
        if result.stop_reason == "interrupt":
            context.checkpoint = sub.export_state()
            context.relay(sub.interrupts)
        return ToolResult(tool_use.id, "success", [Text(str(result))])

    def _copy(self, caller: Any) -> Agent:
        """A fresh copy of the agent (everything it is, with the calling run's clock, and its
        policies where the agent has none of its own: a policy covers the calls of the agents
        it hands work to), with its own copy of ``agent.state`` and no conversation or
        session."""
        from dataclasses import replace

        from ._agent import Agent

        template = self.agent
        spec = template.spec
        spec = replace(
            spec,
            clock=caller.clock,
            policy=spec.policy if spec.policy is not None else getattr(caller, "policy", None),
            shadow=spec.shadow if spec.shadow is not None else getattr(caller, "shadow", None),
        )
        return Agent.from_spec(spec, state=json.loads(json.dumps(template.state)))


async def _carry_on(sub: Agent, context: ToolContext) -> AgentResult:
    """Resume the paused copy with what was answered to its questions since they went up;
    with nothing new for it (the parent's resume answered other questions), it stays paused."""
    pending = sub.interrupts
    answers = context.relayed_answers(pending)
    if answers:  # settled at the top (a quorum counted there): the copy takes them as given
        from ._answering import resume_plan

        plan = resume_plan(sub, answers, _answered_by(context, pending), relayed=True)
        return await sub._start(plan, None)
    now = sub.clock()
    if any(q.expires_at is not None and q.expires_at <= now for q in pending):
        return await sub.resume_expired_async()
    return AgentResult(stop_reason="interrupt", interrupts=pending)


def _answered_by(context: ToolContext, pending: list[Interrupt]) -> str | None:
    """Who answered (the calling agent's audit trail names them), for the copy's own trail."""
    ids = {context.relayed_id(q) for q in pending}
    for entry in reversed(context.agent.audit):
        if entry.interrupt_id in ids and not entry.expired:
            return entry.by
    return None
