"""Session-store benchmarks: SQLite round trip, bytes per pause, PostgreSQL resume workers.

Run alone with  .venv/bin/python bench/sessions.py [--quick]  (bench/bench.py runs it too).
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from interlude import Agent, Message, Text, ToolUse, tool
from interlude.errors import SessionConflictError
from interlude.hooks import BeforeToolCallEvent
from interlude.sessions import MemoryStore, SessionStore, SQLiteStore
from interlude.testing import ScriptedModel

ROUND_TRIP_TARGET_MS = 3.0
GROWTH_TARGET = 2.0
PG_DSN = os.environ.get("INTERLUDE_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")


@tool
async def act(item: str) -> str:
    """Act on an item.

    Args:
        item: The item.
    """
    return f"did {item}"


def _approve(event: BeforeToolCallEvent) -> None:
    event.interrupt("approve")


def agent_for(
    store: SessionStore, sid: str, turns: list[Any], messages: Any = (), tools: Any = None
) -> Agent:
    agent = Agent(
        ScriptedModel(turns),
        tools=tools or [act],
        messages=messages,
        session=store,
        session_id=sid,
        max_cycles=10_000,
    )
    agent.hooks.add_callback(BeforeToolCallEvent, _approve)
    return agent


def sqlite_round_trip(reps: int) -> list[float]:
    """ms for: a run that pauses, a freshly built agent (loads the session), its resume."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "s.db")
        for i in range(reps + 10):
            sid = f"s{i}"
            gc.collect()
            t0 = time.perf_counter()
            paused = agent_for(store, sid, [[ToolUse("t1", "act", {"item": "x"})]])("go")
            fresh = agent_for(store, sid, ["done"])
            result = fresh.resume({paused.interrupts[0].id: True})
            elapsed = (time.perf_counter() - t0) * 1e3
            assert result.stop_reason == "end_turn"
            if i >= 10:  # warm-up
                out.append(elapsed)
        store.close()
    return out


def pause_bytes(store: Any, sid: str, history: int) -> int:
    """JSON bytes a store writes for a run pausing at the end of a ``history``-message talk."""
    messages = [
        Message("user" if i % 2 == 0 else "assistant", [Text(f"message {i} " + "x" * 200)])
        for i in range(history)
    ]
    turns: list[Any] = ["ok", [ToolUse("t1", "act", {"item": "x"})]]
    agent = agent_for(store, sid, turns, messages=messages)
    agent("warm up")  # stores the history
    before = store.bytes_written
    assert agent("one more").stop_reason == "interrupt"
    return int(store.bytes_written - before)


def growth() -> dict[str, tuple[int, int]]:
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        stores: dict[str, Any] = {
            "MemoryStore": MemoryStore(),
            "SQLiteStore": SQLiteStore(Path(tmp) / "g.db"),
        }
        for name, store in stores.items():
            out[name] = (pause_bytes(store, "short", 10), pause_bytes(store, "long", 1000))
    return out


# --- PostgreSQL: 4 workers resuming 1000 paused sessions ---------------------------------------


def _pg_worker(dsn: str, schema: str, sids: list[str], queue: Any) -> None:
    from interlude.sessions import PostgresStore

    ran: list[str] = []

    @tool
    async def act(item: str) -> str:  # counts executions per tool use
        """Act on an item.

        Args:
            item: The item.
        """
        ran.append(item)
        return f"did {item}"

    store = PostgresStore(dsn, schema=schema)
    resumed = conflicts = 0
    for sid in sids:
        agent = agent_for(store, sid, ["done"], tools=[act])
        if not agent.is_paused:
            continue  # another worker finished it before this one loaded it
        try:
            agent.resume({agent.interrupts[0].id: True})
            resumed += 1
        except SessionConflictError:
            conflicts += 1
    store.close()
    queue.put((resumed, conflicts, ran))


def postgres_workers(sessions: int, workers: int = 4) -> dict[str, Any] | str:
    try:
        from interlude.sessions import PostgresStore

        schema = f"bench_{os.getpid()}"
        store = PostgresStore(PG_DSN, schema=schema)
    except Exception as exc:  # no server or no driver: say so instead of failing the bench
        return f"skipped ({type(exc).__name__}: {exc})"
    try:
        sids = [f"w{i}" for i in range(sessions)]
        for sid in sids:
            agent_for(store, sid, [[ToolUse("t1", "act", {"item": sid})]])("go")
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        # every worker walks all sessions, from a different starting point, so they collide
        procs = [
            ctx.Process(
                target=_pg_worker,
                args=(
                    PG_DSN,
                    schema,
                    sids[k * sessions // workers :] + sids[: k * sessions // workers],
                    queue,
                ),
            )
            for k in range(workers)
        ]
        t0 = time.perf_counter()
        for p in procs:
            p.start()
        results = [queue.get(timeout=600) for _ in procs]
        elapsed = time.perf_counter() - t0
        for p in procs:
            p.join()
        ran = [item for _, _, r in results for item in r]
        resumed = sum(r for r, _, _ in results)
        return {
            "sessions": sessions,
            "workers": workers,
            "seconds": elapsed,
            "resumes_per_s": resumed / elapsed,
            "resumed": resumed,
            "conflicts": sum(c for _, c, _ in results),
            "tool_runs": len(ran),
            "double_runs": len(ran) - len(set(ran)),
            "pending_after": len(__import__("asyncio").run(store.pending_interrupts())),
        }
    finally:
        _drop_schema(schema)
        store.close()


def _drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def run(quick: bool) -> None:
    from bench import Row, print_table  # type: ignore[import-not-found]

    rt = sqlite_round_trip(30 if quick else 200)
    print_table(
        "d) pause + resume through SQLiteStore, resuming agent freshly built (WAL, one file)",
        [Row("pause run + build fresh agent + resume", rt, "ms", ROUND_TRIP_TARGET_MS)],
    )
    for name, (short, long) in growth().items():
        ratio = long / short
        verdict = "PASS" if ratio <= GROWTH_TARGET else "FAIL"
        print(
            f"   {name}: bytes written by a pausing run after 10 messages {short:,} B, after "
            f"1,000 {long:,} B: ratio {ratio:.2f}  target <= {GROWTH_TARGET}x  {verdict}"
        )
    pg = postgres_workers(200 if quick else 1000)
    print("\ne) PostgresStore: 4 worker processes resuming paused sessions (all race for all)")
    if isinstance(pg, str):
        print(f"   {pg}")
        return
    verdict = "PASS" if pg["double_runs"] == 0 and pg["tool_runs"] == pg["sessions"] else "FAIL"
    print(
        f"   {pg['sessions']} sessions, {pg['workers']} workers: {pg['resumes_per_s']:,.0f} "
        f"resumes/s ({pg['seconds']:.2f} s), {pg['resumed']} resumed, {pg['conflicts']} lost "
        f"races (SessionConflictError), tool runs {pg['tool_runs']}, double runs "
        f"{pg['double_runs']}, still pending {pg['pending_after']}  {verdict}"
    )


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    run(parser.parse_args().quick)
