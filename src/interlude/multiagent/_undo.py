"""Undo on a node of a graph or swarm: the node agent's session taken back to a checkpoint
(through its public ``Agent.undo_async``), and the orchestration's record made to match.

An undo takes back part of the node's *current run*: the run its result (or its pause) comes
from in this invocation. ``to`` is a checkpoint of the node agent's session
(``node_checkpoints``) at or after that run's prompt. Checked first, with nothing changed
(UndoError, AgentBusyError, SessionConflictError, UnknownCheckpointError):

- the orchestration is not running here, and no live process elsewhere holds its claim;
- the node is an agent node (a nested graph or swarm: not yet) that finished, or waits on a
  person, in this invocation, past its before-node hooks; a node whose run stopped with its
  process is carried on first (``recover``);
- no node that takes what it did has run since it finished: along a graph's edges, the nodes
  downstream of it; in a swarm, any other member (the ones handed to after it). Their effects
  and results were built on it, so the undo is refused, naming them;
- the node agent's own checks (``Agent.undo``): each call after the checkpoint has a
  compensation, or is in ``skip``.

Then three steps. (1) One save of the record with the node started again: not finished (its
result and its place in ``order`` gone), waiting on nothing (its questions gone from the
pending index), the nodes it makes ready no longer ready, and an audit entry named ``"undo"``;
this save is a run claim, renewed while the compensations run. (2) The agent's undo: its
compensations, newest first, once each, then its session cut to the checkpoint. (3) One save
of where the node then stands: stopped at the checkpoint (the orchestration's
``needs_recovery``: ``recover()`` carries the node on from there, and the rest of the run
after it), or waiting on a compensation's approval (the orchestration is paused on it like on
any node question: ``resume`` answers it, the undo ends and the node carries on). A process
that dies after (1) leaves a stopped run: ``recover()`` carries the node's agent on from
where its session stands (the undo, then the run; or, if the undo never started, its reply
as it was).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, ClassVar, Literal, overload

from .._agent import check_by
from .._audit import AuditEntry
from .._frozen import freeze
from .._messages import Message, Text
from .._sync import run_sync
from ..errors import AgentBusyError, UndoError
from ._claim import Renewer, check_free
from ._engine import EngineOwner
from ._events import MultiAgentResult
from ._nodes import AgentNode
from ._record import NodeRun, Record

if TYPE_CHECKING:
    from .._agent import Checkpoint, UndoPlan
    from .._result import AgentResult
    from ..sessions import SessionStore
    from ._record import Task

__all__ = ["UNDO", "NodeUndo"]

UNDO = "undo"
"""The name of the audit entry a node undo adds to the orchestration's trail."""


