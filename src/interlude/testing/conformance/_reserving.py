"""Work reserved at selection (``sessions_to_resume(reserve_for=...)``, for stores with
``reserves_work = True``): a session reserved by one worker is passed by other workers until
the reservation lapses or a run claims the session, the same worker gets it again, non-reserving
calls ignore reservations, and two processes reserving at once never get the same session."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from ...errors import SessionConflictError
from ...sessions import AnswerQueue, InboxStore
from ._base import StoreHooks
from ._support import _question, _update

__all__ = ["ReservationChecks"]

_CHILD = textwrap.dedent(
    """
    import asyncio, json, os, sys, time
    from pathlib import Path
    from interlude.sessions import open_store

    url, barrier, calls = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    store = open_store(url)
    (barrier / str(os.getpid())).touch()
    deadline = time.time() + 20
    while len(list(barrier.iterdir())) < 2 and time.time() < deadline:
        time.sleep(0.002)

    async def reserve():  # each call a different owner, as many workers would be
        return [
            await store.sessions_to_resume(
                100.0, limit=3, reserve_for=f"{os.getpid()}-{i}", lease=1000.0
            )
            for i in range(calls)
        ]

    print(json.dumps(asyncio.run(reserve())), flush=True)
    """
)


def _reserving_store(hooks: StoreHooks, tmp_path: Path) -> InboxStore:
    store = hooks.store_for(AnswerQueue, tmp_path)
    if not getattr(store, "reserves_work", False):
        import pytest

        pytest.skip(f"{type(store).__name__} does not reserve work (reserves_work)")
    return store


async def _answered(store: InboxStore, session_id: str, at: float) -> None:
    """A session with one question and a recorded answer given at ``at``."""
    await store.save(session_id, _update(0, 0, [], pending=[_question("q", None)]))
    answer = {"interrupt_id": "q", "answer": 1, "by": "ann", "at": at, "shown": None}
    await store.record_answers(session_id, [answer])


class ReservationChecks(StoreHooks):
    """``sessions_to_resume`` reserving what it returns for a worker."""

    def test_reserved_sessions_are_passed_by_until_the_lease_lapses(self, tmp_path: Path) -> None:
        store = _reserving_store(self, tmp_path)

        async def go() -> None:
            def todo(now: float, owner: str | None = None, **kw: Any) -> Any:
                return store.sessions_to_resume(now, reserve_for=owner, **kw)

            for sid, at in (("a", 10.0), ("b", 20.0), ("c", 30.0)):
                await _answered(store, sid, at)
            await store.save("d", _update(0, 0, [], pending=[_question("o", 40.0)]))  # overdue
            assert await todo(100.0, "w1", limit=2, lease=50.0) == ["a", "b"]  # until 150
            assert await todo(100.0, "w2", lease=50.0) == ["c", "d"]  # a, b are w1's
            assert await todo(100.0, "w3") == []
            assert await todo(100.0) == ["a", "b", "c", "d"]  # not reserving: sees all
            assert await todo(100.0, limit=1) == ["a"]
            assert await todo(149.0, "w3") == []  # not lapsed yet
            assert await todo(120.0, "w1", limit=5, lease=100.0) == ["a", "b"]  # its own again
            assert await todo(150.0, "w3", limit=1) == ["c"]  # w2's lapsed at 150: in order
            assert await todo(150.0, "w3") == ["c", "d"]  # its own again, and d; until 180
            assert await todo(170.0, "w2") == []  # a, b renewed by w1 until 220
            assert await todo(220.0, "w2", limit=0) == []
            assert await todo(220.0, "w2", lease=30.0) == ["a", "b", "c", "d"]  # until 250
            # a reservation is advisory: the reserved session is saved and answered as ever
            await store.save("a", _update(1, 0, [], pending=[]))
            await store.clear_answers("a", 10)
            assert await todo(230.0, "w1") == []  # a has no work now; the rest are w2's
            assert await todo(230.0) == ["b", "c", "d"]
            # a reservation goes with its session
            await store.delete("b")
            await _answered(store, "b", 20.0)
            assert await todo(230.0, "w1") == ["b"]

        asyncio.run(go())

    def test_a_save_with_a_run_claim_ends_the_reservation(self, tmp_path: Path) -> None:
        store = _reserving_store(self, tmp_path)

        async def go() -> None:
            await _answered(store, "a", 1.0)
            await _answered(store, "b", 2.0)
            assert await store.sessions_to_resume(10.0, reserve_for="w1") == ["a", "b"]
            claim = {"owner": "w1", "token": "t", "since": 10.0, "expires_at": 5.0}
            # b's run saves without a claim (a run that gave up): b stays w1's
            await store.save("b", _update(1, 0, [], pending=[_question("q", None)]))
            with contextlib.suppress(SessionConflictError):  # a save that does not land...
                await store.save("a", _update(7, 0, [], pending=[], claim=claim))
            assert await store.sessions_to_resume(11.0, reserve_for="w2") == []  # ...leaves it
            # a's run claims it (its lease lapsed at once here): a is no longer w1's
            await store.save("a", _update(1, 0, [], pending=[_question("q", None)], claim=claim))
            assert await store.sessions_to_resume(12.0, reserve_for="w2") == ["a"]
            assert await store.sessions_to_resume(12.0, reserve_for="w3") == []

        asyncio.run(go())

    def test_processes_reserving_at_once_never_get_the_same_session(self, tmp_path: Path) -> None:
        url = self.store_url(tmp_path)
        if url is None:
            import pytest

            pytest.skip("this store lives in one process")
        store = _reserving_store(self, tmp_path)
        sessions = [f"s{i:02d}" for i in range(30)]

        async def fill() -> None:
            for i, sid in enumerate(sessions):
                await _answered(store, sid, float(i))

        asyncio.run(fill())
        barrier = tmp_path / "reserve-barrier"
        barrier.mkdir()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _CHILD, url, str(barrier), "8"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            for _ in range(2)
        ]
        calls: list[list[str]] = []
        for proc in procs:
            out, err = proc.communicate(timeout=60)
            if proc.returncode != 0:
                raise AssertionError(f"child failed ({proc.returncode}):\n{err}")
            calls.extend(json.loads(out.strip().splitlines()[-1]))
        got = [sid for call in calls for sid in call]
        twice = sorted({sid for sid in got if got.count(sid) > 1})
        assert not twice, f"reserved by two owners at once: {twice}"
        assert sorted(got) == sessions  # 2 x 8 calls of 3: every session, once
        assert all(call == sorted(call) for call in calls)  # each call oldest first
