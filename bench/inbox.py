"""Inbox benchmarks: an answer recorded to its tool finished, and workers' answers per second.

a) SQLite, one process: ``Inbox.record`` (what the API's submit does) and a ``Worker`` woken
   at once (as ``serve --worker`` does), from the record call to the tool's body having run;
   also through the HTTP API (the ASGI app in process) when the server extra is installed.
b) PostgreSQL, 4 worker processes sharing N answered sessions: answers applied per second,
   beside the raw INSERT + COMMIT figure measured on the same server.

Run alone with  .venv/bin/python bench/inbox.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import Row, approval_agent, check, print_table

from interlude import Agent, AgentSession, App, Worker, tool
from interlude.sessions import Inbox, SessionStore, SQLiteStore

LATENCY_TARGET_MS = 20.0
PG_DSN = os.environ.get("INTERLUDE_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
FINISHED: dict[str, float] = {}  # session id -> when its tool body ran (perf_counter)
_RAN: dict[str, asyncio.Event] = {}  # session id -> set when its tool body ran (in-loop runs)

app = App()


@tool
async def pay(to: str) -> str:
    """Pay someone.

    Args:
        to: Who.
    """
    FINISHED[to] = time.perf_counter()
    ran = _RAN.get(to)
    if ran is not None:
        ran.set()
    return "paid"


@app.agent("bench")
def _build(session: AgentSession) -> Agent:
    return approval_agent(session, pay)


def _paused(store: SessionStore, n: int, prefix: str) -> list[tuple[str, str]]:
    out = []
    for k in range(n):
        sid = f"{prefix}{k}"
        (q,) = app.start("bench", sid, store)(sid).interrupts
        out.append((sid, q.id))
    return out


async def _latencies(store: SQLiteStore, sessions: list[tuple[str, str]], api: Any) -> list[float]:
    """ms from submitting each answer to its tool having run, one answer at a time."""
    worker = Worker(app, store, poll=1.0)
    stop = asyncio.Event()
    running = asyncio.ensure_future(worker.run(stop))
    await asyncio.sleep(0.05)
    inbox = Inbox(store)
    samples = []
    try:
        for sid, qid in sessions:
            ran = _RAN[sid] = asyncio.Event()
            t0 = time.perf_counter()
            if api is None:
                await inbox.record_async(sid, {qid: True}, by="bench")
            else:
                await api(sid, qid)
            worker.wake()
            await ran.wait()
            samples.append((FINISHED[sid] - t0) * 1e3)
    finally:
        stop.set()
        await running
    return samples


def _api_client(store: SQLiteStore) -> Any:
    """A submit through the HTTP API of the in-process ASGI app, or None without the extra."""
    try:
        import httpx

        from interlude.server import create_app
    except ImportError:
        return None
    token = "bench-token-0123456789"
    asgi = create_app(store, app, tokens={token: "bench"})
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi), base_url="http://x")

    async def submit(sid: str, qid: str) -> None:
        r = await client.post(
            f"/api/sessions/{sid}/answers",
            json={"answers": {qid: True}},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert r.status_code == 202, r.text

    return submit


def bench_latency(n: int) -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "inbox.db")
        direct = _paused(store, n, "d")
        rows.append(
            Row(
                "Inbox.record -> tool run (SQLite, worker woken)",
                asyncio.run(_latencies(store, direct, None)),
                "ms",
                LATENCY_TARGET_MS,
            )
        )
        api = _api_client(store)
        if api is not None:
            through_api = _paused(store, n, "h")
            rows.append(
                Row(
                    "POST /api/.../answers -> tool run (SQLite)",
                    asyncio.run(_latencies(store, through_api, api)),
                    "ms",
                    LATENCY_TARGET_MS,
                )
            )
    return rows


# --- PostgreSQL: 4 worker processes ------------------------------------------------------------

_WORKER = """
import asyncio, sys, time
sys.path.insert(0, sys.argv[2])
from inbox import app
from interlude import Worker
w = Worker(app, sys.argv[1], poll=0.02)
async def main():
    idle = 0
    while idle < 5:
        idle = 0 if await w.run_once() else idle + 1
        await asyncio.sleep(0.02)
    print(w.handled, w.conflicts, time.time())
asyncio.run(main())
"""


def bench_pg_workers(n: int) -> list[str]:
    try:
        from interlude.sessions import PostgresStore

        schema = f"bench_inbox_{os.getpid()}"
        store = PostgresStore(PG_DSN, schema=schema)
    except Exception as exc:  # no server or driver: say so
        return [f"   PostgreSQL workers: skipped ({type(exc).__name__}: {exc})"]
    import psycopg

    try:
        inbox = Inbox(store)
        for sid, qid in _paused(store, n, "p"):
            inbox.record(sid, {qid: True}, by="bench")
        url = f"{PG_DSN}?schema={schema}"
        here = str(Path(__file__).parent)
        t0 = time.time()
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _WORKER, url, here],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(4)
        ]
        handled, conflicts, ends = 0, 0, []
        for p in procs:
            out, err = p.communicate(timeout=600)
            if p.returncode != 0:
                return [f"   PostgreSQL workers: a worker failed: {err.strip()[-300:]}"]
            count, clashed, end = out.split()
            handled += int(count)
            conflicts += int(clashed)
            ends.append(float(end))
        idle_tail = 5 * 0.02  # each worker's last idle polls
        seconds = max(ends) - t0 - idle_tail
        left = len(inbox.pending())
        with psycopg.connect(PG_DSN) as conn:
            conn.execute(f'CREATE TABLE "{schema}".floor (id bigserial PRIMARY KEY, data text)')
            conn.commit()
            samples = []
            for _ in range(200):
                t = time.perf_counter()
                conn.execute(f'INSERT INTO "{schema}".floor (data) VALUES (%s)', ("x" * 100,))
                conn.commit()
                samples.append((time.perf_counter() - t) * 1e3)
        raw = statistics.median(samples)
        return [
            f"   {n} answered sessions, 4 worker processes: {handled / seconds:,.0f} answers/s "
            f"({seconds:.2f} s incl. process start), {handled} applied, {left} still pending, "
            f"{conflicts} times a worker found a session taken by another",
            f"   raw INSERT + COMMIT on the same server: median {raw:.3f} ms "
            f"({1e3 / raw:,.0f} commits/s on one connection); an applied answer costs a load, "
            "the run's saves (claim, journal, final) and clearing the answer",
        ]
    finally:
        store.close()
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rows = bench_latency(30 if args.quick else 200)
    print_table("i) an answer submitted to its tool run (SQLite, worker in the same process)", rows)
    failed = 0
    for row in rows:
        line = check(f"{row.name}: p50", row.median, LATENCY_TARGET_MS, "ms")
        print(line)
        failed += "FAIL" in line
    print("\nj) answers per second, 4 workers on PostgreSQL")
    for line in bench_pg_workers(200 if args.quick else 1000):
        print(line)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
