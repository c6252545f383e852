"""Session-store benchmarks: SQLite and PostgreSQL round trips, bytes per pause, PG resume workers.

Run alone with  .venv/bin/python bench/sessions.py [--quick]  (bench/bench.py runs it too).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import Metered, Row, check, print_table

from interlude import Agent, Message, Text, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.sessions import MemoryStore, SessionStore, SQLiteStore
from interlude.testing import ScriptedModel

ROUND_TRIP_TARGET_MS = 1.5
GROWTH_TARGET = 2.0
PG_SAVE_TARGET = 1.5  # a PostgresStore save, against one raw INSERT + COMMIT (issue 24)
PG_ROUND_TRIP_TARGET = 12.0  # pause + fresh-agent resume, in raw INSERT + COMMITs (issue 24)
RESUME_SAVES = 4  # raw commits measured after each PostgreSQL round trip: a resume's saves
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


@dataclass
class RoundTrips:
    """Pause run + fresh agent + resume, timed; with what the store did in each part."""

    ms: list[float] = field(default_factory=list)
    saves: list[int] = field(default_factory=list)  # in the whole round trip
    save_ms: list[float] = field(default_factory=list)  # inside store.save, whole round trip
    loads: list[int] = field(default_factory=list)
    load_ms: list[float] = field(default_factory=list)
    resume_saves: list[int] = field(default_factory=list)  # in fresh agent + resume
    resume_per_save_ms: list[float] = field(default_factory=list)


def round_trips(
    store: Metered, reps: int, prefix: str, between: Callable[[bool], None] | None = None
) -> RoundTrips:
    """ms for: a run that pauses, a freshly built agent (loads the session), its resume. The
    first 10 are warm-up. ``between()`` runs after each, untimed (interleaved measurements)."""
    out = RoundTrips()
    for i in range(reps + 10):
        sid = f"{prefix}{i}"
        gc.collect()
        saves0, save_s0 = store.saves, store.save_seconds
        loads0, load_s0 = store.loads, store.load_seconds
        t0 = time.perf_counter()
        paused = agent_for(store, sid, [[ToolUse("t1", "act", {"item": "x"})]])("go")
        saves1, save_s1 = store.saves, store.save_seconds
        fresh = agent_for(store, sid, ["done"])
        result = fresh.resume({paused.interrupts[0].id: True})
        elapsed = (time.perf_counter() - t0) * 1e3
        assert result.stop_reason == "end_turn"
        if between is not None:
            between(i >= 10)
        if i < 10:  # warm-up
            continue
        out.ms.append(elapsed)
        out.saves.append(store.saves - saves0)
        out.save_ms.append((store.save_seconds - save_s0) * 1e3)
        out.loads.append(store.loads - loads0)
        out.load_ms.append((store.load_seconds - load_s0) * 1e3)
        resume_saves = store.saves - saves1
        out.resume_saves.append(resume_saves)
        out.resume_per_save_ms.append((store.save_seconds - save_s1) * 1e3 / resume_saves)
    return out


def sqlite_round_trip(reps: int) -> RoundTrips:
    with tempfile.TemporaryDirectory() as tmp:
        store = Metered(SQLiteStore(Path(tmp) / "s.db"))
        trips = round_trips(store, reps, "s")
        store.close()
    return trips


def describe_trips(trips: RoundTrips) -> str:
    med = statistics.median
    rest = med(
        [t - s - ld for t, s, ld in zip(trips.ms, trips.save_ms, trips.load_ms, strict=True)]
    )
    return (
        f"{med(trips.saves):.0f} saves ({med(trips.resume_saves):.0f} of them in the resume) "
        f"and {med(trips.loads):.0f} loads (one per agent built) per round trip: "
        f"{med(trips.save_ms):.2f} ms inside store.save "
        f"({med(trips.save_ms) / med(trips.saves) * 1e3:.0f} us/save), "
        f"{med(trips.load_ms):.2f} ms inside store.load, {rest:.2f} ms elsewhere "
        "(agents, loop, journal)"
    )


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


# --- PostgreSQL: round trip against the raw commit floor ------------------------------------


class PgFloor:
    """The least a PostgreSQL commit costs from here: on one open psycopg connection, an INSERT
    of a ~100-byte row and a COMMIT (psycopg sends BEGIN, INSERT, COMMIT: three round trips,
    one WAL flush), timed; and, for reference, the same INSERT in autocommit (one round trip)."""

    def __init__(self, dsn: str, schema: str) -> None:
        import psycopg

        self.conn = psycopg.connect(dsn)
        self.auto = psycopg.connect(dsn, autocommit=True)
        self.table = f'"{schema}".bench_floor'
        self.conn.execute(f"CREATE TABLE {self.table} (id bigserial PRIMARY KEY, data text)")
        self.conn.commit()
        self.row = json.dumps({"role": "user", "content": [{"text": "x" * 60}]})
        self.samples: list[float] = []  # ms, INSERT + COMMIT
        self.auto_samples: list[float] = []  # ms, autocommit INSERT
        self.batch_means: list[float] = []  # ms, the mean INSERT + COMMIT of each batch

    def measure(self, commits: int, keep: bool = True) -> None:
        """A batch of ``commits`` timed commits of each kind."""
        insert = f"INSERT INTO {self.table} (data) VALUES (%s)"
        batch: list[float] = []
        for _ in range(commits):
            t0 = time.perf_counter()
            self.conn.execute(insert, (self.row,))
            self.conn.commit()
            t1 = time.perf_counter()
            self.auto.execute(insert, (self.row,))
            t2 = time.perf_counter()
            batch.append((t1 - t0) * 1e3)
            if keep:
                self.auto_samples.append((t2 - t1) * 1e3)
        if keep:
            self.samples.extend(batch)
            self.batch_means.append(statistics.mean(batch))

    def close(self) -> None:
        self.conn.close()
        self.auto.close()


def postgres_round_trip(reps: int) -> tuple[RoundTrips, PgFloor] | str:
    """Pause + fresh agent + resume through PostgresStore, each followed by a batch of raw
    commits as many as the resume's saves (so both see the server in the same state)."""
    try:
        from interlude.sessions import PostgresStore

        schema = f"bench_rt_{os.getpid()}"
        store = PostgresStore(PG_DSN, schema=schema)
    except Exception as exc:  # no server or no driver: say so instead of failing the bench
        return _skipped(exc)
    try:
        floor = PgFloor(PG_DSN, schema)
        try:
            metered = Metered(store)
            trips = round_trips(metered, reps, "rt", lambda keep: floor.measure(RESUME_SAVES, keep))
        finally:
            floor.close()
        return trips, floor
    finally:
        store.close()
        _drop_schema(schema)


