"""What a graph or swarm has as an agent has: ``resume_expired`` and ``cancel``.

``resume_expired`` settles the waiting questions whose deadline has passed (see
``_answers.plan_expiry``) and carries on as a resume does (the settlements saved with the
run's claim, so a recovery delivers them if the process dies). ``cancel`` asks the run's
:class:`~._engine.Engine` to stop, on the run's event loop, from any thread or task.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar

from .._sync import run_sync
from ..errors import AgentBusyError, NotPausedError
from ._answers import plan_expiry
from ._claim import check_free

if TYPE_CHECKING:
    from ._engine import Engine
    from ._events import MultiAgentResult
    from ._nodes import Node
    from ._record import Record

__all__ = ["Controls"]


class Controls:
    """``resume_expired`` and ``cancel`` for :class:`~._base.Orchestration`."""

    if TYPE_CHECKING:
        kind: ClassVar[str]
        record: Record
        _running: bool
        _cancel_lock: threading.Lock
        _engine_now: Engine | None
        _loop: asyncio.AbstractEventLoop | None

        nodes: dict[str, Node]
        _session_id: str | None
        _claim: object

        async def load(self) -> None: ...

        async def save(self) -> None: ...

        def _load_sync(self) -> None: ...

        async def _engine(
            self, record: Record, go: Callable[[Engine], Awaitable[MultiAgentResult]]
        ) -> MultiAgentResult: ...

    def resume_expired(self) -> MultiAgentResult:
        """Settle the questions whose deadline has passed and carry on, from sync code."""
        return run_sync(self.resume_expired_async())

    async def resume_expired_async(self) -> MultiAgentResult:
        """Settle every waiting question whose deadline has passed, as ``Agent.resume_expired``
        does, and carry on: a node-hook question is answered by its default, or declines (a
        before-node hook that lets InterruptExpiredError out cancels its node: fail closed); a
        node's own questions are settled by that node's agent (or nested graph). The others
        stay pending. Each settlement joins the audit trail ``by == "expiry"``.
        ResumeInputError if none has expired (nothing changes then); NotPausedError if not
        paused."""
        return await self.run_expired(None)

    async def run_expired(self, emit: Any) -> MultiAgentResult:
        """``resume_expired_async()``, each event passed to ``emit``; for an outer graph."""
        await self.load()
        if self._running:
            raise AgentBusyError(f"this {self.kind} is running")
        runs, entries = plan_expiry(self)  # type: ignore[arg-type]
        record = self.record
        record = record.but(
            status="running",
            active={**record.active, **runs},
            audit=(*record.audit, *entries),
        )
        return await self._engine(record, lambda engine: engine.drive(tuple(runs), emit=emit))

    def cancel(self) -> None:
        """Stop the current run soon; safe from any thread or task. Nothing new starts; each
        running node is cancelled (its agent as ``Agent.cancel`` does, a nested graph as
        this); the run returns ``stop_reason == "cancelled"`` with the cancelled nodes'
        results ``"cancelled"``. Nodes waiting on a person keep waiting: with any, it stays
        paused on them, else it takes a new task. No run: nothing happens."""
        with self._cancel_lock:
            engine, loop = self._engine_now, self._loop
        if engine is not None and loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(engine.cancel)

    def discard_pause(self) -> None:
        """Drop the pause (or a stopped run) so it takes a new task, as
        ``Agent.discard_pause`` does for an agent. Every node that was started and not finished
        is dropped with it: its agent's pause (or stopped run) is discarded (its pending tool
        calls get a "cancelled" result), a nested graph's or swarm's likewise; the questions
        are gone from the store's pending index. Finished nodes' results are kept until the
        next task. The graph's record is saved first; a node left paused by a process that
        died before its discard is discarded when the node next starts."""
        if self._running:
            raise AgentBusyError(f"cannot discard the pause while the {self.kind} runs")
        self._load_sync()
        record = self.record
        if record.status == "idle":
            raise NotPausedError(f"the {self.kind} is not paused; there is nothing to discard")
        if record.status == "running" and self._session_id is not None:
            check_free(self._claim, self._session_id, self.kind)
        self.record = record.but(status="idle", ready=(), active={})
        try:
            run_sync(self.save())
        except BaseException:
            self.record = record
            raise
        for name in record.active:
            self.nodes[name].discard()
