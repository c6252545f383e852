"""Workers sharing a store: answers applied per second by 1, 2, 4 and 8 worker processes, and
how often a worker lost a race for a session (collisions), beside the issue's targets.

Each round gets a fresh store with ``sessions`` paused sessions whose answers the inbox
recorded; the worker processes start, open the store, wait at a barrier, then run
``Worker.run_once`` until they find nothing five times in a row. The time is from the barrier
to the last pass that did work. A collision is a session a worker came to and did not carry on:
another worker was running it (SessionConflictError) or had carried it on already, as a share
of the answers applied (counted by wrapping the worker's per-session step, so older versions
are counted alike).
Tool runs are counted in the workers: each answer must run its tool exactly once.

Works against an older Interlude too (``PYTHONPATH=.../src``), for before/after figures.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

WORKER_COUNTS = (1, 2, 4, 8)
COLLISION_TARGET = 2.0  # % of answers, at most
SPEEDUP_TARGET = 2.0  # answers/s at 4 workers over 1 worker, at least
CEILING_TARGET = 0.5  # 4 workers' commits/s over the raw 4-connection commit ceiling, at least
PG_DSN = os.environ.get("INTERLUDE_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
HERE = Path(__file__).parent

_WORKER = """
import asyncio, os, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[2])
import inbox
from interlude import Worker
w = Worker(inbox.app, sys.argv[1], poll=0.02)
tries = 0
carry_on = w._carry_on
async def counted(session_id):  # every session this worker came to (any Interlude version)
    global tries
    tries += 1
    return await carry_on(session_id)
w._carry_on = counted
barrier = Path(sys.argv[3])
(barrier / str(os.getpid())).touch()
while not (barrier.parent / "go").exists():
    time.sleep(0.002)
async def main():
    idle, last = 0, time.time()
    while idle < 5:
        if await w.run_once():
            idle, last = 0, time.time()
        else:
            idle += 1
            await asyncio.sleep(0.02)
    print(w.handled, w.conflicts, tries - w.handled, len(inbox.FINISHED), last)
