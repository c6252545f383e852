"""One node of a graph or swarm: its own copy of an agent, run through the public API only.

Each node runs a copy of the agent it was given (``Agent.from_spec(agent.spec, ...)``: the same
model, tools, hooks and settings; its own conversation and ``state``), so the agent you passed
is never run or changed. With a session the copy has its own session in the same store, under
the id ``<orchestration session id>:node:<node name>``: its own journal is what lets a node
killed mid-run be recovered without repeating its model calls or finished tools.

Questions a node's agent asks keep everything they show; only their id changes, so that two
nodes asking the same question (same name, same tool use id) do not collide:
``v1:node:<node name>:<uuid5(NAMESPACE_OID, <the agent's own id>)>``; their ``via`` gets the
node's marker in front (see ``node_path``).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, TypeAlias

from .._agent import Agent, Prompt, respec
from .._interrupt import Interrupt
from .._messages import JsonValue
from .._result import AgentResult
from .._stream import RunFinished
from ..errors import ConfigurationError
from ..sessions import check_session_id
from ._events import NodeEvent, node_marker

if TYPE_CHECKING:
    from .._tools import AgentTool
    from ..policy import Policy
    from ..sessions import SessionStore
    from ._nested import OrchestrationNode
    from ._record import Task

__all__ = [
    "AgentNode",
    "Node",
    "check_node_name",
    "node_question_id",
    "node_session_id",
]

Emit = Callable[[object], None]

_NAME = re.compile(r"[A-Za-z0-9_-]+")


def check_node_name(name: object) -> str:
    """A node name: 1-64 letters, digits, ``_`` or ``-`` (it is part of ids and tool input)."""
    if not isinstance(name, str) or not name or len(name) > 64:
        raise ConfigurationError(f"a node name must be 1-64 characters, got {name!r}")
    if _NAME.fullmatch(name) is None:
        raise ConfigurationError(f"node name {name!r}: use letters, digits, '_' or '-'")
    return name


def node_session_id(session_id: str, node: str) -> str:
    """The session id of a node's agent: ``<session id>:node:<node>``."""
    return check_session_id(f"{session_id}:node:{node}")


def node_question_id(node: str, inner_id: str) -> str:
    """The orchestration's id of a question a node's agent asked under ``inner_id``."""
    return f"v1:node:{node}:{uuid.uuid5(uuid.NAMESPACE_OID, inner_id)}"


def marked(node: str, question: Interrupt) -> Interrupt:
    """``question`` with ``node``'s marker in front of its ``via`` (its id unchanged)."""
    return replace(question, via=(node_marker(node), *question.via))


