"""What every side of the peer benchmarks shares: timing, the command line, the JSON it prints.

Standard library only: this module runs inside each peer's own venv. A side script defines one
async function per workload and hands them to :func:`main`, which runs the workloads named on
its command line and prints one JSON object: ``{"side": ..., "python": ..., "results": [...]}``,
each result either a figure (wall and CPU time per unit, medians over repetitions) or an
``na`` saying why the side cannot run that workload.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

Size = Literal["tiny", "quick", "full"]
UNITS = {"us": 1e6, "ms": 1e3}

# Every workload and its sizes: {size: (per-run units, repetitions)} keyed by the figure's key.
# The keys are what the runner compares across sides; the same on every side.
PLAN: dict[str, dict[str, dict[Size, tuple[int, int]]]] = {
    "cycle": {
        "cycle-20": {"tiny": (2, 1), "quick": (20, 5), "full": (20, 15)},
        "cycle-200": {"tiny": (3, 1), "quick": (200, 1), "full": (200, 3)},
        "cycle-1000": {"tiny": (4, 1), "quick": (1000, 1), "full": (1000, 1)},
    },
    "journal": {
        "journal-20": {"tiny": (2, 1), "quick": (20, 3), "full": (20, 8)},
        "journal-200": {"tiny": (3, 1), "quick": (200, 1), "full": (200, 2)},
        "journal-1000": {"tiny": (4, 1), "quick": (1000, 1), "full": (1000, 1)},
    },
    "approval-memory": {"approval-memory": {"tiny": (1, 2), "quick": (1, 30), "full": (1, 100)}},
    "approval-sqlite": {"approval-sqlite": {"tiny": (1, 2), "quick": (1, 10), "full": (1, 30)}},
    "graph-sqlite": {"graph-sqlite": {"tiny": (1, 2), "quick": (1, 8), "full": (1, 20)}},
    "resume": {
        "resume-10": {"tiny": (10, 1), "quick": (10, 3), "full": (10, 8)},
        "resume-1000": {"tiny": (30, 1), "quick": (1000, 3), "full": (1000, 8)},
    },
    "postgres": {"postgres": {"tiny": (1, 2), "quick": (1, 10), "full": (1, 25)}},
    "import": {"import": {"tiny": (1, 1), "quick": (1, 3), "full": (1, 7)}},
}
WORKLOADS = tuple(PLAN)
WARMUP: dict[Size, int] = {"tiny": 0, "quick": 2, "full": 5}
LONG = 1000  # a run of this many turns gets no warm-up and at most BUDGET_S of wall time
BUDGET_S = 10.0
PG_DSN = os.environ.get("INTERLUDE_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")


@dataclass(frozen=True, kw_only=True)
class Figure:
    """One measured key: medians of wall and CPU time per unit, in ``unit``."""

    key: str
    unit: str
    wall: float
    cpu: float
    reps: int
    per: int  # units per repetition (cycles, round trips, history length for resume-*)
    api: str

    def as_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class NotApplicable:
    """A key this side has no figure for, and why: ``na`` (no such feature), ``over`` (a run
    took longer than the budget allows) or ``error`` (a run raised)."""

    key: str
    na: str = ""
    over: str = ""
    error: str = ""

    def as_json(self) -> dict[str, object]:
        return {k: v for k, v in asdict(self).items() if v}


Result = Figure | NotApplicable
Thunk = Callable[[], Awaitable[object]]
Prepare = Callable[[int], Awaitable[Thunk]]


@dataclass(frozen=True, kw_only=True)
class Job:
    """What a workload function is asked to measure: one key at one size."""

    key: str
    per: int
    reps: int
    warmup: int
    tmp: str  # a private directory for database files, removed afterwards
    budget_s: float | None = None  # a run taking longer is stopped: the key is "over budget"


async def measure(job: Job, prepare: Prepare, *, unit: str, api: str, per: int = 0) -> Result:
    """Time ``job.reps`` runs of what ``prepare(i)`` returns (after ``job.warmup`` untimed
    ones); ``prepare`` itself is not timed. Wall is ``perf_counter``, CPU ``process_time``
    (every thread of this process), each divided by ``per`` (default ``job.per``). A run
    over ``job.budget_s`` is cancelled (at its next await: a side whose runs never await
    cannot be stopped) and the key reported as over budget."""
    per = per or job.per
    walls: list[float] = []
    cpus: list[float] = []
    for i in range(job.warmup + job.reps):
        run = await prepare(i)
        gc.collect()
        c0, w0 = time.process_time(), time.perf_counter()
        try:
            await asyncio.wait_for(run(), job.budget_s)
        except TimeoutError:
            per_unit = job.budget_s * UNITS[unit] / per if job.budget_s else 0.0
            return NotApplicable(
                key=job.key,
                over=f"one run of {job.per:,} took over {job.budget_s:g} s wall "
                f"(> {per_unit:,.0f} {unit} each)",
            )
        w1, c1 = time.perf_counter(), time.process_time()
        if i >= job.warmup:
            walls.append((w1 - w0) * UNITS[unit] / per)
            cpus.append((c1 - c0) * UNITS[unit] / per)
    return Figure(
        key=job.key,
        unit=unit,
        wall=statistics.median(walls),
        cpu=statistics.median(cpus),
        reps=job.reps,
        per=per,
        api=api,
    )


def import_time(job: Job, code: str) -> Figure:
    """ms to run ``python -c code`` in a fresh interpreter of this venv, net of ``python -c
    pass`` (interleaved), wall and the children's CPU time (user + system)."""

    def once(source: str) -> tuple[float, float]:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", source], check=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return wall * 1e3, cpu * 1e3

    once(code)  # bytecode written, files in the OS cache
    bare: list[tuple[float, float]] = []
    full: list[tuple[float, float]] = []
    for _ in range(job.reps + 1):
        bare.append(once("pass"))
        full.append(once(code))
    base_wall = statistics.median(w for w, _ in bare)
    base_cpu = statistics.median(c for _, c in bare)
    return Figure(
        key=job.key,
        unit="ms",
        wall=statistics.median(w - base_wall for w, _ in full),
        cpu=statistics.median(c - base_cpu for _, c in full),
        reps=job.reps + 1,
        per=1,
        api=code,
    )


