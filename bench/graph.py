"""A graph at the cost of its agents: a two-node graph's pause + fresh resume on SQLiteStore,
beside the same two agents' work alone.

Run alone with  .venv/bin/python bench/graph.py [--quick] [--profile]

The graph: ``research -> writer``, each node one model call and no tool; the writer's
before-model-call hook asks for approval, so the graph pauses after research finished. A
freshly built ``Graph`` on the same ``SQLiteStore`` session resumes it (the writer's model
answers). Alone: the same two agents (research on its own session, the writer on its own),
research run, the writer run to its pause, then a freshly built writer resumed. Both timed from
building the first object to the resume's end, in interleaved rounds: CPU (time.process_time,
the figure to trust on a loaded machine) and wall, their ratio per round (median and range),
the store calls and SQLite transactions per round trip. Issue 37's target: the graph's round
trip costs at most 1.3x the agents' alone (CPU). ``--profile``: the graph round trip's top
functions by own time under cProfile.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import os
import pstats
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import Metered

from interlude import Agent
from interlude.hooks import BeforeModelCallEvent
from interlude.multiagent import Graph
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel

RATIO_TARGET = 1.3
WARM_UP = 5
PROMPT = "Plan a trip in May"
RESEARCH = "Lisbon and Porto are warm in May."
WRITER = "Five days in Lisbon."
# What the graph gives the writer (the task and research's reply): the writer alone gets it too.
WRITER_PROMPT = f"{PROMPT}\n\nInputs from earlier nodes:\nFrom research:\n{RESEARCH}"


def _approve(event: BeforeModelCallEvent) -> None:
    if event.interrupt("approve", reason="call the model?") is not True:
        raise RuntimeError("not approved")


def _research(replies: list[Any]) -> Agent:
    return Agent(ScriptedModel(replies), name="research")


def _writer(replies: list[Any], store: Any = None, sid: str | None = None) -> Agent:
    kw: dict[str, Any] = {} if store is None else {"session": store, "session_id": sid}
    agent = Agent(ScriptedModel(replies), name="writer", **kw)
    agent.hooks.add_callback(BeforeModelCallEvent, _approve)
    return agent


def _graph(store: Any, sid: str, research: list[Any], writer: list[Any]) -> Graph:
    return Graph(
        {"research": _research(research), "writer": _writer(writer)},
        [("research", "writer")],
        entry="research",
        session=store,
        session_id=sid,
    )


async def graph_trip(store: Any, sid: str) -> None:
    """The graph pauses (research done, the writer asks); a fresh graph resumes it."""
    paused = await _graph(store, sid, [RESEARCH], [WRITER]).invoke_async(PROMPT)
    (question,) = paused.interrupts
    fresh = _graph(store, sid, [], [WRITER])
    done = await fresh.resume_async({question.id: True})
    assert done.stop_reason == "end_turn" and str(done) == WRITER, done


async def agents_trip(store: Any, sid: str) -> None:
    """The same agents alone: research runs, the writer pauses, a fresh writer resumes."""
    research = Agent(ScriptedModel([RESEARCH]), name="research", session=store, session_id=sid)
    assert str(await research.invoke_async(PROMPT)) == RESEARCH
    paused = await _writer([WRITER], store, f"{sid}:w").invoke_async(WRITER_PROMPT)
    (question,) = paused.interrupts
    fresh = _writer([WRITER], store, f"{sid}:w")
    done = await fresh.resume_async({question.id: True})
    assert done.stop_reason == "end_turn" and str(done) == WRITER, done


Trip = Callable[[Any, str], Any]
TRIPS: dict[str, Trip] = {"graph": graph_trip, "agents alone": agents_trip}


class Counting(Metered):
    """A metered store whose SQLite transactions are counted too (BEGIN statements seen by
    the connection's trace callback)."""

    def __init__(self, store: SQLiteStore) -> None:
        super().__init__(store)
        self.transactions = 0
        self.others = 0  # store calls other than load and save
        conn: sqlite3.Connection = store._conn  # type: ignore[assignment]  # bench only
        conn.set_trace_callback(self._traced)

    def _traced(self, statement: str) -> None:
        if statement.startswith("BEGIN"):
            self.transactions += 1

    def __getattr__(self, name: str) -> Any:  # the protocol's other calls, counted
        found = getattr(self.store, name)
        if not callable(found):
            return found

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.others += 1
            return found(*args, **kwargs)

        return counted

    def counts(self) -> tuple[int, int, int, int]:
        return self.loads, self.saves, self.others, self.transactions


@dataclass
class Samples:
    cpu_ms: list[float] = field(default_factory=list)  # per round trip, one value per round
    wall_ms: list[float] = field(default_factory=list)
    calls: tuple[int, ...] = (0, 0, 0, 0)  # per round trip: loads, saves, other calls, transactions


def one_round(trip: Trip, store: Counting, prefix: str, trips: int, into: Samples | None) -> None:
    """``trips`` round trips in a row, on sessions of their own; CPU and wall per trip."""
    before = store.counts()
    gc.collect()
    c0, w0 = time.process_time(), time.perf_counter()
    for i in range(trips):
        asyncio.run(trip(store, f"{prefix}-{i}"))
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    if into is not None:
        into.cpu_ms.append(cpu / trips * 1e3)
        into.wall_ms.append(wall / trips * 1e3)
        into.calls = tuple((a - b) // trips for a, b in zip(store.counts(), before, strict=True))


def measure(rounds: int, trips: int) -> dict[str, Samples]:
    """Interleaved rounds (the order swapped every round), the first ``WARM_UP`` not kept."""
    found = {name: Samples() for name in TRIPS}
    with tempfile.TemporaryDirectory() as tmp:
        store = Counting(SQLiteStore(Path(tmp) / "graph.db"))
        for r in range(rounds + WARM_UP):
            names = list(TRIPS) if r % 2 == 0 else list(reversed(TRIPS))
            for name in names:
                into = found[name] if r >= WARM_UP else None
                one_round(TRIPS[name], store, f"{name[0]}{r}", trips, into)
        store.close()
    return found


def profile(top: int, rounds: int = 40) -> list[str]:
    """The graph round trip's largest own-time functions, in CPU microseconds per round trip
    (cProfile on time.process_time; it adds about a microsecond per call, so read shares)."""
    prof = cProfile.Profile(time.process_time)
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "profile.db")
        for i in range(WARM_UP):
            asyncio.run(graph_trip(store, f"w{i}"))
        prof.enable()
        for i in range(rounds):
            asyncio.run(graph_trip(store, f"p{i}"))
        prof.disable()
        store.close()
    stats: dict[Any, Any] = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    total_calls = sum(row[1] for row in stats.values()) / rounds
    total_own = sum(row[2] for row in stats.values()) / rounds * 1e6
    lines = [f"   {total_own:8.0f} us CPU under cProfile, {total_calls:.0f} calls per round trip"]
    rows = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)
    for (file, line, name), (_, calls, own, cum, _callers) in rows[:top]:
        where = f"{Path(file).name}:{line}({name})" if line else name
        per, cum_per, count = own / rounds * 1e6, cum / rounds * 1e6, calls / rounds
        lines.append(f"   {per:8.0f} us  {cum_per:8.0f} us cum  {count:6.0f} calls  {where}")
    return lines


