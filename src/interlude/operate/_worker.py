"""Workers: processes that carry sessions on once people have answered.

A worker asks the store which sessions have something to do (answers recorded by an
:class:`~interlude.Inbox`, questions whose deadline passed, runs whose process died),
builds each one's agent through the operator's :class:`~interlude.App`, and applies it:
``resume`` with the recorded answers (as the person who gave them, checked against what they
were shown), ``resume_expired``, or ``recover``. A graph's or swarm's session is carried on
the same way (``recover``, ``resume`` and ``resume_expired`` of the graph), and a node agent's
session
(``<graph session id>:node:<node>``, listed when the run claim of a process killed inside the
node lapsed) is never carried on by itself: the worker recovers its graph instead.

Many workers may share one store: a session's run claim lets exactly one of them run it; the others
skip it. A store with ``reserves_work`` also reserves the sessions it lists for the worker that
asked (``sessions_to_resume(..., reserve_for=worker.id, lease=...)``), so workers sharing it take
different sessions instead of racing for the oldest ones (see :attr:`Worker.reservation_lease`). A
recorded answer is removed by the save that applies it (the resume's first commit), never before: a
resume that fails leaves it recorded for the next try. Answers whose question is gone (settled, or
refused) are dropped.

A reservation ends when the session's run claims it (its first save), so it only spans the
wait between listing and starting. A resume that failed before that leaves it to lapse: the
session is tried again by the same worker after a back-off (``max(10 * poll, 5)`` seconds),
and other workers pass it by meanwhile (if this worker stops, they take it once it lapses).

A worker outlives its store's outages: a failing pass is retried with capped exponential backoff
and jitter, each failure is logged once (and the recovery once), and only a
ConfigurationError ends :meth:`Worker.run`. :attr:`Worker.health` says how it fares.

The worker of an App with ``notify=`` also runs its :class:`~interlude.notify.Notifier` on
each pass: the notifications due are added to the store's outbox and delivered.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

    from ..notify import Notifier
    from ..sessions import InboxStore
    from ._app import App

__all__ = ["Worker", "WorkerHealth"]


def _log() -> Any:
    import logging

    return logging.getLogger("interlude.worker")


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerHealth:
    """How a worker fares: ``ok`` unless its last pass over the store failed (then
    ``failing_since``, ``failures`` in a row and ``last_error`` say how); ``last_pass`` is when
    a pass last went through (None: none yet)."""

    ok: bool
    last_pass: float | None = None
    failing_since: float | None = None
    failures: int = 0
    last_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "last_pass": self.last_pass,
            "failing_since": self.failing_since,
            "failures": self.failures,
            "last_error": self.last_error,
        }


class Worker:
    """Carries on the sessions of ``store`` whose agents ``app`` builds.

    ``run_once()`` handles what is there now (up to ``concurrency`` sessions at a time) and
    returns how many sessions it carried on; ``run(stop)`` polls every ``poll`` seconds until
    ``stop`` is set, and waits out store errors (from ``poll`` seconds, doubling, up to
    ``max_backoff``, with jitter). ``handled`` counts the sessions carried on, ``failed`` maps
    a session to its last error, ``health`` says whether the store answers.
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
        max_backoff: float = 10.0,
        worker_id: str | None = None,
    ) -> None:
        from ..sessions import AnswerQueue, open_store

        if not isinstance(store, str) and not isinstance(store, AnswerQueue):
            from ..errors import ConfigurationError

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
        self.max_backoff = max(max_backoff, poll)
        self.handled = 0
        self.conflicts = 0
        """Sessions another process was running when this worker came to them (skipped)."""
        self.failed: dict[str, str] = {}
        self.health = WorkerHealth(ok=True)
        self.notifier: Notifier | None = None
        """The :class:`~interlude.notify.Notifier` of ``app.notifications`` (None: none)."""
        notifications = getattr(app, "notifications", None)
        if notifications is not None and notifications.targets:
            from ..notify import Notifier

            self.notifier = Notifier(self.store, notifications, clock=self.clock)
        self.id = worker_id or _new_id()
        """Whose reservations this worker's are (host, process and a random part, unless
        given): unique among the workers sharing a store."""
        self.reserves = bool(getattr(self.store, "reserves_work", False))
        """Whether the store reserves the sessions it lists for this worker (else the worker
        shuffles them, so workers sharing a store start on different ones)."""
        self._per_session: float | None = None  # seconds a session takes (a moving average)
        self._backoff: dict[str, float] = {}
        self._wake: asyncio.Event | None = None

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Work until ``stop`` is set (forever without one). A pass that fails (the store is
        down) is retried after a backoff; a ConfigurationError ends the run."""
        import asyncio

        stop = stop or asyncio.Event()
        wake = self._wake = asyncio.Event()
        while not stop.is_set():
            wake.clear()
            try:
                done = await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._pass_failed(exc)
                await _wait(stop, None, _backoff(self.poll, self.max_backoff, self.health))
                continue
            self._pass_done()
            if done:
                continue  # there may be more right away
            await _wait(stop, wake, self.poll)

    def wake(self) -> None:
        """Look for work now rather than at the next poll (e.g. right after recording an
        answer in the same process). Call it from the worker's event loop."""
        if self._wake is not None:
            self._wake.set()

    async def run_once(self) -> int:
        """Carry on every session that has something to do now; return how many. The store's
        errors listing the sessions propagate (:meth:`run` waits them out); a session's own
        failure is noted in ``failed`` and the session is tried again later. With
        notifications, the notifier runs first (questions are announced before a deadline
        settles them) and again after sessions were carried on (their answers announced)."""
        if self.notifier is not None:
            await self.notifier.run_once()
        done = await self._sessions_once()
        if done and self.notifier is not None:
            await self.notifier.run_once()
        return done

    @property
    def reservation_lease(self) -> float:
        """How long the sessions of one pass stay reserved for this worker (seconds).

        A reservation only has to last from the listing until the session's run claims it
        (its first save), and the last session of a pass starts after about
        ``batch / concurrency`` sessions' time: the lease is twice that, from the average time
        a session took so far, and at least ``MIN_LEASE`` (30 s before anything was timed;
        at most ``MAX_LEASE``). A worker that dies holds its sessions that long at most."""
        if self._per_session is None:
            return 30.0
        rounds = -(-self.batch // self.concurrency)
        return min(MAX_LEASE, max(MIN_LEASE, 2 * rounds * self._per_session))

    async def _sessions_once(self) -> int:
        now = self.clock()
        waiting = sum(1 for until in self._backoff.values() if until > now)
        if self.reserves:  # the store hands each worker its own sessions: no shuffle needed
            ids = await self.store.sessions_to_resume(
                now,
                limit=self.batch + waiting,  # sessions backing off do not take the batch's room
                reserve_for=self.id,
                lease=self.reservation_lease,
            )
        else:
            ids = await self.store.sessions_to_resume(now, limit=self.batch + waiting)
        ids = [i for i in ids if self._backoff.get(i, 0.0) <= now][: self.batch]
        if not self.reserves:
            import random

            random.shuffle(ids)  # workers sharing a store start on different sessions
        import asyncio

        gate = asyncio.Semaphore(self.concurrency)

        async def one(session_id: str) -> bool:
            async with gate:
                started = time.monotonic()
                try:
                    return await self._carry_on(session_id)
                finally:
                    self._timed(time.monotonic() - started)

        results = await asyncio.gather(*(one(i) for i in ids), return_exceptions=True)
        for r in results:  # a ConfigurationError, once every other session has finished
            if isinstance(r, BaseException):
                raise r
        done = sum(r for r in results if not isinstance(r, BaseException))
        self.handled += done
        return done

    async def _carry_on(self, session_id: str) -> bool:
        from ..errors import ConfigurationError, InterludeError, SessionConflictError

        try:
            worked = await self._apply(session_id)
        except SessionConflictError:
            self.conflicts += 1
            return False  # another worker (or process) runs it: theirs
        except ConfigurationError:
            raise  # the operator's App or store is wrong: no retry mends that
        except InterludeError as exc:
            self._failed(session_id, exc)
            return False
        except Exception as exc:  # a tool or hook raised out of the run: the run ended
            self._failed(session_id, exc)
            return True
        self.failed.pop(session_id, None)
        self._backoff.pop(session_id, None)
        return worked

    async def _apply(self, session_id: str) -> bool:
        from ._moves import carry_on

        return await carry_on(self.app, self.store, session_id, clock=self.clock) is not None

    def _timed(self, seconds: float) -> None:
        """Fold one session's time into the moving average the lease is sized from."""
        last = self._per_session
        self._per_session = seconds if last is None else 0.8 * last + 0.2 * seconds

    def _failed(self, session_id: str, exc: BaseException) -> None:
        why = f"{type(exc).__name__}: {exc}"
        if self.failed.get(session_id) != why:  # the same failure again is not news
            _log().warning("session %r: %s", session_id, why)
        self.failed[session_id] = why
        self._backoff[session_id] = self.clock() + max(self.poll * 10, 5.0)

    def _pass_failed(self, exc: Exception) -> None:
        from ..errors import ConfigurationError

        if isinstance(exc, ConfigurationError):
            _log().error("worker stopped: %s", exc)
            raise exc
        why = f"{type(exc).__name__}: {exc}"
        h = self.health
        if h.last_error != why:  # logged once, not at every retry
            _log().warning("the store failed (%s); retrying with backoff", why)
        self.health = WorkerHealth(
            ok=False,
            last_pass=h.last_pass,
            failing_since=h.failing_since if h.failing_since is not None else self.clock(),
            failures=h.failures + 1,
            last_error=why,
        )

    def _pass_done(self) -> None:
        h = self.health
        if not h.ok:
            _log().warning(
                "the store answers again after %d failed pass(es) (%.1f s)",
                h.failures,
                self.clock() - (h.failing_since or self.clock()),
            )
        self.health = WorkerHealth(ok=True, last_pass=self.clock())


MIN_LEASE = 5.0
"""The shortest reservation a worker asks for (seconds)."""
MAX_LEASE = 600.0
"""The longest reservation a worker asks for (seconds)."""


def _new_id() -> str:
    """A worker id unique among the workers sharing a store: host, process id, random part."""
    import os
    import secrets
    import socket

    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def _backoff(base: float, cap: float, health: WorkerHealth) -> float:
    """The wait before the next try after ``health.failures`` failures in a row: doubling
    from ``base`` up to ``cap``, with "equal jitter" (half fixed, half random) so workers that
    failed together do not retry together."""
    import random

    delay = min(cap, base * 2 ** min(health.failures - 1, 30))
    return float(delay / 2 + random.uniform(0, delay / 2))


async def _wait(stop: asyncio.Event, wake: asyncio.Event | None, seconds: float) -> None:
    """Sleep ``seconds``, or less if ``stop`` (or ``wake``) is set meanwhile."""
    import asyncio

    waits = [asyncio.ensure_future(e.wait()) for e in (stop, wake) if e is not None]
    await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    for w in waits:
        w.cancel()
