"""``Swarm``: agents that hand a task to one another, one at a time.

Each agent (its own copy, as in a graph) gets a ``handoff_to_agent(agent_name, message)``
tool. The entry agent gets the task; an agent that called the tool (successfully) during its
run hands off when its run ends: the named agent runs next, given the task, what each agent
said so far and the handoff's message. The run ends when an agent answers without handing off.
The handoff is read from the agent's own conversation (the tool call and its result), so it
survives a pause, a restart and a crash exactly as the conversation does.

A member may also be a ``Graph`` or a ``Swarm`` (built without a session, with a ``name``): it
runs its own copy as a graph's nested node does (``_nested.OrchestrationNode``), given the same
prompt an agent would be. It has no handoff tool: when it finishes, its last node's reply is
what it said and the swarm's run ends with it (agents may hand off to it, it hands off to
nobody).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .._agent import Agent
from .._messages import Text, ToolResult, ToolUse
from .._tools import ToolSpec
from ..errors import ConfigurationError, HandoffLimitError, ToolInputError
from ._base import Orchestration
from ._nested import make_node
from ._nodes import AgentNode, check_node_name
from ._record import with_text

if TYPE_CHECKING:
    from .._tools import ToolContext
    from ..hooks import HookProvider
    from ..sessions import SessionStore
    from ._record import NodeRun, Record, Task

__all__ = ["HANDOFF", "Swarm"]

HANDOFF = "handoff_to_agent"


class Swarm(Orchestration):
    """Agents handing a task to one another; called, paused, resumed and saved like an agent.

    Every agent needs a distinct name (its node's name); a member may be a ``Graph`` or
    ``Swarm`` with a name, which takes its prompt as its task and ends the run when it
    finishes (it cannot hand off). ``entry`` names the agent that gets
    the task first (default: the first). ``max_handoffs`` bounds the handoffs of one
    invocation (one more raises :class:`~interlude.errors.HandoffLimitError`; None: no bound).
    """

    kind = "swarm"

    def __init__(
        self,
        agents: Sequence[Agent | Orchestration],
        entry: str | None = None,
        *,
        max_handoffs: int | None = None,
        session: SessionStore | str | None = None,
        session_id: str | None = None,
        name: str | None = None,
        hooks: Iterable[HookProvider] = (),
        session_lease: float = 30.0,
    ) -> None:
        agents = list(agents)
        if not agents:
            raise ConfigurationError("a swarm needs at least one agent")
        for a in agents:
            if isinstance(a, Orchestration) and a.name is None:
                raise ConfigurationError(
                    f"a {a.kind} member of a swarm needs a name (its member's node name): "
                    f"{type(a).__name__}(..., name=...)"
                )
        names = [check_node_name(getattr(a, "name", None)) for a in agents]
        if len(set(names)) != len(names):
            raise ConfigurationError(f"the agents of a swarm need distinct names, got {names}")
        if max_handoffs is not None and (
            not isinstance(max_handoffs, int) or isinstance(max_handoffs, bool) or max_handoffs < 0
        ):
            raise ConfigurationError(f"max_handoffs must be None or >= 0, got {max_handoffs!r}")
        if entry is None:
            entry = names[0]
        if entry not in names:
            raise ConfigurationError(f"entry must be one of {names}, got {entry!r}")
        self._args: dict[str, Any] = {
            "agents": agents,
            "entry": entry,
            "max_handoffs": max_handoffs,
            "name": name,
            "session_lease": session_lease,
        }
        self._setup(name, hooks, session, session_id, session_lease)
        store, sid = self._node_session()
        tool = HandoffTool(names)
        self.nodes = {
            n: make_node(n, a, store, sid)
            if isinstance(a, Orchestration)
            else AgentNode(n, a, store, sid, [tool])
            for n, a in zip(names, agents, strict=True)
        }
        self._entry = entry
        self.max_handoffs = max_handoffs

    def copy_on(self, session: SessionStore | None, session_id: str | None) -> Swarm:
        args = {**self._args, "name": self.name, "session_lease": self.session_lease}
        swarm = Swarm(**args, session=session, session_id=session_id)  # the name as it is now
        swarm.hooks = self.hooks.copy()
        if self._policies is not None:
            swarm.govern(*self._policies)
        return swarm

    def entry_nodes(self) -> tuple[str, ...]:
        return (self._entry,)

    def check_limit(self, name: str, record: Record) -> None:
        limit = self.max_handoffs
        if limit is not None and record.handoffs > limit:
            raise HandoffLimitError(
                f"agent {name!r} would get handoff {record.handoffs}; max_handoffs is {limit}"
            )

    def prompt(self, name: str, record: Record) -> Task:
        """The task, what each agent said so far (latest first last), and the handoff."""
        parts: list[str] = []
        said = [(n, record.results[n]) for n in dict.fromkeys(reversed(record.order))]
        if said:
            lines = [f"- {n}: {r}" for n, r in reversed(said)]
            parts.append("What the agents said so far:\n" + "\n".join(lines))
        if record.handed is not None and record.handed[1] == name:
            parts.append(f"{record.handed[0]} handed the task to you: {record.handed[2]}")
        task = record.task or ""
        return with_text(task, "\n\n".join(parts)) if parts else task

    def after_finish(self, name: str, run: NodeRun, record: Record) -> Record:
        handoff = self._handoff(name, run.base)
        if handoff is None:
            return record
        target, message = handoff
        return record.but(
            ready=(target,), handoffs=record.handoffs + 1, handed=(name, target, message)
        )

    def _handoff(self, name: str, base: int) -> tuple[str, str] | None:
        """The last handoff the node's agent made in the run begun at message ``base`` (a
        nested graph or swarm member hands off to nobody)."""
        node = self.nodes[name]
        if not isinstance(node, AgentNode):
            return None
        messages = node.agent.messages[base:]
        ok = {
            b.tool_use_id
            for m in messages
            for b in m.content
            if isinstance(b, ToolResult) and b.status == "success"
        }
        found = None
        for m in messages:
            for use in m.tool_uses:
                if use.name == HANDOFF and use.id in ok:
                    found = (str(use.input["agent_name"]), str(use.input.get("message", "")))
        return found


class HandoffTool:
    """``handoff_to_agent(agent_name, message)``: name the agent that carries on."""

    idempotent = True
    """It only records the choice in the conversation: safe to run again."""

    def __init__(self, names: Sequence[str]) -> None:
        self._names = tuple(names)
        self._spec = ToolSpec(
            HANDOFF,
            "Hand the task to another agent of the swarm when it is better placed to carry "
            "on; it runs once you have given your reply. Agents: " + ", ".join(self._names),
            {
                "type": "object",
                "properties": {
                    "agent_name": {"type": "string", "enum": list(self._names)},
                    "message": {"type": "string", "description": "What they should do."},
                },
                "required": ["agent_name", "message"],
                "additionalProperties": False,
            },
        )

    @property
    def name(self) -> str:
        return HANDOFF

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    async def run(self, tool_use: ToolUse, context: ToolContext) -> ToolResult:
        target, message = tool_use.input.get("agent_name"), tool_use.input.get("message")
        if target not in self._names or not isinstance(message, str):
            raise ToolInputError(
                f"handoff_to_agent: agent_name must be one of {list(self._names)} and message "
                f"text, got {dict(tool_use.input)!r}"
            )
        if target == context.agent.name:
            raise ToolInputError(f"handoff_to_agent: {target!r} is you; name another agent")
        return ToolResult(tool_use.id, "success", [Text(f"Handed off to {target}.")])
