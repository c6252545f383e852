"""A graph or swarm as a node of a graph: its own copy, with its own session, run through its
public API.

The node runs a copy of the orchestration it was given (built the same way, its node hooks
copied); with a session the copy's session id is ``<graph session id>:node:<node name>`` (so its
own nodes' are ``...:node:<node name>:node:<inner node>``): durable per node at every level.
Its questions come up under ids scoped by the node (``v1:node:<node>:<uuid5(inner id)>``) with
the node's marker in front of their ``via`` (``node_path`` gives the whole path, outermost
first); the answers go down to the copy's ``resume`` under its own ids. ``make_node`` picks the kind
of node for what a graph or swarm was given (an agent, or a graph or swarm).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from .._interrupt import Interrupt
from .._messages import JsonValue
from .._result import AgentResult
from ..errors import ConfigurationError
from ._base import Orchestration
from ._events import MultiAgentResult, NestedView, NodeEvent
from ._nodes import AgentNode, Emit, marked, node_question_id, node_session_id

if TYPE_CHECKING:
    from ..policy import Policy
    from ..sessions import SessionStore
    from ._nodes import Node
    from ._record import Task

__all__ = ["OrchestrationNode", "make_node"]


def make_node(
    name: str, template: object, store: SessionStore | None, session_id: str | None
) -> Node:
    """The node for ``template``: an agent's copy, or a nested graph's or swarm's copy."""
    if isinstance(template, Orchestration):
        return OrchestrationNode(name, template, store, session_id)
    return AgentNode(name, template, store, session_id)  # type: ignore[arg-type]


class OrchestrationNode:
    """A node whose work is a whole graph or swarm (its own copy)."""

    def __init__(
        self,
        name: str,
        template: Orchestration,
        store: SessionStore | None,
        session_id: str | None,
    ) -> None:
        if template.session_id is not None:
            raise ConfigurationError(
                f"node {name!r}: a {template.kind} used as a node keeps its state with the "
                "outer graph; build it without session= (give the outer graph the session)"
            )
        self.name = name
        self.template = template
        self._store = store
        self._session_id = None if session_id is None else node_session_id(session_id, name)
        self._policies: tuple[Policy | None, Policy | None] | None = None
        self.inner = self.fresh()

    def govern(self, policy: Policy | None, shadow: Policy | None) -> None:
        """Its copies' agents under these policies where they have none of their own."""
        self._policies = (policy, shadow)
        self.inner.govern(policy, shadow)

    def fresh(self) -> Orchestration:
        """A new copy of the template (with the node's session, if any)."""
        copy = self.template.copy_on(self._store, self._session_id)
        copy.list_pending = False  # listed once, by the outermost graph
        if self._policies is not None:
            copy.govern(*self._policies)
        return copy

    async def load(self) -> None:
        await self.inner.load()

    def export_state(self) -> dict[str, JsonValue]:
        return self.inner.export_state()

    def import_state(self, data: Mapping[str, JsonValue]) -> Orchestration:
        copy = self.fresh()
        copy.import_state(data)
        return copy

    def adopt(self, copy: Orchestration) -> None:
        self.inner = copy

    def message_count(self) -> int:
        return 0

    @property
    def view(self) -> object:
        """What the node hooks see as the event's agent (``event.nested`` is the copy)."""
        return NestedView(self.name, self.inner)

    def cancel(self) -> None:
        """Cancel the copy's run (see ``Orchestration.cancel``)."""
        self.inner.cancel()

    def discard(self) -> None:
        """Discard the copy's pause or stopped run, if it has one (``discard_pause``)."""
        if self.inner.is_paused or self.inner.needs_recovery:
            self.inner.discard_pause()

    @property
    def needs_recovery(self) -> bool:
        return self.inner.needs_recovery

    @property
    def is_paused(self) -> bool:
        return self.inner.is_paused

    def pending(self) -> list[Interrupt]:
        return self.inner.interrupts

    async def recover(self, emit: Emit | None) -> AgentResult:
        return _as_agent_result(await self.inner.recover_async())

    async def start(self, prompt: Task, emit: Emit | None) -> AgentResult:
        inner = self.inner
        return await self._passed_on(emit, lambda e: inner.run_task(prompt, e))

    async def resume(
        self, answers: Mapping[str, JsonValue], by: str | None, emit: Emit | None
    ) -> AgentResult:
        inner = self.inner
        return await self._passed_on(emit, lambda e: inner.run_resume(answers, by, e))

    async def resume_expired(self, emit: Emit | None) -> AgentResult:
        inner = self.inner
        return await self._passed_on(emit, lambda e: inner.run_expired(e))

    async def _passed_on(
        self, emit: Emit | None, go: Callable[[Emit | None], Awaitable[MultiAgentResult]]
    ) -> AgentResult:
        """Run ``go`` on the copy, its events passed on tagged with this node (streamed)."""
        if emit is None:
            return _as_agent_result(await go(None))
        name = self.name
        return _as_agent_result(await go(lambda event: emit(NodeEvent(name, event))))  # type: ignore[arg-type]

    def questions(self) -> tuple[tuple[Interrupt, ...], dict[str, str]]:
        """The copy's pending questions under the outer ids, and outer id -> the copy's id."""
        out, inner = [], {}
        for q in self.inner.interrupts:
            gid = node_question_id(self.name, q.id)
            inner[gid] = q.id
            out.append(marked(self.name, replace(q, id=gid)))
        return tuple(out), inner

    def finished_since(self, base: int, prompt: Task) -> AgentResult | None:
        """The copy's result if it had finished its run on ``prompt`` (a crash between its
        end and the outer graph's save), else None."""
        record = self.inner.record
        if record.status == "idle" and record.order and record.task == prompt:
            return _as_agent_result(self.inner.result())
        return None


def _as_agent_result(result: MultiAgentResult) -> AgentResult:
    """What the outer graph keeps of the inner run: its stop reason, the last node's reply."""
    last = result.nodes[result.order[-1]] if result.order else None
    return AgentResult(
        stop_reason=result.stop_reason,
        message=None if last is None else last.message,
        interrupts=list(result.interrupts),
    )
