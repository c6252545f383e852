"""Inbox benchmarks: an answer recorded to its tool finished, and workers' answers per second.

a) SQLite, one process: ``Inbox.record`` (what the API's submit does) and a ``Worker`` woken
   at once (as ``serve --worker`` does), from the record call to the tool's body having run;
   also through the HTTP API (the ASGI app in process) when the server extra is installed.
b) 1, 2, 4 and 8 worker processes sharing N answered sessions, on SQLite and PostgreSQL:
   answers applied per second and collisions (bench/scaling.py), beside the targets.

Run alone with  .venv/bin/python bench/inbox.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import Row, approval_agent, check, print_table

from interlude import Agent, AgentSession, App, Worker, tool

try:  # the operator floor's (before it, the stores' package held it): A/B against older trees
    from interlude import Inbox
except ImportError:
    from interlude.sessions import Inbox  # type: ignore[attr-defined,no-redef]
from interlude.sessions import SessionStore, SQLiteStore

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


# --- workers sharing a store: 1, 2, 4, 8 processes -------------------------------------------


def bench_scaling(quick: bool) -> list[str]:
    """Answers applied per second and collisions by 1, 2, 4, 8 worker processes, on SQLite
    and on PostgreSQL (skipped without a server), beside the issue's targets."""
    import scaling

    lines = []
    n = 120 if quick else 600
    rounds = scaling.scaling(scaling.sqlite_url, n)
    lines += scaling.report(f"   SQLite (one file), {n} answered sessions per round:", rounds)
    try:
        rounds = scaling.scaling(scaling.postgres_url, n)
    except Exception as exc:  # no server or driver: say so
        return [*lines, f"   PostgreSQL: skipped ({type(exc).__name__}: {exc})"]
    lines += scaling.report(f"   PostgreSQL, {n} answered sessions per round:", rounds)
    return lines


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
    print("\nj) answers per second by 1, 2, 4 and 8 worker processes sharing a store")
    for line in bench_scaling(args.quick):
        print(line)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
