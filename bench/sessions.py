"""Session-store benchmarks: SQLite and PostgreSQL round trips, bytes per pause, PG resume workers.

Run alone with  .venv/bin/python bench/sessions.py [--quick]  (bench/bench.py runs it too).
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
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


# --- PostgreSQL: client CPU per store call, statements and commits per round trip -------------

CPU_TARGET_US = 200  # client CPU per PostgresStore call (issue 37)
CPU_TRIPS = 40  # round trips per timed block


def _wrap_calls(store: Any, log: list[tuple[str, tuple[Any, ...], dict[str, Any]]]) -> None:
    """Make ``store`` note each call of its public coroutine methods in ``log`` (instance
    attributes over the class's methods: the store's type and capabilities are unchanged)."""
    for name in dir(type(store)):
        method = getattr(type(store), name, None)
        if name.startswith("_") or not inspect.iscoroutinefunction(method):
            continue

        def wrapped(*args: Any, _name: str = name, **kwargs: Any) -> Any:
            log.append((_name, args, kwargs))
            return getattr(type(store), _name)(store, *args, **kwargs)

        setattr(store, name, wrapped)


def _unwrap_calls(store: Any) -> None:
    for name in [n for n in vars(store) if not n.startswith("_") and callable(vars(store)[n])]:
        delattr(store, name)


def trip_calls(store: Any, sid: str) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """The store calls one round trip (pause + fresh agent + resume) makes, in order."""
    log: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
    _wrap_calls(store, log)
    try:
        _trip(store, sid)
    finally:
        _unwrap_calls(store)
    return log


def _trip(store: Any, sid: str) -> None:
    paused = agent_for(store, sid, [[ToolUse("t1", "act", {"item": "x"})]])("go")
    fresh = agent_for(store, sid, ["done"])
    assert fresh.resume({paused.interrupts[0].id: True}).stop_reason == "end_turn"


async def _replay(store: Any, calls: list[Any], was: str, sids: list[str]) -> None:
    """The recorded calls of session ``was`` again, for each of ``sids`` (no agent around)."""
    for sid in sids:
        for name, args, kwargs in calls:
            await getattr(store, name)(*[sid if a == was else a for a in args], **kwargs)


@dataclass
class Wire:
    """What the store's connections sent and got, read from libpq's protocol trace: statements
    (Execute, or a simple Query other than BEGIN/COMMIT), transaction-control commands, waits for
    the server (a message sent after one was read) and commits (ReadyForQuery back to idle after
    a statement or a transaction block)."""

    statements: int = 0
    control: int = 0
    waits: int = 0
    commits: int = 0

    def read(self, trace: str) -> None:
        status, ran, last = "I", False, "B"
        for line in trace.splitlines():
            parts = line.split("\t")
            if len(parts) < 3:
                continue
            side, kind, rest = parts[0], parts[2], parts[3] if len(parts) > 3 else ""
            if side == "F" and last == "B":
                self.waits += 1
            last = side
            if side == "F" and kind == "Execute":
                self.statements += 1
            elif side == "F" and kind == "Query":
                control = rest.strip().strip('"').split()[0].upper() in ("BEGIN", "COMMIT")
                self.control += control
                self.statements += not control
            elif side == "B" and kind == "CommandComplete":
                ran = ran or "ROLLBACK" not in rest
            elif side == "B" and kind == "ReadyForQuery":
                now = rest.strip()
                self.commits += now == "I" and ran and status != "E"
                status, ran = now, ran and now == "T"


def traced(store: Any, work: Callable[[], None]) -> Wire:
    """The wire work of ``work()`` on ``store``'s pooled connections (made by earlier calls)."""
    from psycopg import pq

    conns = [c for pool in store._pools._pools.values() for c in pool._idle]  # the pool's own
    wire = Wire()
    with tempfile.TemporaryFile("w+") as f:
        for conn in conns:
            conn.pgconn.trace(f.fileno())
            conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            work()
        finally:
            for conn in conns:
                conn.pgconn.untrace()
        f.seek(0)
        wire.read(f.read())
    return wire


@dataclass
class ClientCpu:
    """CPU (time.process_time, ms) per round trip through MemoryStore and PostgresStore, per
    replay of the PostgreSQL round trip's store calls without the agents, and per as many raw
    psycopg statements."""

    memory: list[float] = field(default_factory=list)
    postgres: list[float] = field(default_factory=list)
    replay: list[float] = field(default_factory=list)
    raw: list[float] = field(default_factory=list)  # as many raw statements (RawStatements)
    calls: dict[str, int] = field(default_factory=dict)
    trip_wire: Wire = field(default_factory=Wire)
    replay_wire: Wire = field(default_factory=Wire)
    load: tuple[float, float] = (0.0, 0.0)  # os.getloadavg() before and after


def _cpu_ms(work: Callable[[], None]) -> float:
    """CPU ms per round trip of ``work()`` (CPU_TRIPS of them)."""
    gc.collect()
    t0 = time.process_time()
    work()
    return (time.process_time() - t0) * 1e3 / CPU_TRIPS


def _trips(store: Any, sids: list[str]) -> None:
    for sid in sids:
        _trip(store, sid)


