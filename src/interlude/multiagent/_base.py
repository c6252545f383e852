"""What graphs and swarms share: called like an agent, paused and resumed like one, durable.

The orchestration's record is saved as a session of its own in the store it is given (its
JSON under the state key ``interlude.orchestration``, no messages, and its pending questions
in the store's pending index under its session id); each node's agent has its own session in
the same store (see ``_nodes``). Without a session, ``export_state()`` holds the record and
every node agent's exported state.
"""

from __future__ import annotations

import asyncio
import contextlib
import operator
import threading
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from .._frozen import thaw
from .._messages import ContentBlock, JsonValue
from .._sync import run_sync
from ..errors import (
    AgentBusyError,
    AgentPausedError,
    ConfigurationError,
    NotPausedError,
    ResumeInputError,
    StateFormatError,
)
from ..hooks import HookProvider, HookRegistry
from ..sessions import SessionUpdate, check_session_id, open_store
from ._answers import plan_resume
from ._claim import Renewer, check_free, new_claim
from ._control import Controls
from ._engine import Engine
from ._events import MultiAgentFinished, MultiAgentResult, MultiAgentStreamEvent
from ._record import VERSION, Record, Task, record_from_json, record_to_json
from ._undo import NodeUndo

TaskInput = str | Sequence[ContentBlock] | Sequence[Mapping[str, Any]]
"""A task (text, or content blocks: text and images), or the list form of answers."""

if TYPE_CHECKING:
    from .._interrupt import Interrupt
    from .._tools import AgentTool
    from ..policy import Policy
    from ..sessions import SessionStore
    from ._nodes import Node

__all__ = ["STATE_KEY", "Orchestration"]

STATE_KEY = "interlude.orchestration"