def history_texts(n: int) -> list[tuple[str, str]]:
    """The ``n`` messages of history the resume workloads start from, as (role, text)."""
    return [("user" if i % 2 == 0 else "assistant", f"message {i} " + "x" * 200) for i in range(n)]


Workload = Callable[[Job], Awaitable[Result]]


def not_applicable(reason: str) -> Workload:
    """A workload this side does not take part in."""

    async def run(job: Job) -> Result:
        return NotApplicable(key=job.key, na=reason)

    return run


async def run_workloads(
    side: str, table: dict[str, Workload], names: Sequence[str], size: Size
) -> list[Result]:
    results: list[Result] = []
    for name in names:
        for key, sizes in PLAN[name].items():
            per, reps = sizes[size]
            with tempfile.TemporaryDirectory(prefix=f"peers-{side}-") as tmp:
                long = per >= LONG
                warmup = 0 if long else WARMUP[size] if per < 200 else min(1, WARMUP[size])
                budget = BUDGET_S if long else None
                job = Job(key=key, per=per, reps=reps, warmup=warmup, tmp=tmp, budget_s=budget)
                try:
                    results.append(await table[name](job))
                except Exception as exc:  # this key fails; the others still get measured
                    detail = " ".join(str(exc).split())[:300]
                    results.append(NotApplicable(key=key, error=f"{type(exc).__name__}: {detail}"))
    return results


def main(side: str, table: dict[str, Workload]) -> None:
    """The command line of a side: ``<side>.py WORKLOAD... [--size tiny|quick|full]``."""
    parser = argparse.ArgumentParser(description=f"the {side} side of bench/peers")
    parser.add_argument("workloads", nargs="+", choices=WORKLOADS)
    parser.add_argument("--size", choices=("tiny", "quick", "full"), default="full")
    args = parser.parse_args()
    missing = set(WORKLOADS) - set(table)
    if missing:
        raise SystemExit(f"side {side!r} lacks workloads {sorted(missing)}")
    results = asyncio.run(run_workloads(side, table, args.workloads, args.size))
    out = {
        "side": side,
        "python": platform.python_version(),
        "results": [r.as_json() for r in results],
    }
    print(json.dumps(out))
