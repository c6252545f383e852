"""Workers sharing a store take the sessions it reserves for them: no two start on the same
session, a failed one stays with its worker until the reservation lapses, and a store that
does not reserve still works (shuffled)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from interlude import Inbox, Worker
from interlude.sessions import SQLiteStore

from . import payroll_app
from .flaky import FlakyStore
from .payroll_app import LEDGER, app


@pytest.fixture(autouse=True)
def _clean() -> None:
    LEDGER.clear()
    payroll_app.CLOCK.clear()


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _answered(store: Any, n: int) -> None:
    inbox = Inbox(store)
    for k in range(n):
        (q,) = app.start("payroll", f"s{k}", store)(f"pay p{k}").interrupts
        inbox.record(f"s{k}", {q.id: True}, by="ana")


def test_workers_sharing_a_store_take_different_sessions(tmp_path: Path) -> None:
    _answered(SQLiteStore(tmp_path / "s.db"), 10)
    a = Worker(app, SQLiteStore(tmp_path / "s.db"), batch=5)
    b = Worker(app, SQLiteStore(tmp_path / "s.db"), batch=5)
    assert a.reserves and b.reserves and a.id != b.id

    async def both() -> list[int]:
        return list(await asyncio.gather(a.run_once(), b.run_once()))

    # Without reservations both would list the same 5 oldest sessions: 5 done, 5 lost races.
    assert asyncio.run(both()) == [5, 5]
    assert a.conflicts == b.conflicts == 0
    assert sorted(e["to"] for e in LEDGER) == sorted(f"p{k}" for k in range(10))


def test_a_failed_session_stays_with_its_worker_until_the_reservation_lapses(
    tmp_path: Path,
) -> None:
    flaky = FlakyStore(SQLiteStore(tmp_path / "s.db"))
    _answered(flaky, 1)
    clock = Clock()
    first = Worker(app, flaky, clock=clock, worker_id="first")
    other = Worker(app, SQLiteStore(tmp_path / "s.db"), clock=clock, worker_id="other")
    flaky.saves_fail = 1
    lease = first.reservation_lease
    assert lease == 30.0  # nothing timed yet
    assert asyncio.run(first.run_once()) == 0 and "s0" in first.failed
    assert 5.0 <= first.reservation_lease < 30.0  # sized from the time the session took
    clock.now += lease - 1  # still first's: the other worker passes it by
    assert asyncio.run(other.run_once()) == 0 and other.conflicts == 0 and LEDGER == []
    clock.now += 1  # lapsed (first stopped polling): the other worker takes it
    assert asyncio.run(other.run_once()) == 1
    assert [e["to"] for e in LEDGER] == ["p0"]


class _Unreserving:
    """A third-party store: the SQLite store's methods, no ``reserves_work``, and a
    ``sessions_to_resume`` without ``reserve_for``."""

    def __init__(self, inner: SQLiteStore) -> None:
        self.inner = inner
        self.calls: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        if name == "reserves_work":
            raise AttributeError(name)
        return getattr(self.inner, name)

    async def sessions_to_resume(self, now: Any, *, limit: int | None = None) -> list[str]:
        self.calls.append({"limit": limit})
        return await self.inner.sessions_to_resume(now, limit=limit)


def test_a_store_that_does_not_reserve_gets_the_shuffle(tmp_path: Path) -> None:
    store = _Unreserving(SQLiteStore(tmp_path / "s.db"))
    _answered(store, 4)
    worker = Worker(app, store, batch=10)  # type: ignore[arg-type]
    assert not worker.reserves
    assert asyncio.run(worker.run_once()) == 4
    assert store.calls == [{"limit": 10}]
    assert sorted(e["to"] for e in LEDGER) == ["p0", "p1", "p2", "p3"]
