"""The run loop graphs and swarms share: start ready nodes, collect outcomes, pause, resume.

A node's run is a task on the event loop, so nodes ready at the same time run concurrently.
Each outcome (finished, paused with questions, cancelled by a hook) replaces the record, and
the record is saved (with a session) before anything else starts, so a finished node is
recorded as it finishes: one save per step, holding the outcomes that came in and the nodes
they let start (a node starts once the save that records it landed). A node's own session is
read when it first runs, so a resume reads none of the nodes that do not run.

While a node waits on a person, no new node starts (unless a resume says ``partial=True``):
the nodes already running go to their end, then the orchestration pauses with every
question.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from types import MappingProxyType

from .._messages import Message, Text
from .._result import AgentResult
from ..errors import InterruptExpiredError
from ..hooks import HookRegistry
from ._events import (
    AfterNodeCallEvent,
    BeforeNodeCallEvent,
    GraphState,
    MultiAgentResult,
    NodeFinished,
    NodeStarted,
    expired_message,
    hook_answers,
    node_view,
)
from ._nodes import Emit, Node, marked
from ._record import NodeRun, Record, Task, task_text

__all__ = ["CANCELLED", "Cancelled", "Engine", "Finished", "Outcome", "Paused"]

CANCELLED = "the run was cancelled"


@dataclass(frozen=True, slots=True)
class Finished:
    result: AgentResult


@dataclass(frozen=True, slots=True)
class Paused:
    run: NodeRun


@dataclass(frozen=True, slots=True)
class Cancelled:
    message: str


Outcome = Finished | Paused | Cancelled


class Engine:
    """The loop over one orchestration's nodes. The orchestration supplies the record (and
    gets it back), how a node's prompt is made and what runs after a node finished."""

    def __init__(
        self, owner: EngineOwner, claim: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        self.owner = owner
        self._claim = claim
        """The run's first save (None: ``owner.save``)."""
        self.cancelling = False
        """Set by :meth:`cancel`: nothing new starts, running nodes are cancelled."""
        self._tasks: dict[asyncio.Task[Outcome], str] = {}
        self._calling: set[str] = set()

    def cancel(self) -> None:
        """Stop the run soon (call on the run's event loop): start nothing more; a node whose
        agent (or nested graph) runs is cancelled as ``Agent.cancel`` does (its conversation
        kept valid, its result ``"cancelled"``); a node in its node hooks stops there."""
        if self.cancelling:
            return
        self.cancelling = True
        for task, name in self._tasks.items():
            if name in self._calling:
                self.owner.nodes[name].cancel()
            elif not task.done():
                task.cancel()

    async def _call(self, name: str, call: Awaitable[AgentResult]) -> AgentResult:
        """Await a node's own run, marked as such (a cancel then cancels the node's agent)."""
        self._calling.add(name)
        try:
            return await call
        finally:
            self._calling.discard(name)

    async def drive(
        self,
        resumed: tuple[str, ...] = (),
        *,
        partial: bool = False,
        emit: Emit | None = None,
        recovering: tuple[str, ...] = (),
    ) -> MultiAgentResult:
        """Run until nothing can run: every node done, or the rest waiting on answers.

        ``resumed`` nodes carry on with the answers their runs hold (``NodeRun.given``, saved
        by the resume's claim); ``recovering`` nodes were started by a process that stopped.

        One save per step: the run's first save (its claim) holds the nodes it starts, and
        each later one the outcomes that came in and the nodes they let start; nothing starts
        before the save that records it. The last step's outcomes go in the final save (the
        pause, or the end)."""
        owner = self.owner
        tasks = self._tasks
        carried = (*recovering, *resumed)
        for name in carried:  # their sessions' errors are raised before anything changes
            await owner.nodes[name].load()
        starts, failure = await self._ready_runs(set(carried), partial)
        await self._commit()  # the run's claim: nothing ran before it
        try:
            for name in recovering:
                tasks[asyncio.ensure_future(self._recover(name, emit))] = name
            for name in resumed:
                run = owner.record.active[name]
                tasks[asyncio.ensure_future(self._step(name, run, emit))] = name
            self._spawn(starts, emit)
            while tasks:
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in sorted(done, key=lambda t: owner.position(tasks[t])):
                    failure = self._apply(tasks.pop(task), task, emit) or failure
                starts = []
                if failure is None:
                    starts, failure = await self._ready_runs(set(tasks.values()), partial)
                if tasks or starts:  # else the final save below records this step
                    await owner.save()
                    self._spawn(starts, emit)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        record = owner.record
        if record.questions:
            owner.record = record.but(status="paused")
        else:
            owner.record = record.but(status="idle", ready=(), active={})
        await owner.save()
        if failure is not None:
            raise failure
        result = owner.result()
        return replace(result, stop_reason="cancelled") if self.cancelling else result

    async def _commit(self) -> None:
        """The run's first save, its claim (given by the orchestration), once."""
        claim, self._claim = self._claim, None
        await (self.owner.save() if claim is None else claim())

    def _apply(self, name: str, task: asyncio.Task[Outcome], emit: Emit | None) -> Exception | None:
        """Put a finished task's outcome in the record; the error if the node (or an edge
        condition) raised."""
        owner = self.owner
        try:
            outcome = (
                Cancelled(CANCELLED) if task.cancelled() and self.cancelling else task.result()
            )
            owner.record = owner.applied(owner.record, name, outcome)  # a condition may raise
        except Exception as exc:
            owner.record = self._failed(owner.record, name)
            return exc
        if emit is not None and not isinstance(outcome, Paused):
            emit(NodeFinished(name, owner.record.results[name]))
        return None

    def _spawn(self, starts: list[tuple[str, NodeRun]], emit: Emit | None) -> None:
        for name, run in starts:
            self._tasks[asyncio.ensure_future(self._step(name, run, emit))] = name

    async def _ready_runs(
        self, busy: set[str], partial: bool
    ) -> tuple[list[tuple[str, NodeRun]], Exception | None]:
        """The ready nodes that can start now, put in the record as started (they start once
        it is saved), and the error that stopped the rest (a limit reached, a node's session
        unreadable): nothing more starts after one."""
        owner = self.owner
        record = owner.record
        if self.cancelling:
            owner.record = record.but(ready=())  # cancelled: nothing more starts
            return [], None
        if not partial and any(n not in busy and r.waiting for n, r in record.active.items()):
            return [], None
        later: list[str] = []
        starts: list[tuple[str, NodeRun]] = []
        failure: Exception | None = None
        for name in record.ready:
            if name in busy or name in record.active:
                later.append(name)  # it is still running or waiting: it runs again after
                continue
            try:
                owner.check_limit(name, record)
                node = owner.nodes[name]
                await node.load()  # its session, read once it runs
            except Exception as exc:
                failure = exc
                break
            number = record.runs.get(name, 0) + 1
            run = NodeRun(
                prompt=owner.prompt(name, record),
                base=node.message_count(),
                scope=f"{name}.{number}",
            )
            record = record.but(
                runs={**record.runs, name: number},
                active={**record.active, name: run},
            )
            starts.append((name, run))
            busy.add(name)
        if failure is not None:  # the rest stay ready (a new task clears them)
            started = {n for n, _ in starts}
            later = [n for n in record.ready if n not in started]
        owner.record = record.but(ready=tuple(later))
        return starts, failure

    async def _step(
        self, name: str, run: NodeRun, emit: Emit | None, result: AgentResult | None = None
    ) -> Outcome:
        """Carry a node's run on from where it stands (with the answers it was given), to its
        end or its next pause."""
        owner, node = self.owner, self.owner.nodes[name]
        answers, by, settle = run.given or {}, run.by, run.settle
        run = run.but(given=None, by=None, settle=False)
        if emit is not None:
            emit(NodeStarted(name))
        view = node_view(node)
        scope = run.scope or name  # records saved before per-run scopes: the node's name
        if result is None and run.phase == "before":
            given = {**run.answers, **answers}
            if owner.hooks.has_callbacks(BeforeNodeCallEvent):
                event = BeforeNodeCallEvent(
                    view,
                    name,
                    task_text(run.prompt),
                    owner.state(),
                    scope=scope,
                    is_replay=bool(run.questions),
                    answers=hook_answers(given, owner.clock, run.expired, run.questions),
                )
                try:
                    raised = await owner.hooks.invoke(event)
                except InterruptExpiredError as exc:  # fail closed: the node does not run
                    return Cancelled(expired_message(exc))
                if raised:
                    questions = tuple(marked(name, q) for q in raised)
                    return Paused(run.but(questions=questions, answers=given))
                if event.cancel_message is not None:
                    return Cancelled(event.cancel_message)
            if self.cancelling:
                return Cancelled(CANCELLED)
            if node.is_paused or node.needs_recovery:
                node.discard()  # left by a discard_pause whose process died before it
            result = await self._call(name, node.start(run.prompt, emit))
        elif result is None and run.phase == "running":
            own = {run.inner[i]: a for i, a in answers.items()}
            if own or not settle:
                result = await self._call(name, node.resume(own, by, emit))
            else:
                result = await self._call(name, node.resume_expired(emit))
        if result is not None:
            if result.stop_reason == "interrupt":
                questions, inner = node.questions()
                return Paused(
                    run.but(
                        phase="running", questions=questions, inner=inner, answers={}, expired=()
                    )
                )
            if result.stop_reason == "cancelled":
                return Cancelled(str(result) or CANCELLED)
            run, given = run.but(phase="after", questions=(), answers={}, expired=()), {}
        else:
            result, given = run.result, {**run.answers, **answers}
            assert result is not None, "a node paused after its run keeps its result"
        if owner.hooks.has_callbacks(AfterNodeCallEvent):
            event_after = AfterNodeCallEvent(
                view,
                name,
                task_text(run.prompt),
                owner.state(),
                result,
                scope=scope,
                is_replay=bool(run.questions),
                answers=hook_answers(given, owner.clock, run.expired, run.questions),
            )
            raised = await owner.hooks.invoke(event_after)
            if raised:
                questions = tuple(marked(name, q) for q in raised)
                return Paused(run.but(result=result, questions=questions, answers=given))
        return Finished(result)

    async def _recover(self, name: str, emit: Emit | None) -> Outcome:
        """Carry on a node that was running (or being resumed) when the process stopped, from
        its own session: its journal, its pause, or its finished reply; answers a resume was
        delivering are delivered if they never reached it; else the node starts again."""
        run = self.owner.record.active[name]
        node = self.owner.nodes[name]
        if run.phase == "after":  # it had finished: only its after-node hooks are left
            return await self._step(name, run, emit)
        if node.needs_recovery:
            result = await self._call(name, node.recover(emit))
        elif node.is_paused:
            pending = node.pending()
            ids = {q.id for q in pending}
            now = self.owner.clock()
            overdue = any(q.expires_at is not None and q.expires_at <= now for q in pending)
            if run.phase == "running" and (
                (run.given and {run.inner[i] for i in run.given} <= ids)
                or (run.settle and not run.given and overdue)
            ):
                return await self._step(name, run, emit)  # the answers never reached it
            result = AgentResult(stop_reason="interrupt", interrupts=node.pending())
        else:
            finished = node.finished_since(run.base, run.prompt)
            if finished is None:  # it saved nothing of this run: it starts again
                return await self._step(name, run.but(phase="before"), emit)
            result = finished
        return await self._step(name, run.but(phase="running", given=None), emit, result)

    def _failed(self, record: Record, name: str) -> Record:
        """The record after node ``name`` raised: it keeps its questions if it still waits on
        them (a resume it refused), else it is no longer started."""
        run = record.active.get(name)
        node = self.owner.nodes[name]
        if run is not None and run.questions and (run.phase != "running" or node.is_paused):
            kept = run.but(given=None, by=None)
            return record.but(active={**record.active, name: kept})
        return record.but(active={n: r for n, r in record.active.items() if n != name})


class EngineOwner:
    """What the engine needs of a graph or swarm (both derive from it)."""

    record: Record
    nodes: dict[str, Node]
    hooks: HookRegistry
    clock: Callable[[], float] = staticmethod(time.time)
    """The time the run goes by (deadlines, answers' times): ``time.time`` unless set (under
    Temporal, workflow time)."""

    async def save(self, *, release: bool = False) -> None:
        raise NotImplementedError

    def position(self, name: str) -> int:
        """The node's place in the definition order (outcomes are applied in this order)."""
        return list(self.nodes).index(name)

    def check_limit(self, name: str, record: Record) -> None:
        """Raise a LimitError if ``name`` may not run once more."""

    def prompt(self, name: str, record: Record) -> Task:
        raise NotImplementedError

    def after_finish(self, name: str, run: NodeRun, record: Record) -> Record:
        """The record once ``name`` finished: with the nodes that run next added to ``ready``."""
        raise NotImplementedError

    def state(self, record: Record | None = None) -> GraphState:
        """What conditions and node hooks see: ``record`` (default: the current one)."""
        record = self.record if record is None else record
        return GraphState(
            task=task_text(record.task),
            results=MappingProxyType(dict(record.results)),
            runs=MappingProxyType(dict(record.runs)),
            order=record.order,
        )

    def applied(self, record: Record, name: str, outcome: Outcome) -> Record:
        """The record with one node's outcome in it."""
        if isinstance(outcome, Paused):
            return record.but(active={**record.active, name: outcome.run})
        run = record.active[name]
        active = {n: r for n, r in record.active.items() if n != name}
        began = {**record.began, name: run.base}  # where its run begins (for a node undo)
        if isinstance(outcome, Cancelled):
            text = Message("assistant", [Text(outcome.message)])
            result = AgentResult(stop_reason="cancelled", message=text)
            return record.but(
                active=active,
                results={**record.results, name: result},
                order=(*record.order, name),
                began=began,
            )
        done = record.but(
            active=active,
            results={**record.results, name: outcome.result},
            order=(*record.order, name),
            began=began,
        )
        return self.after_finish(name, run, done)

    def result(self) -> MultiAgentResult:
        record = self.record
        paused = record.status == "paused"
        return MultiAgentResult(
            stop_reason="interrupt" if paused else "end_turn",
            interrupts=record.questions,
            nodes=dict(record.results),
            order=list(record.order),
        )