def _fmt(values: list[float]) -> str:
    return f"{statistics.median(values):7.2f}  ({min(values):.2f} - {max(values):.2f})"


def run(quick: bool, with_profile: bool) -> None:
    load = os.getloadavg()
    rounds, trips = (8, 3) if quick else (30, 5)
    found = measure(rounds, trips)
    print(
        f"\ngraph round trip vs the same agents alone, SQLiteStore: {rounds} interleaved rounds "
        f"of {trips} round trips each (load average {load[0]:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after; {os.cpu_count()} CPUs)"
    )
    print("   per round trip: median (min - max) over the rounds")
    for name, s in found.items():
        loads, saves, others, tx = s.calls
        print(
            f"   {name:13} CPU {_fmt(s.cpu_ms)} ms   wall {_fmt(s.wall_ms)} ms   "
            f"store: {loads} loads, {saves} saves, {others} other; {tx} SQLite transactions"
        )
    g, a = found["graph"], found["agents alone"]
    cpu = [x / y for x, y in zip(g.cpu_ms, a.cpu_ms, strict=True)]
    wall = [x / y for x, y in zip(g.wall_ms, a.wall_ms, strict=True)]
    median = statistics.median(cpu)
    verdict = "PASS" if median <= RATIO_TARGET else "FAIL"
    print(
        f"   graph / agents alone, per round: CPU {_fmt(cpu)}x   wall {_fmt(wall)}x   "
        f"target CPU <= {RATIO_TARGET}x  {verdict}"
    )
    if with_profile:
        print("   where the graph round trip spends its CPU (own time, cProfile):")
        for line in profile(30):
            print(line)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    run(args.quick, args.profile)
