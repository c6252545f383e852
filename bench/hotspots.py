"""Where a benchmark's time goes: cProfile over one workload, per unit of work.

    .venv/bin/python bench/hotspots.py cycles          # g) journaled cycles, no hooks
    .venv/bin/python bench/hotspots.py cycles-hook     # g) with the no-op before-tool hook
    .venv/bin/python bench/hotspots.py sqlite-trip     # d) SQLite pause + fresh agent + resume
    .venv/bin/python bench/hotspots.py pg-trip         # e) the same through PostgreSQL
    .venv/bin/python bench/hotspots.py pg-calls        # e2) its store calls alone, no agents
    .venv/bin/python bench/hotspots.py memory-trip     # c) in-memory sync pause + resume

Prints the top functions by own time (``--sort cumulative`` for inclusive time) in
microseconds per cycle or per round trip. cProfile adds about a microsecond per call, so
call-heavy code looks slower than it is: read the figures as shares, and time the suspects
directly before concluding. A coroutine counts one call per resumption. By default the clock
is the wall clock (the PostgreSQL workloads then show their waits in epoll); ``--cpu`` times
with ``time.process_time`` instead: the client's CPU only, the figure to read on a busy machine
(C functions called from Cython, libpq's included, count in their Python caller's own time).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import journal
import sessions
from common import Metered

import bench
from interlude import ToolUse
from interlude.sessions import SQLiteStore

WARM_UP = 20


def _trip(store: Any, sid: str) -> None:
    paused = sessions.agent_for(store, sid, [[ToolUse("t1", "act", {"item": "x"})]])("go")
    fresh = sessions.agent_for(store, sid, ["done"])
    result = fresh.resume({paused.interrupts[0].id: True})
    assert result.stop_reason == "end_turn"


def workload(name: str, units: int, tmp: Path) -> tuple[Callable[[int], None], str, Any]:
    """(run unit i, the unit's name, a store to close or None)."""
    if name in ("cycles", "cycles-hook"):
        metered = Metered(SQLiteStore(tmp / "cycles.db"))
        variant = journal.Variant(name, metered, hook=name == "cycles-hook")

        def cycles(i: int) -> None:
            journal.cycle_agent(variant, f"c{i}", journal.CYCLES)("go")

        return cycles, f"cycle ({journal.CYCLES} per invocation)", metered
    if name == "sqlite-trip":
        store = SQLiteStore(tmp / "trips.db")
        return (lambda i: _trip(store, f"s{i}")), "round trip", store
    if name == "pg-trip":
        from interlude.sessions import PostgresStore

        pg = PostgresStore(sessions.PG_DSN, schema=f"bench_hot_{os.getpid()}")
        return (lambda i: _trip(pg, f"p{i}")), "round trip", pg
    if name == "pg-calls":  # as in e2), on one event loop: the store's own work per round trip
        import asyncio

        from interlude.sessions import PostgresStore

        pg = PostgresStore(sessions.PG_DSN, schema=f"bench_hot_{os.getpid()}")
        calls = sessions.trip_calls(pg, "rec")
        loop = asyncio.new_event_loop()

        def replay(i: int) -> None:
            loop.run_until_complete(sessions._replay(pg, calls, "rec", [f"c{i}"]))

        return replay, "round trip's store calls", pg
    if name == "memory-trip":  # as in c), the agents are built beforehand
        agents = [bench.paused_agent() for _ in range(units + WARM_UP)]

        def memory(i: int) -> None:
            agent = agents[i]
            result = agent("go")
            agent.resume({x.id: True for x in result.interrupts})

        return memory, "round trip", None
    raise SystemExit(f"unknown workload {name!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "workload",
        choices=["cycles", "cycles-hook", "sqlite-trip", "pg-trip", "pg-calls", "memory-trip"],
    )
    parser.add_argument("--units", type=int, default=0, help="invocations / round trips")
    parser.add_argument("--sort", default="tottime", choices=["tottime", "cumulative"])
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--cpu", action="store_true", help="time with process_time (CPU)")
    args = parser.parse_args()
    cyc = args.workload.startswith("cycles")
    units = args.units or (10 if cyc else 300)
    with tempfile.TemporaryDirectory() as tmp:
        run, unit, store = workload(args.workload, units, Path(tmp))
        try:
            for i in range(WARM_UP if not cyc else 2):
                run(-1 - i)
            profile = cProfile.Profile(time.process_time) if args.cpu else cProfile.Profile()
            profile.enable()
            for i in range(units):
                run(i)
            profile.disable()
        finally:
            if store is not None:
                store.close()
            if args.workload.startswith("pg-"):
                sessions._drop_schema(f"bench_hot_{os.getpid()}")
    per = units * (journal.CYCLES if cyc else 1)
    stats = pstats.Stats(profile)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    key = 2 if args.sort == "tottime" else 3  # (cc, nc, tt, ct, callers)
    total = sum(v[2] for v in raw.values())
    print(f"{args.workload}: {total * 1e6 / per:,.0f} us per {unit} under cProfile")
    print(f"{'us/unit':>9} {'calls/unit':>10} {'us/call':>8}  function ({args.sort})")
    for func, v in sorted(raw.items(), key=lambda kv: -kv[1][key])[: args.top]:
        filename, line, fname = func
        where = f"{Path(filename).name}:{line}({fname})" if line else fname
        print(f"{v[key] * 1e6 / per:9.1f} {v[1] / per:10.2f} {v[key] * 1e6 / v[1]:8.1f}  {where}")


if __name__ == "__main__":
    main()
