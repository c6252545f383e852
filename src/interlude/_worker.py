"""Workers: processes that carry sessions on once people have answered.

A worker asks the store which sessions have something to do (answers recorded by an
:class:`~interlude.sessions.Inbox`, questions whose deadline passed, runs whose process died),
builds each one's agent through the operator's :class:`~interlude.App`, and applies it:
``resume`` with the recorded answers (as the person who gave them, checked against what they
were shown), ``resume_expired``, or ``recover``. Many workers may share one store: a session's
run claim lets exactly one of them run it; the others skip it. Recorded answers are cleared
once applied; answers whose question is gone (applied by a worker that died, or settled) are
dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

    from ._agent import Agent
    from ._app import App
    from .sessions import InboxStore, RecordedAnswer

__all__ = ["Worker"]


def _log() -> Any:
    import logging

    return logging.getLogger("interlude.worker")


class Worker:
    """Carries on the sessions of ``store`` whose agents ``app`` builds.

    ``run_once()`` handles what is there now (up to ``concurrency`` sessions at a time) and
    returns how many sessions it carried on; ``run(stop)`` polls every ``poll`` seconds until
    ``stop`` is set. ``handled`` counts the
    sessions carried on, ``failed`` maps a session to its last error.
    """

    def __init__(
        self,
        app: App,
        store: InboxStore | str,
        *,
        poll: float = 0.5,
        batch: int = 100,
        concurrency: int = 4,
        clock: Callable[[], float] | None = None,
    ) -> None:
        from .sessions import AnswerQueue, open_store

        if not isinstance(store, str) and not isinstance(store, AnswerQueue):
            from .errors import ConfigurationError

            raise ConfigurationError(
                f"a Worker takes answers from the store's queue, and {type(store).__name__} has "
                "none (record_answers, recorded_answers, clear_answers, sessions_to_resume)"
            )
        self.app = app
        self.store: InboxStore = open_store(store) if isinstance(store, str) else store
        self.poll = poll
        self.batch = batch
        self.concurrency = max(1, concurrency)
        self.clock: Callable[[], float] = clock or time.time
        self.handled = 0
        self.conflicts = 0
        """Sessions another process was running when this worker came to them (skipped)."""
        self.failed: dict[str, str] = {}
        self._backoff: dict[str, float] = {}
        self._wake: asyncio.Event | None = None

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Work until ``stop`` is set (forever without one)."""
        import asyncio

        stop = stop or asyncio.Event()
        wake = self._wake = asyncio.Event()
        while not stop.is_set():
            wake.clear()
            done = await self.run_once()
            if done:
                continue  # there may be more right away
            waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(wake.wait())]
            await asyncio.wait(waits, timeout=self.poll, return_when=asyncio.FIRST_COMPLETED)
            for w in waits:
                w.cancel()

    def wake(self) -> None:
        """Look for work now rather than at the next poll (e.g. right after recording an
        answer in the same process). Call it from the worker's event loop."""
        if self._wake is not None:
            self._wake.set()

    async def run_once(self) -> int:
        """Carry on every session that has something to do now; return how many."""
        now = self.clock()
        ids = await self.store.sessions_to_resume(now, limit=self.batch)
        ids = [i for i in ids if self._backoff.get(i, 0.0) <= now]
        import random

        random.shuffle(ids)  # workers sharing a store start on different sessions
        import asyncio

        gate = asyncio.Semaphore(self.concurrency)

        async def one(session_id: str) -> bool:
            async with gate:
                return await self._carry_on(session_id)

        done = sum(await asyncio.gather(*(one(i) for i in ids)))
        self.handled += done
        return done

    async def _carry_on(self, session_id: str) -> bool:
        from .errors import InterludeError, SessionConflictError

        try:
            agent = await self.app.open_async(session_id, self.store)
            worked = await self._apply(session_id, agent)
        except SessionConflictError:
            self.conflicts += 1
            return False  # another worker (or process) runs it: theirs
        except InterludeError as exc:
            self._failed(session_id, exc)
            return False
        except Exception as exc:  # a tool or hook raised out of the run: the run ended
            self._failed(session_id, exc)
            return True
        self.failed.pop(session_id, None)
        self._backoff.pop(session_id, None)
        return worked

    async def _apply(self, session_id: str, agent: Agent) -> bool:
        worked = False
        if agent.needs_recovery:
            await agent.recover_async()
            worked = True
        recorded = await self.store.recorded_answers(session_id)
        if recorded:
            from .errors import SessionConflictError

            last = max(r.seq for r in recorded)
            try:
                worked = await self._answer(agent, recorded) or worked
            except SessionConflictError:
                raise  # another process runs the session: the answers are not ours to drop
            except BaseException:
                await self.store.clear_answers(session_id, last)  # the run used them
                raise
            # Applied (the run's journal holds them now), or about questions that are gone.
            await self.store.clear_answers(session_id, last)
        now = self.clock()
        if agent.is_paused and any(
            i.expires_at is not None and i.expires_at <= now for i in agent.interrupts
        ):
            await agent.resume_expired_async()
            worked = True
        return worked

    async def _answer(self, agent: Agent, recorded: list[RecordedAnswer]) -> bool:
        """Resume with the recorded answers, one resume per person who answered (in the
        order they answered); answers whose question is no longer pending are dropped."""
        from .errors import ResumeError

        worked = False
        left = list(recorded)
        while left and agent.is_paused:
            pending = {i.id for i in agent.interrupts}
            usable = [r for r in left if r.interrupt_id in pending]
            for r in left:
                if r.interrupt_id not in pending:
                    _log().info("dropped an answer to %s: not pending", r.interrupt_id)
            if not usable:
                break
            by = usable[0].by
            group = [r for r in usable if r.by == by]
            left = [r for r in usable if r.by != by]
            answers = {r.interrupt_id: r.answer for r in group}
            shown = {r.interrupt_id: r.shown for r in group if r.shown is not None}
            try:
                await agent.resume_async(answers, by=by, shown=shown or None)
            except ResumeError as exc:  # e.g. expired meanwhile, or not what was shown
                _log().warning("answers by %r refused: %s", by, exc)
                continue
            worked = True
        return worked

    def _failed(self, session_id: str, exc: BaseException) -> None:
        self.failed[session_id] = f"{type(exc).__name__}: {exc}"
        self._backoff[session_id] = self.clock() + max(self.poll * 10, 5.0)
        _log().warning("session %r: %s: %s", session_id, type(exc).__name__, exc)