class NodeUndo(EngineOwner):
    """``undo`` and ``node_checkpoints`` for :class:`~._base.Orchestration`."""

    if TYPE_CHECKING:
        kind: ClassVar[str]
        session_lease: float
        _running: bool
        _lock: asyncio.Lock | None
        _store: SessionStore | None
        _session_id: str | None
        _claim: object

        async def load(self) -> None: ...

        def _load_sync(self) -> None: ...

        async def _renew(self) -> None: ...

    def node_checkpoints(self, node: str) -> list[Checkpoint]:
        """The checkpoints of ``node``'s agent session, oldest first (``Agent.checkpoints``):
        what :meth:`undo` takes as ``to`` (one at or after the prompt of the node's current
        run). UndoError naming the nodes if there is no such agent node."""
        self._load_sync()
        return self._agent_node(node).agent.checkpoints()

    @overload
    def undo(
        self,
        to: str,
        *,
        node: str,
        by: str | None = ...,
        skip: Sequence[str] = ...,
        dry_run: Literal[False] = ...,
    ) -> MultiAgentResult: ...
    @overload
    def undo(
        self,
        to: str,
        *,
        node: str,
        by: str | None = ...,
        skip: Sequence[str] = ...,
        dry_run: Literal[True],
    ) -> UndoPlan: ...
    def undo(
        self,
        to: str,
        *,
        node: str,
        by: str | None = None,
        skip: Sequence[str] = (),
        dry_run: bool = False,
    ) -> MultiAgentResult | UndoPlan:
        """Take ``node`` back to checkpoint ``to``, from sync code: see :meth:`undo_async`."""
        return run_sync(self._undo(to, node, by, skip, dry_run))

    @overload
    async def undo_async(
        self,
        to: str,
        *,
        node: str,
        by: str | None = ...,
        skip: Sequence[str] = ...,
        dry_run: Literal[False] = ...,
    ) -> MultiAgentResult: ...
    @overload
    async def undo_async(
        self,
        to: str,
        *,
        node: str,
        by: str | None = ...,
        skip: Sequence[str] = ...,
        dry_run: Literal[True],
    ) -> UndoPlan: ...
    async def undo_async(
        self,
        to: str,
        *,
        node: str,
        by: str | None = None,
        skip: Sequence[str] = (),
        dry_run: bool = False,
    ) -> MultiAgentResult | UndoPlan:
        """Take ``node``'s current run back to checkpoint ``to`` of its agent's session (see
        :meth:`node_checkpoints`), as ``Agent.undo`` does (its compensations newest first,
        once each, ``by`` and ``skip`` as there), and leave the node to run again from there.

        ``dry_run=True`` returns the node agent's :class:`~interlude.UndoPlan` and changes
        nothing. Otherwise the result's ``stop_reason`` is ``"undone"``: the node is no longer
        finished nor waiting, and the orchestration holds a stopped run (``needs_recovery``):
        ``recover()`` carries the node on from the checkpoint (nothing before it is done again;
        the undone calls may run again), then the rest of the run. Or it is ``"interrupt"``:
        a compensation waits on a question, listed with the orchestration's questions;
        ``resume`` answers it and carries the undo and the node on.

        Refused (nothing run or changed): while it runs (AgentBusyError); an unknown node, a
        nested graph or swarm node, a node that has not run in this invocation or holds a
        stopped run, a checkpoint before the node's current run, a node whose output a node
        that ran after it took (named), a call without a compensation not in ``skip``
        (UndoError); UnknownCheckpointError from the agent. See ``_undo`` and docs/undo.md."""
        return await self._undo(to, node, by, skip, dry_run)

    async def _undo(
        self, to: str, node: str, by: str | None, skip: Sequence[str], dry_run: bool
    ) -> MultiAgentResult | UndoPlan:
        await self.load()
        if self._running:
            raise AgentBusyError(f"cannot undo a node while the {self.kind} runs")
        target = self._agent_node(node)
        await target.load()
        if self.record.status == "running" and self._session_id is not None:
            check_free(self._claim, self._session_id, self.kind)
        run = self._run_again(node, target)
        self._check_takers(node)
        self._check_in_run(to, node, target, run.base)
        agent, skipping = target.agent, list(skip)
        plan = await agent.undo_async(to, by=by, skip=skipping, dry_run=True)
        if dry_run:
            return plan
        who = "unknown" if by is None else check_by(by)
        await self._claimed(
            self._undone(node, run, plan, who),
            lambda: agent.undo_async(to, by=by, skip=skipping),
        )
        run = self.record.active[node]
        if agent.is_paused:  # a compensation waits on a question
            questions, inner = target.questions()
            run = run.but(questions=questions, inner=inner)
        active = {**self.record.active, node: run}
        paused = all(r.waiting for r in active.values())
        self.record = self.record.but(active=active, status="paused" if paused else "running")
        await self.save(release=True)  # a stopped run: any process may carry it on
        record = self.record
        return MultiAgentResult(
            stop_reason="interrupt" if paused else "undone",
            interrupts=record.questions if paused else [],
            nodes=dict(record.results),
            order=list(record.order),
        )

    async def _claimed(self, record: Record, go: Callable[[], Awaitable[AgentResult]]) -> None:
        """Save ``record`` as the run's claim, then ``go()`` while the claim is renewed (the
        record stays as saved if ``go`` fails: a stopped run that ``recover`` carries on)."""
        before, self.record = self.record, record
        self._running, self._lock = True, asyncio.Lock()
        renewer = Renewer(self.session_lease, self._renew)
        try:
            try:
                await self.save()
            except BaseException:
                self.record = before
                raise
            if self._store is not None:
                renewer.start()
            try:
                await go()
            except asyncio.CancelledError:
                if renewer.lost is not None:
                    raise renewer.lost from None
                raise
        finally:
            await renewer.stop()
            self._running, self._lock = False, None

    # --- the checks -----------------------------------------------------------------------

    def _agent_node(self, node: object) -> AgentNode:
        found = self.nodes.get(node) if isinstance(node, str) else None
        if found is None:
            raise UndoError(
                f"the {self.kind} has no node {node!r}; its nodes: {', '.join(self.nodes)}"
            )
        if not isinstance(found, AgentNode):
            raise UndoError(
                f"node {node!r} is a {found.inner.kind}: undo works on agent nodes (the nodes "
                "of a nested graph or swarm cannot be undone yet)"
            )
        return found

    def _run_again(self, name: str, target: AgentNode) -> NodeRun:
        """The node's run as it stands once undone: started, in its agent's run, waiting on
        nothing; UndoError if the node has no run this undo can take back."""
        record = self.record
        run = record.active.get(name)
        if run is not None:
            if run.phase == "before":
                raise UndoError(
                    f"node {name!r} has not started its run (it waits in its before-node "
                    "hooks): there is nothing of it to undo"
                )
            if not run.waiting:
                raise UndoError(
                    f"node {name!r} holds a run that stopped before it finished: recover() "
                    f"the {self.kind} first"
                )
            return run.but(
                phase="running",
                questions=(),
                inner={},
                answers={},
                result=None,
                given=None,
                by=None,
                expired=(),
                settle=False,
            )
        if name not in record.results:
            raise UndoError(
                f"node {name!r} has not run in this {self.kind}'s current invocation: "
                "there is nothing of it to undo"
            )
        base = record.began.get(name)
        if base is None:  # a record saved before ``began``: the run's prompt is the last one
            points = target.agent.checkpoints()
            base = max((p.message_index for p in points if p.kind == "prompt"), default=0)
        messages = target.agent.messages
        prompt = _task_of(messages[base]) if base < len(messages) else self.prompt(name, record)
        scope = f"{name}.{record.runs.get(name, 1)}"
        return NodeRun(prompt=prompt, phase="running", base=base, scope=scope)

    def _check_takers(self, name: str) -> None:
        """UndoError naming the nodes that took what ``name`` did and ran after it."""
        record = self.record
        if name in record.active:
            return  # its run has not finished: nothing took what it did
        order = record.order
        last = len(order) - 1 - order[::-1].index(name)
        since = {*order[last + 1 :], *record.active}
        taken = sorted(since & self._downstream(name))
        if taken:
            raise UndoError(
                f"cannot undo node {name!r}: {', '.join(taken)} ran after it on what it did "
                f"(downstream of it); undo works on a node nothing has used yet"
            )

    def _downstream(self, name: str) -> set[str]:
        """The nodes that take ``name``'s output, directly or further on."""
        seen: set[str] = set()
        todo = [name]
        while todo:
            for taker in self.takers(todo.pop()):
                if taker not in seen:
                    seen.add(taker)
                    todo.append(taker)
        seen.discard(name)
        return seen

    def takers(self, name: str) -> set[str]:
        """The nodes that take ``name``'s output directly: every other one (a swarm's
        members, any of which it may hand to); a graph's are its edges' targets."""
        return set(self.nodes) - {name}

    def _check_in_run(self, to: object, name: str, target: AgentNode, base: int) -> None:
        """UndoError if checkpoint ``to`` is before the node's current run (an unknown one is
        left to the agent's own UnknownCheckpointError)."""
        if not isinstance(to, str):
            return
        at = to.removeprefix("answer:")
        for point in target.agent.checkpoints():
            if point.id == at and point.message_index < base:
                raise UndoError(
                    f"checkpoint {to!r} of node {name!r} is before its run in this invocation "
                    f"(which begins at message m{base}): undo takes back that run only"
                )

    def _undone(self, name: str, run: NodeRun, plan: UndoPlan, who: str) -> Record:
        """The record once ``name`` is undone (before its agent's undo runs): the node started
        again, not finished, and the nodes its end made ready no longer ready."""
        record = self.record
        entry = AuditEntry(
            interrupt_id="",
            name=UNDO,
            answer={
                "node": name,
                "checkpoint": plan.to,
                "calls": [s.call_id for s in plan.steps],
                "skipped": [s.call_id for s in plan.skipped],
            },
            by=who,
            at=self.clock(),
            shown="",
        )
        audit = (*record.audit, freeze({**entry.to_dict(), "node": [name]}))
        changes: dict[str, object] = {}
        if name not in record.active:  # it had finished: it has not, now
            order = list(record.order)
            del order[len(order) - 1 - order[::-1].index(name)]
            takers = self.takers(name)
            changes = {
                "results": {n: r for n, r in record.results.items() if n != name},
                "began": {n: b for n, b in record.began.items() if n != name},
                "order": tuple(order),
                "ready": tuple(n for n in record.ready if n not in takers),
            }
        active = {**record.active, name: run}
        return record.but(status="running", active=active, audit=audit, **changes)


def _task_of(message: Message) -> Task:
    """The prompt a node's run was given, as its agent's conversation holds it."""
    blocks = tuple(message.content)
    if len(blocks) == 1 and isinstance(blocks[0], Text):
        return blocks[0].text
    return blocks  # a prompt's blocks: text and images