asyncio.run(main())
"""


@dataclass(frozen=True)
class Round:
    """One round: ``workers`` processes over ``sessions`` answered sessions."""

    workers: int
    sessions: int
    seconds: float
    applied: int
    collisions: int
    tool_runs: int

    @property
    def per_second(self) -> float:
        return self.applied / self.seconds if self.seconds > 0 else 0.0

    @property
    def collision_pct(self) -> float:
        return 100.0 * self.collisions / max(self.applied, 1)


def answered_sessions(store: object, n: int, prefix: str = "s") -> None:
    """``n`` sessions of the bench app, paused on their question, the answer recorded."""
    import inbox

    try:  # the operator floor's (before it, the stores' package held it)
        from interlude import Inbox
    except ImportError:
        from interlude.sessions import Inbox  # type: ignore[attr-defined,no-redef]

    box = Inbox(store)  # type: ignore[arg-type]
    for sid, qid in inbox._paused(store, n, prefix):  # type: ignore[arg-type]
        box.record(sid, {qid: True}, by="bench")


def run_round(url: str, workers: int, sessions: int) -> Round:
    """Start ``workers`` processes on the store at ``url`` (already filled) and time them."""
    with tempfile.TemporaryDirectory() as tmp:
        barrier = Path(tmp) / "ready"
        barrier.mkdir()
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _WORKER, url, str(HERE), str(barrier)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(workers)
        ]
        deadline = time.time() + 120
        while len(list(barrier.iterdir())) < workers and time.time() < deadline:
            if any(p.poll() is not None for p in procs):
                break
            time.sleep(0.01)
        t0 = time.time()
        (Path(tmp) / "go").touch()
        applied = collisions = tool_runs = 0
        ends = []
        for p in procs:
            out, err = p.communicate(timeout=600)
            if p.returncode != 0:
                raise RuntimeError(f"a worker failed: {err.strip()[-400:]}")
            handled, _conflicts, lost, ran, last = out.split()
            applied += int(handled)
            collisions += int(lost)
            tool_runs += int(ran)
            ends.append(float(last))
    return Round(workers, sessions, max(ends) - t0, applied, collisions, tool_runs)


@contextmanager
def sqlite_url(sessions: int) -> Iterator[str]:
    """A SQLite file with ``sessions`` answered sessions, and its URL."""
    from interlude.sessions import SQLiteStore

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scaling.db"
        store = SQLiteStore(path)
        answered_sessions(store, sessions)
        store.close()
        yield f"sqlite:///{path}"


@contextmanager
def postgres_url(sessions: int) -> Iterator[str]:
    """A fresh PostgreSQL schema with ``sessions`` answered sessions, and its URL (dropped
    afterwards). Raises if there is no server or driver."""
    import psycopg

    from interlude.sessions import PostgresStore

    schema = f"bench_scaling_{os.getpid()}_{time.monotonic_ns() % 10**9}"
    store = PostgresStore(PG_DSN, schema=schema)
    try:
        answered_sessions(store, sessions)
        yield f"{PG_DSN}?schema={schema}"
    finally:
        store.close()
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def scaling(
    filled: Callable[[int], AbstractContextManager[str]],
    sessions: int,
    counts: tuple[int, ...] = WORKER_COUNTS,
) -> list[Round]:
    """One round per worker count, each on a freshly filled store."""
    rounds = []
    for workers in counts:
        with filled(sessions) as url:
            rounds.append(run_round(url, workers, sessions))
    return rounds


def pg_commit_ceiling(connections: int = 4, seconds: float = 1.5) -> float:
    """The raw commit ceiling: ``connections`` threads, each on its own psycopg connection,
    INSERT + COMMIT of a ~100-byte row in a loop for ``seconds``; commits per second in all."""
    import psycopg

    schema = f"bench_ceiling_{os.getpid()}"
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".floor (id bigserial PRIMARY KEY, data text)')
    counts = [0] * connections
    start = threading.Barrier(connections + 1)

    def commit(k: int) -> None:
        with psycopg.connect(PG_DSN) as conn:
            start.wait()
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                conn.execute(f'INSERT INTO "{schema}".floor (data) VALUES (%s)', ("x" * 100,))
                conn.commit()
                counts[k] += 1

    threads = [threading.Thread(target=commit, args=(k,)) for k in range(connections)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return sum(counts) / elapsed


def saves_per_answer() -> int:
    """How many store saves (commits) applying one recorded answer takes, counted in
    process on a MemoryStore."""
    import asyncio

    import inbox

    from interlude import Worker
    from interlude.sessions import MemoryStore, SessionUpdate

    class Counting(MemoryStore):
        saves = 0

        async def save(self, session_id: str, update: SessionUpdate) -> int:
            Counting.saves += 1
            return await super().save(session_id, update)

    store = Counting()
    answered_sessions(store, 1, "count")
    Counting.saves = 0
    asyncio.run(Worker(inbox.app, store).run_once())
    return Counting.saves


def report(title: str, rounds: list[Round], ceiling: float | None = None) -> list[str]:
    """The rounds as lines, with the targets beside them (reported, never failed)."""
    lines = [title]
    one = next((r.per_second for r in rounds if r.workers == 1), None)
    at = {r.workers: r.per_second for r in rounds}
    saves = saves_per_answer() if ceiling else 0
    for r in rounds:
        speedup = f"{r.per_second / one:4.2f}x of 1 worker" if one else ""
        line = (
            f"   {r.workers} worker(s): {r.per_second:7,.0f} answers/s ({r.seconds:5.2f} s, "
            f"{r.applied}/{r.sessions} applied, {r.tool_runs} tool runs)  {speedup}  "
            f"collisions {r.collision_pct:5.1f}% (target <= {COLLISION_TARGET:g}%: "
            f"{'PASS' if r.collision_pct <= COLLISION_TARGET else 'miss'})"
        )
        if r.tool_runs != r.applied:
            line += "  TOOL RUNS != ANSWERS"
        lines.append(line)
    if one and 4 in at:
        ratio = at[4] / one
        verdict = "PASS" if ratio >= SPEEDUP_TARGET else "miss"
        lines.append(
            f"   4 workers / 1 worker: {ratio:.2f}x (target >= {SPEEDUP_TARGET:g}x: {verdict})"
        )
    if 4 in at and 8 in at:
        verdict = "PASS" if at[8] >= at[4] else "miss"
        lines.append(f"   8 workers / 4 workers: {at[8] / at[4]:.2f}x (target >= 1x: {verdict})")
    if ceiling and 4 in at:
        share = at[4] * saves / ceiling
        verdict = "PASS" if share >= CEILING_TARGET else "miss"
        lines.append(
            f"   raw 4-connection commit ceiling {ceiling:,.0f} commits/s; 4 workers commit "
            f"{at[4] * saves:,.0f}/s ({saves} saves per answer): {share:.2f} of the ceiling "
            f"(target >= {CEILING_TARGET:g}: {verdict})"
        )
    return lines