class AgentNode:
    """A node's agent copy, and the calls the orchestration makes on it."""

    def __init__(
        self,
        name: str,
        template: Agent,
        store: SessionStore | None,
        session_id: str | None,
        extra_tools: Iterable[AgentTool] = (),
    ) -> None:
        if not isinstance(template, Agent):
            raise ConfigurationError(
                f"node {name!r} must be an Agent, a Graph or a Swarm, got {type(template).__name__}"
            )
        if template.session_store is not None:
            raise ConfigurationError(
                f"node {name!r}: the agent of a node keeps its state with the orchestration; "
                "build it without session= (give the graph or swarm the session)"
            )
        self.name = name
        self.template = template
        self._extra = tuple(extra_tools)
        self._store = store
        self._session_id = None if session_id is None else node_session_id(session_id, name)
        # The template as it is now (a hook added to it later is not the node's): the copy
        # itself is made when the node is first used, so a node that does not run costs none.
        spec = template.spec
        self._spec = spec
        self._hooks = spec.hooks.copy()
        self._state = json.dumps(template.state) if template.state else None
        self._agent: Agent | None = None

    @property
    def agent(self) -> Agent:
        """The node's own copy of the template (made at first use)."""
        agent = self._agent
        if agent is None:
            agent = self._agent = self.fresh()
        return agent

    def govern(self, policy: Policy | None, shadow: Policy | None) -> None:
        """The node's agent under these policies where its template has none of its own."""
        spec = self._spec
        policy = spec.policy if spec.policy is not None else policy
        shadow = spec.shadow if spec.shadow is not None else shadow
        if policy is not spec.policy or shadow is not spec.shadow:
            self._spec = replace(spec, policy=policy, shadow=shadow)
            if self._agent is not None:  # made already: the same change to it
                self._agent.policy, self._agent.shadow = policy, shadow

    def fresh(self, *, with_session: bool = True) -> Agent:
        """A new copy of the template (with the node's session, unless told otherwise)."""
        tools = None
        if self._extra:  # with the orchestration
            tools = {**self._spec.tools, **{t.name: t for t in self._extra}}
        # (list_pending False: the orchestration lists its nodes' questions)
        spec = respec(self._spec, hooks=self._hooks, list_pending=False, tools=tools)
        state = None if self._state is None else json.loads(self._state)
        if with_session and self._store is not None:
            return Agent.from_spec(
                spec, state=state, session=self._store, session_id=self._session_id
            )
        return Agent.from_spec(spec, state=state)

    def message_count(self) -> int:
        return len(self.agent.messages)

    async def load(self) -> None:
        await self.agent.load()

    def export_state(self) -> dict[str, JsonValue]:
        return self.agent.export_state()

    def import_state(self, data: Mapping[str, JsonValue]) -> Agent:
        """A fresh copy (no session) with ``data`` imported: :meth:`adopt` it once every node
        took its data (so a refused import changes nothing)."""
        agent = self.fresh()
        agent.import_state(data)
        return agent

    def adopt(self, agent: Agent) -> None:
        self._agent = agent

    @property
    def view(self) -> object:
        """What the node hooks see as the event's agent."""
        return self.agent

    def cancel(self) -> None:
        """Cancel the agent's run (``Agent.cancel``: safe when it is not running)."""
        if self._agent is not None:
            self._agent.cancel()

    def discard(self) -> None:
        """Discard the agent's pause or stopped run, if it has one (``discard_pause``)."""
        if self.agent.is_paused or self.agent.needs_recovery:
            self.agent.discard_pause()

    async def resume_expired(self, emit: Emit | None) -> AgentResult:
        """Settle the agent's expired questions (``Agent.resume_expired``) and carry on."""
        return await self._carried(await self.agent.resume_expired_async())

    async def _carried(self, result: AgentResult) -> AgentResult:
        """A run that ended an undo (a node undo: ``_undo``) carries on from the checkpoint
        its agent then stands at, as ``recover`` does."""
        if result.stop_reason != "undone":
            return result
        agent = self.agent
        if agent.needs_recovery:
            return await agent.recover_async()
        messages = agent.messages  # it stands at a final reply: its run ended there
        last = messages[-1] if messages and messages[-1].role == "assistant" else None
        return AgentResult(stop_reason="end_turn", message=last)

    @property
    def needs_recovery(self) -> bool:
        return self.agent.needs_recovery

    @property
    def is_paused(self) -> bool:
        return self.agent.is_paused

    def pending(self) -> list[Interrupt]:
        """The questions the node's agent waits on, under its own ids."""
        return self.agent.interrupts

    async def recover(self, emit: Emit | None) -> AgentResult:
        """Carry on the agent's run whose process stopped (from its journal; an undo it was
        in the middle of, then the run from the undo's checkpoint)."""
        return await self._carried(await self.agent.recover_async())

    async def start(self, prompt: Task, emit: Emit | None) -> AgentResult:
        if emit is None:
            return await self.agent.invoke_async(prompt)
        return await self._streamed(prompt, emit)

    async def resume(
        self, answers: Mapping[str, JsonValue], by: str | None, emit: Emit | None
    ) -> AgentResult:
        if emit is None or by is not None:
            return await self._carried(await self.agent.resume_async(answers, by=by))
        listed = [
            {"interruptResponse": {"interruptId": i, "response": a}} for i, a in answers.items()
        ]
        return await self._carried(await self._streamed(listed, emit))

    async def _streamed(self, prompt: Prompt, emit: Emit) -> AgentResult:
        async for event in self.agent.stream_async(prompt):
            if isinstance(event, RunFinished):
                return event.result
            emit(NodeEvent(self.name, event))
        raise AssertionError("a stream ends with RunFinished")  # pragma: no cover

    def questions(self) -> tuple[tuple[Interrupt, ...], dict[str, str]]:
        """The agent's pending questions under the orchestration's ids, and id -> own id."""
        out, inner = [], {}
        for q in self.agent.interrupts:
            gid = node_question_id(self.name, q.id)
            inner[gid] = q.id
            out.append(marked(self.name, replace(q, id=gid)))
        return tuple(out), inner

    def finished_since(self, base: int, prompt: Task) -> AgentResult | None:
        """The agent's reply if it finished a run begun at message ``base`` (after a crash
        between the node's end and the orchestration's save), else None."""
        messages = self.agent.messages
        if len(messages) > base and messages[-1].role == "assistant":
            return AgentResult(stop_reason="end_turn", message=messages[-1])
        return None


Node: TypeAlias = "AgentNode | OrchestrationNode"
"""A node of a graph: an agent's copy, or a nested graph's or swarm's copy."""