def report_postgres_round_trip(reps: int) -> None:
    title = "e) pause + resume through PostgresStore, resuming agent freshly built"
    found = postgres_round_trip(reps)
    if isinstance(found, str):
        print(f"\n{title}\n   {found}")
        return
    trips, floor = found
    print_table(
        title,
        [
            Row("pause run + build fresh agent + resume", trips.ms, "ms"),
            Row("a store save, resume part (see below)", trips.resume_per_save_ms, "ms"),
            Row("raw INSERT + COMMIT over psycopg", floor.samples, "ms"),
            Row("raw INSERT, autocommit (info)", floor.auto_samples, "ms"),
        ],
    )
    print(f"   {describe_trips(trips)}")
    per_save = statistics.median(trips.resume_per_save_ms)
    commit = statistics.median(floor.batch_means)
    print(
        "   Fair comparison, per save: for each round trip, the time the fresh agent's resume "
        "spent inside store.save divided by its number of saves (a mean: it includes encoding, "
        "taking a pooled connection and the occasional slow commit), "
        f"against the mean of the {RESUME_SAVES} raw INSERT + COMMITs (one open psycopg "
        "connection, same server) timed right after that round trip; medians over the round "
        f"trips: {per_save:.3f} ms per save, {commit:.3f} ms per raw commit."
    )
    print(check("a store save / a raw commit", per_save / commit, PG_SAVE_TARGET, "x"))
    whole = statistics.median(trips.ms)
    print(
        check(
            f"pause + fresh resume ({whole:.2f} ms) / a raw commit",
            whole / commit,
            PG_ROUND_TRIP_TARGET,
            "x",
        )
    )


def _skipped(exc: Exception) -> str:
    detail = " ".join(str(exc).split())  # one line
    return f"skipped: PostgreSQL or its driver is not available ({type(exc).__name__}: {detail})"


def _drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def run(quick: bool) -> None:
    rt = sqlite_round_trip(30 if quick else 200)
    print_table(
        "d) pause + resume through SQLiteStore, resuming agent freshly built (WAL, one file)",
        [Row("pause run + build fresh agent + resume", rt.ms, "ms", ROUND_TRIP_TARGET_MS)],
    )
    print(f"   {describe_trips(rt)}")
    for name, (short, long) in growth().items():
        ratio = long / short
        verdict = "PASS" if ratio <= GROWTH_TARGET else "FAIL"
        print(
            f"   {name}: bytes written by a pausing run after 10 messages {short:,} B, after "
            f"1,000 {long:,} B: ratio {ratio:.2f}  target <= {GROWTH_TARGET}x  {verdict}"
        )
    report_postgres_round_trip(30 if quick else 200)
    print(
        "\nf) PostgresStore: 1, 2, 4 and 8 Worker processes applying recorded answers "
        "(bench/scaling.py)"
    )
    for line in postgres_scaling(200 if quick else 1000):
        print(line)


def postgres_scaling(sessions: int) -> list[str]:
    """Section f: workers sharing a PostgreSQL store, against the raw 4-connection commit
    ceiling measured on the same server (skipped without a server)."""
    import scaling

    try:
        ceiling = scaling.pg_commit_ceiling()
        rounds = scaling.scaling(scaling.postgres_url, sessions)
    except Exception as exc:  # no server or no driver: say so instead of failing the bench
        return [f"   {_skipped(exc)}"]
    return scaling.report(f"   {sessions} answered sessions per round:", rounds, ceiling)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    run(parser.parse_args().quick)