class RawStatements:
    """The floor under a store call: one statement on one open psycopg AsyncConnection, no
    store around it: an autocommit INSERT of a ~100-byte row for each save, a SELECT by key for
    each read, as many of each as a round trip makes store calls."""

    def __init__(self, schema: str, calls: list[Any]) -> None:
        self.table = f'"{schema}".bench_cpu_floor'
        self.writes = sum(c[0] == "save" for c in calls)
        self.reads = len(calls) - self.writes
        self.row = json.dumps({"role": "user", "content": [{"text": "x" * 60}]})
        self.conn: Any = None

    async def open(self) -> None:
        import psycopg

        self.conn = await psycopg.AsyncConnection.connect(
            PG_DSN, autocommit=True, prepare_threshold=0
        )
        await self.conn.execute(f"CREATE TABLE {self.table} (id bigserial PRIMARY KEY, data text)")

    async def trips(self, n: int) -> None:
        insert = f"INSERT INTO {self.table} (data) VALUES (%s)"
        select = f"SELECT data FROM {self.table} WHERE id = %s"
        for _ in range(n):
            for _ in range(self.writes):
                await self.conn.execute(insert, (self.row,))
            for _ in range(self.reads):
                await (await self.conn.execute(select, (1,))).fetchone()


def client_cpu(blocks: int) -> ClientCpu | str:
    """Interleaved blocks of CPU_TRIPS round trips through MemoryStore and PostgresStore and of
    CPU_TRIPS replays of the PostgreSQL round trip's store calls."""
    import asyncio

    try:
        from interlude.sessions import PostgresStore

        schema = f"bench_cpu_{os.getpid()}"
        pg = PostgresStore(PG_DSN, schema=schema)
    except Exception as exc:  # no server or no driver: say so instead of failing the bench
        return _skipped(exc)
    out, memory = ClientCpu(load=(os.getloadavg()[0], 0.0)), MemoryStore()
    raw = RawStatements(schema, [])
    loop = asyncio.new_event_loop()  # one loop for the replays: its pool stays warm

    def replay(sids: list[str]) -> None:
        loop.run_until_complete(_replay(pg, calls, "rec", sids))

    try:
        for i in range(10):  # warm-up: connections made, statements prepared
            _trip(pg, f"warm{i}")
            _trip(memory, f"warm{i}")
        calls = trip_calls(pg, "rec")
        out.calls = {n: sum(c[0] == n for c in calls) for n in dict.fromkeys(c[0] for c in calls)}
        replay([f"warm-replay{i}" for i in range(10)])
        raw = RawStatements(schema, calls)
        loop.run_until_complete(raw.open())
        loop.run_until_complete(raw.trips(10))
        out.trip_wire = traced(pg, lambda: _trip(pg, "traced"))
        out.replay_wire = traced(pg, lambda: replay(["traced-replay"]))
        for b in range(blocks):
            sids = [f"{b}-{i}" for i in range(CPU_TRIPS)]
            out.memory.append(_cpu_ms(partial(_trips, memory, ["m" + s for s in sids])))
            out.postgres.append(_cpu_ms(partial(_trips, pg, ["p" + s for s in sids])))
            out.replay.append(_cpu_ms(partial(replay, ["r" + s for s in sids])))
            out.raw.append(_cpu_ms(lambda: loop.run_until_complete(raw.trips(CPU_TRIPS))))
    finally:
        pg.close()
        if raw.conn is not None:
            loop.run_until_complete(raw.conn.close())
        loop.close()
        _drop_schema(schema)
    out.load = (out.load[0], os.getloadavg()[0])
    return out


def report_client_cpu(blocks: int) -> None:
    title = "e2) PostgresStore client CPU (time.process_time) per round trip and per store call"
    found = client_cpu(blocks)
    if isinstance(found, str):
        print(f"\n{title}\n   {found}")
        return
    cpu, med = found, statistics.median
    n = sum(cpu.calls.values())
    per_call = [(p - m) / n * 1e3 for p, m in zip(cpu.postgres, cpu.memory, strict=True)]
    print_table(
        title,
        [
            Row("round trip, MemoryStore", cpu.memory, "ms"),
            Row("round trip, PostgresStore", cpu.postgres, "ms"),
            Row("its store calls replayed alone", cpu.replay, "ms"),
            Row("a store call: replayed", [r / n * 1e3 for r in cpu.replay], "us", CPU_TARGET_US),
            Row("a store call: (PG - memory trip)", per_call, "us", CPU_TARGET_US),
            Row("a raw psycopg statement (floor)", [r / n * 1e3 for r in cpu.raw], "us"),
        ],
    )
    named = ", ".join(f"{k} {v}" for k, v in cpu.calls.items())
    print(f"   {n} store calls per round trip ({named}); {blocks} blocks of {CPU_TRIPS} each")
    for what, w in (("round trip", cpu.trip_wire), ("replayed calls", cpu.replay_wire)):
        print(
            f"   wire per {what}: {w.statements} statements, {w.control} BEGIN/COMMIT, "
            f"{w.waits} waits for the server, {w.commits} commits"
        )
    print(
        f"   load average {cpu.load[0]:.1f} before, {cpu.load[1]:.1f} after "
        f"({os.cpu_count()} CPUs); medians {med(cpu.postgres):.2f} ms PG trip, "
        f"{med(cpu.replay) / n * 1e3:.0f} us per replayed call, "
        f"{med(cpu.replay) / med(cpu.raw):.2f}x a raw statement's CPU"
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
    report_client_cpu(3 if quick else 7)
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