class Orchestration(Controls, NodeUndo):
    """Base of :class:`Graph` and :class:`Swarm` (their node undo: ``_undo``)."""

    kind: ClassVar[str]

    def _setup(
        self,
        name: str | None,
        hooks: Iterable[HookProvider],
        session: SessionStore | str | None,
        session_id: str | None,
        session_lease: float = 30.0,
    ) -> None:
        if (
            not isinstance(session_lease, int | float)
            or isinstance(session_lease, bool)
            or not session_lease > 0
        ):
            raise ConfigurationError(f"session_lease must be > 0 seconds, got {session_lease!r}")
        self.session_lease = float(session_lease)
        self.list_pending = True
        """False for a graph or swarm nested in another: its questions are listed once, by
        the outermost one, under its ids."""
        if (session is None) != (session_id is None):
            raise ConfigurationError("give both session= and session_id=, or neither")
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ConfigurationError(f"name must be non-empty text, got {name!r}")
        self.name = name
        self.hooks = HookRegistry()
        for provider in hooks:
            self.hooks.add_hook(provider)
        self._store: SessionStore | None = (
            open_store(session) if isinstance(session, str) else session
        )
        self._session_id = None if session_id is None else check_session_id(session_id)
        self.record = Record()
        self._version = 0
        self._claim: object = None  # the stored claim, as last seen
        self._audit_saved = 0  # audit entries already in the store's trail
        self._listed: tuple[Interrupt, ...] = ()  # the questions in the store's pending index
        self._loaded = self._store is None
        self._running = False
        self._lock: asyncio.Lock | None = None
        self._cancel_lock = threading.Lock()
        self._engine_now = None  # the run's engine, for cancel()
        self._loop = None
        self._policies: tuple[Policy | None, Policy | None] | None = None  # (see govern)

    def govern(self, policy: Policy | None, shadow: Policy | None = None) -> None:
        """Put every node's agent (those of nested graphs and swarms too) under ``policy``
        (and ``shadow``) where the agent has none of its own (see ``interlude.policy``);
        copies of this graph or swarm keep them. ``App(policy=...)`` does this for the graphs
        its factories build."""
        self._policies = (policy, shadow)
        for node in self.nodes.values():
            node.govern(policy, shadow)

    def _node_session(self) -> tuple[SessionStore | None, str | None]:
        return self._store, self._session_id

    # --- where it stands ------------------------------------------------------------------

    @property
    def session_id(self) -> str | None:
        return self._session_id

    @property
    def is_paused(self) -> bool:
        """Whether it waits on answers (``resume``)."""
        self._load_sync()
        return self.record.status == "paused"

    @property
    def is_running(self) -> bool:
        """Whether a run (or a resume) is going on in this process now."""
        return self._running

    def check_resume(
        self,
        answers: Mapping[str, JsonValue],
        *,
        by: str | None = None,
        shown: Mapping[str, str] | None = None,
    ) -> None:
        """Raise the error :meth:`resume_async` would raise for these answers before changing
        anything (NotPausedError, UnknownInterruptError, AnswerValidationError, ...); change
        nothing. For a check made elsewhere than the resume (a Temporal Update's validator)."""
        self._load_sync()
        if self._running:
            raise AgentBusyError(f"this {self.kind} is running")
        plan_resume(self, answers, by, shown)

    @property
    def needs_recovery(self) -> bool:
        """Whether it holds a run whose process stopped before it finished (``recover``)."""
        self._load_sync()
        return self.record.status == "running" and not self._running

    @property
    def interrupts(self) -> list[Interrupt]:
        """Every question waiting, node by node (empty when not paused)."""
        self._load_sync()
        return self.record.questions if self.record.status == "paused" else []

    # --- runs -----------------------------------------------------------------------------

    def __call__(self, task: TaskInput) -> MultiAgentResult:
        """Run on ``task`` (or resume, given the list form of answers) from sync code."""
        return run_sync(self.invoke_async(task))

    async def invoke_async(self, task: TaskInput) -> MultiAgentResult:
        """Run to the end, or to a pause (``stop_reason == "interrupt"``)."""
        return await self._run(task, None)

    async def stream_async(self, task: TaskInput) -> AsyncIterator[MultiAgentStreamEvent]:
        """Run, yielding each node's events tagged with the node; the last event is
        :class:`MultiAgentFinished`."""
        async for event in self._streamed(lambda emit: self._run(task, emit)):
            yield event

    async def run_task(self, task: Task, emit: Any) -> MultiAgentResult:
        """Run on ``task``, each event passed to ``emit`` (None: none); for an outer graph."""
        return await self._run(task, emit)

    async def run_resume(
        self, answers: Mapping[str, JsonValue], by: str | None, emit: Any
    ) -> MultiAgentResult:
        """``resume_async(answers, by=by)``, each event passed to ``emit``; for an outer graph."""
        await self.load()
        return await self._resume(answers, by, False, emit)

    async def _streamed(self, go: Any) -> AsyncIterator[MultiAgentStreamEvent]:
        """Run ``go(emit)``, yielding what it emits, then :class:`MultiAgentFinished`."""
        queue: asyncio.Queue[MultiAgentStreamEvent | None] = asyncio.Queue()
        task_ = asyncio.ensure_future(go(queue.put_nowait))
        task_.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
            yield MultiAgentFinished(task_.result())
        finally:
            if not task_.done():
                task_.cancel()
                await asyncio.gather(task_, return_exceptions=True)

    async def _run(self, task: object, emit: Any) -> MultiAgentResult:
        await self.load()
        if not isinstance(task, str) and not _is_content(task):
            return await self._resume(_listed_answers(task), None, False, emit)
        self._check_idle()
        if isinstance(task, str) and not task.strip():
            raise ConfigurationError("the task must be non-empty text")
        if not isinstance(task, str):
            task = tuple(task)  # type: ignore[arg-type]  # content blocks (_is_content)
        record = self.record.but(
            task=task,
            status="running",
            runs={},
            results={},
            began={},
            order=(),
            ready=self.entry_nodes(),
            active={},
            handoffs=0,
            handed=None,
        )
        return await self._engine(record, lambda engine: engine.drive(emit=emit))

    def resume(
        self,
        answers: Mapping[str, JsonValue],
        *,
        by: str | None = None,
        partial: bool = False,
        shown: Mapping[str, str] | None = None,
    ) -> MultiAgentResult:
        """Answer pending questions and carry on, from sync code."""
        return run_sync(self.resume_async(answers, by=by, partial=partial, shown=shown))

    async def resume_async(
        self,
        answers: Mapping[str, JsonValue],
        *,
        by: str | None = None,
        partial: bool = False,
        shown: Mapping[str, str] | None = None,
    ) -> MultiAgentResult:
        """Answer pending questions (``{id: answer}``; some of them, as with ``Agent.resume``)
        and carry on. Each node with answers carries on; the others keep waiting. Without
        ``partial``, no new node starts while any question is still open: the answered nodes
        go to their end (or their next question) and the run pauses again. With
        ``partial=True`` the nodes after them run too while the others wait.

        Every answer is checked first, as ``Agent.resume`` checks (see ``_answers``): unknown
        ids, JSON, response types, deadlines, ``shown=`` digests, ``by=``; a bad answer for
        any node changes nothing. Each answer joins the audit trail (:attr:`audit`) as given
        ``by``, naming the node it went to; the answers reach the node agents' own trails too.
        SessionConflictError (nothing run) if another live process runs this session."""
        await self.load()
        return await self._resume(answers, by, partial, None, shown)

    async def _resume(
        self,
        answers: object,
        by: str | None,
        partial: bool,
        emit: Any,
        shown: Mapping[str, str] | None = None,
    ) -> MultiAgentResult:
        if self._running:
            raise AgentBusyError(f"this {self.kind} is running")
        if self.record.status == "running" and self._session_id is not None:
            check_free(self._claim, self._session_id, self.kind)
        per_node, entries = plan_resume(self, answers, by, shown)
        record = self.record
        active = dict(record.active)
        for name, given in per_node.items():
            active[name] = active[name].but(given=given, by=by)
        record = record.but(status="running", active=active, audit=(*record.audit, *entries))
        return await self._engine(
            record, lambda engine: engine.drive(tuple(per_node), partial=partial, emit=emit)
        )

    def recover(self) -> MultiAgentResult:
        """Carry on a run whose process stopped, from sync code."""
        return run_sync(self.recover_async())

    async def recover_async(self) -> MultiAgentResult:
        """Carry on a run whose process stopped (see :attr:`needs_recovery`): finished nodes
        are kept, each node that was running carries on from its own session (its journal,
        its pause or its reply; answers a resume was delivering are delivered), and the rest
        runs as it would have. SessionConflictError if another live process runs it."""
        await self.load()
        if self.record.status != "running" or self._running:
            raise NotPausedError(f"the {self.kind} holds no stopped run to recover")
        if self._session_id is not None:
            check_free(self._claim, self._session_id, self.kind)
        started = tuple(n for n, run in self.record.active.items() if not run.waiting)
        return await self._engine(self.record, lambda engine: engine.drive(recovering=started))

    async def _engine(self, record: Record, go: Any) -> MultiAgentResult:
        """Run ``go(engine)`` on ``record``. The engine's first save is the run's claim: until
        it landed nothing ran, and if it fails (another process's claim landed first), or
        anything before it does, the record is as it was."""
        self._running = True
        self._lock = asyncio.Lock()
        before, self.record = self.record, record
        renewer = Renewer(self.session_lease, self._renew)
        claimed = False

        async def claim() -> None:
            nonlocal claimed
            await self.save()
            claimed = True
            if self._store is not None:
                renewer.start()

        engine = Engine(self, claim)
        with self._cancel_lock:
            self._engine_now, self._loop = engine, asyncio.get_running_loop()
        try:
            try:
                result: MultiAgentResult = await go(engine)
            except asyncio.CancelledError:
                if renewer.lost is not None:
                    raise renewer.lost from None
                raise
            finally:
                if not claimed:
                    self.record = before
            return result
        finally:
            await renewer.stop()
            with self._cancel_lock:
                self._engine_now, self._loop = None, None
            self._running = False
            self._lock = None

    async def _renew(self) -> None:
        if self.record.status == "running":
            await self.save()

    def _check_idle(self) -> None:
        if self._running:
            raise AgentBusyError(f"this {self.kind} is running")
        if self.record.status == "paused":
            raise AgentPausedError(f"the {self.kind} is paused: answer its questions (resume)")
        if self.record.status == "running":
            raise AgentPausedError(f"the {self.kind} holds a stopped run: recover() it")

    # --- sessions, export and import --------------------------------------------------------

    async def load(self) -> None:
        """Load the record from the session (done at first use); a node's own session is
        read when the node runs, or when it is looked at."""
        if self._loaded:
            return
        assert self._store is not None and self._session_id is not None
        stored = await self._store.load(self._session_id)
        if stored is not None:
            data = stored.state.get(STATE_KEY)
            if data is None:
                raise StateFormatError(
                    f"session {self._session_id!r} is not a {self.kind}'s (no {STATE_KEY!r})"
                )
            self.record = record_from_json(data, self.kind, self.nodes)
            self._version = stored.version
            self._claim = stored.claim
            self._audit_saved = len(self.record.audit)
            self._listed = tuple(self.record.questions) if self.list_pending else ()
        self._loaded = True  # a node's own session is read when the node runs

    def _load_sync(self) -> None:
        if not self._loaded:
            run_sync(self.load())

    async def save(self, *, release: bool = False) -> None:
        """Save the record (with a session): one compare-and-swap on the session's version.
        While the record says ``running`` the save holds (and renews) the run's claim; a
        paused or finished record lets it go, and so does ``release=True`` (a stopped run any
        process may carry on: where a node undo leaves it). New audit entries join the
        session's trail."""
        if self._store is None or self._session_id is None:
            return
        lock = self._lock
        async with lock if lock is not None else contextlib.nullcontext():
            record = self.record
            holds = record.status == "running" and not release
            claim = new_claim(self._claim, self.session_lease) if holds else None
            listed = tuple(record.questions) if self.list_pending else ()
            same = len(listed) == len(self._listed) and all(map(operator.is_, listed, self._listed))
            update = SessionUpdate(
                expected_version=self._version,
                first_index=0,
                new_messages=[],
                pause=None,
                pending=None if same else [q.to_dict() for q in listed],  # None: as it is
                tools=[],
                format_version=VERSION,
                state={STATE_KEY: record_to_json(record, self.kind)},
                agent=self.name,
                claim=claim,
                audit=[thaw(e) for e in record.audit[self._audit_saved :]],
            )
            self._version = await self._store.save(self._session_id, update)
            self._claim, self._audit_saved, self._listed = claim, len(record.audit), listed

    @property
    def audit(self) -> list[dict[str, JsonValue]]:
        """The answers given to this graph's (or swarm's) ``resume``, oldest first: each an
        ``AuditEntry``'s fields (``interrupt_id`` is the orchestration's id) with ``node``, the
        path of nodes the answer went down (outermost first); and its node undos (``name``
        ``"undo"``, no ``interrupt_id``; see :meth:`undo_async`). With a session, the same entries
        are in the store's audit trail under the orchestration's session id."""
        self._load_sync()
        return [thaw(e) for e in self.record.audit]

    def export_state(self) -> dict[str, JsonValue]:
        """The record and every node agent's state, as versioned JSON data."""
        from ._export import export_state

        return export_state(self)

    def import_state(self, data: Mapping[str, JsonValue]) -> None:
        """Load ``data`` from :meth:`export_state` into this one (built the same way).
        StateFormatError / StateMismatchError if it does not fit; nothing changes then."""
        from ._export import import_state

        import_state(self, data)

    # --- as a tool --------------------------------------------------------------------------

    def as_tool(self, name: str | None = None, description: str | None = None) -> AgentTool:
        """This orchestration as a tool of an agent: it takes ``{"prompt": text}`` and returns
        the text of a fresh copy run on it; the copy's questions pause the calling agent."""
        from ._tool import OrchestrationTool

        return OrchestrationTool(self, name, description)

    def copy(self) -> Orchestration:
        """A new one built the same way, with no session and nothing run."""
        return self.copy_on(None, None)

    def copy_on(self, session: SessionStore | None, session_id: str | None) -> Orchestration:
        """A new one built the same way (its node hooks copied), on ``session`` (or none)."""
        raise NotImplementedError

    # --- for subclasses ---------------------------------------------------------------------

    nodes: dict[str, Node]

    def entry_nodes(self) -> tuple[str, ...]:
        raise NotImplementedError


def _is_content(task: object) -> bool:
    """Whether ``task`` is a multimodal task: a non-empty list of content blocks (text and
    images, as an agent's prompt)."""
    from .._messages import Image, Text

    return (
        isinstance(task, Sequence)
        and not isinstance(task, str | bytes)
        and bool(task)
        and all(isinstance(b, Text | Image) for b in task)
    )


def _listed_answers(items: object) -> dict[str, JsonValue]:
    """``[{"interruptResponse": {"interruptId": id, "response": answer}}, ...]`` as a map."""
    out: dict[str, JsonValue] = {}
    if isinstance(items, Sequence) and not isinstance(items, str | bytes):
        for item in items:
            inner = item.get("interruptResponse") if isinstance(item, Mapping) else None
            if not isinstance(inner, Mapping) or not isinstance(inner.get("interruptId"), str):
                break
            out[inner["interruptId"]] = inner.get("response")
        else:
            if out:
                return out
    raise ResumeInputError(
        "expected a task (text) or a list of {'interruptResponse': {'interruptId': id, "
        "'response': answer}}"
    )
