"""Interlude benchmarks: import time, loop overhead, pause+resume round trip, session stores.

Run from the repository root:  .venv/bin/python bench/bench.py  [--quick]

Everything runs offline on ScriptedModel. Figures are wall-clock and machine-dependent; the
targets are the budgets the project holds itself to on an ordinary laptop.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from interlude import Agent, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent, HookCallback, HookRegistry
from interlude.testing import ScriptedModel

IMPORT_TARGET_MS = 80.0
CYCLE_TARGET_US = 150.0
RATIO_TARGET = 1.5
ROUND_TRIP_TARGET_US = 500.0
PAUSE_SIZE_TARGET = 2048


@dataclass
class Row:
    name: str
    samples: Sequence[float]  # already in the unit shown
    unit: str
    target: float | None = None  # the median must be <= target

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def cells(self) -> list[str]:
        verdict, goal = "", ""
        if self.target is not None:
            goal = f"<= {self.target:g} {self.unit}"
            verdict = "PASS" if self.median <= self.target else "FAIL"
        figures = (self.median, min(self.samples), max(self.samples))
        return [self.name, *(f"{x:,.1f}" for x in figures), self.unit, goal, verdict]


def print_table(title: str, rows: list[Row]) -> None:
    head = ["benchmark", "median", "min", "max", "unit", "target", ""]
    body = [r.cells() for r in rows]
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]
    right = {1, 2, 3}

    def fmt(line: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(line, widths, strict=True))
        ).rstrip()

    print(f"\n{title}")
    print(fmt(head))
    print("  ".join("-" * w for w in widths))
    for line in body:
        print(fmt(line))


# --- a) import time ----------------------------------------------------------------------------


def _start_ms(code: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return (time.perf_counter() - t0) * 1e3


def bench_import(runs: int) -> list[Row]:
    codes = {
        "pass": "pass",
        "import": "import interlude",
        "names": "from interlude import Agent, tool",
    }
    for code in codes.values():  # warm the OS cache and write bytecode
        _start_ms(code)
    times: dict[str, list[float]] = {k: [] for k in codes}
    for _ in range(runs):  # interleaved so drift hits every variant alike
        for key, code in codes.items():
            times[key].append(_start_ms(code))
    base = statistics.median(times["pass"])
    rows = [Row("python -c pass (baseline, gross)", times["pass"], "ms")]
    for key in ("import", "names"):
        net = [t - base for t in times[key]]
        rows.append(Row(f"{codes[key]} (net)", net, "ms", IMPORT_TARGET_MS))
    return rows


# --- b) loop overhead per cycle --------------------------------------------------------------


@tool
async def noop_async() -> str:
    """Do nothing."""
    return "ok"


@tool
def noop_sync() -> str:
    """Do nothing, in a worker thread."""
    return "ok"


class BeforeToolHook:
    def __init__(self, callback: HookCallback[BeforeToolCallEvent]) -> None:
        self.callback = callback

    def register_hooks(self, registry: HookRegistry) -> None:
        registry.add_callback(BeforeToolCallEvent, self.callback)


def loop_agent(cycles: int, tool_obj: Any) -> Agent:
    turns: list[Any] = [[ToolUse(f"t{i}", tool_obj.name, {})] for i in range(cycles)]
    hook = BeforeToolHook(lambda event: None)
    return Agent(ScriptedModel([*turns, "done"]), [tool_obj], [hook], max_cycles=cycles + 1)


def paused_agent() -> Agent:
    hook = BeforeToolHook(lambda event: event.interrupt("approve"))
    return Agent(ScriptedModel([[ToolUse("t1", "noop_async", {})], "done"]), [noop_async], [hook])


# Each timed run: invoke, and if it paused, resume with every interrupt approved. The agent is
# built outside the timed region; samples are microseconds divided by `per` (cycles per run).


def time_sync(make: Callable[[], Agent], reps: int, per: int = 1) -> list[float]:
    out = []
    for _ in range(reps):
        agent = make()
        gc.collect()
        t0 = time.perf_counter()
        result = agent("go")
        if result.stop_reason == "interrupt":
            result = agent.resume({i.id: True for i in result.interrupts})
        out.append((time.perf_counter() - t0) * 1e6 / per)
        assert result.stop_reason == "end_turn", result
    return out


async def _time_async(make: Callable[[], Agent], reps: int, per: int = 1) -> list[float]:
    out = []
    for _ in range(reps):
        agent = make()
        gc.collect()
        t0 = time.perf_counter()
        result = await agent.invoke_async("go")
        if result.stop_reason == "interrupt":
            result = await agent.resume_async({i.id: True for i in result.interrupts})
        out.append((time.perf_counter() - t0) * 1e6 / per)
        assert result.stop_reason == "end_turn", result
    return out


def time_async(make: Callable[[], Agent], reps: int, per: int = 1) -> list[float]:
    return asyncio.run(_time_async(make, reps, per))


def bench_loop(reps: dict[int, int]) -> tuple[list[Row], dict[str, float]]:
    kinds = {"sync": time_sync, "async": time_async}
    for fn in kinds.values():  # warm-up: imports, pydantic validators, the sync runner
        fn(lambda: loop_agent(10, noop_async), 20)
        fn(lambda: loop_agent(10, noop_sync), 5)
    rows: list[Row] = []
    ratios: dict[str, float] = {}
    for kind, fn in kinds.items():
        medians: dict[int, float] = {}
        for cycles, n in reps.items():
            target = CYCLE_TARGET_US if cycles == 10 else None
            samples = fn(partial(loop_agent, cycles, noop_async), n, cycles)
            rows.append(Row(f"{kind}, {cycles} cycle(s), async tool", samples, "us", target))
            medians[cycles] = rows[-1].median
        ratios[kind] = medians[200] / medians[10]
    thread_hop = time_sync(lambda: loop_agent(10, noop_sync), reps[10], 10)
    rows.append(Row("sync, 10 cycles, SYNC tool (thread hop)", thread_hop, "us"))
    return rows, ratios


def bench_pause_resume(reps: int) -> tuple[list[Row], int]:
    time_sync(paused_agent, 20)  # warm-up
    sync_samples = time_sync(paused_agent, reps)
    async_samples = time_async(paused_agent, reps + 20)[20:]
    agent = paused_agent()
    agent("go")
    size = len(json.dumps(agent.export_state()["pause"]))
    return [
        Row("agent('go') + agent.resume({id: True})", sync_samples, "us", ROUND_TRIP_TARGET_US),
        Row("async: invoke_async + resume_async (info)", async_samples, "us"),
    ], size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few repetitions: a smoke run")
    args = parser.parse_args()
    quick: bool = args.quick
    started = time.perf_counter()
    runs = 5 if quick else 21
    loop_reps = {1: 50, 10: 20, 200: 3} if quick else {1: 600, 10: 200, 200: 25}

    mode = "quick" if quick else "full"
    print(f"Interlude benchmarks ({mode}) - Python {sys.version.split()[0]}")
    print_table(f"a) import time, {runs} interleaved fresh interpreters", bench_import(runs))
    rows, ratios = bench_loop(loop_reps)
    print_table("b) loop overhead per model-turn + tool cycle (per cycle)", rows)
    for kind, ratio in ratios.items():
        verdict = "PASS" if ratio <= RATIO_TARGET else "FAIL"
        print(
            f"   {kind}: 200-cycle / 10-cycle per-cycle median ratio {ratio:.2f}  "
            f"target <= {RATIO_TARGET}x  {verdict}"
        )
    rows, size = bench_pause_resume(50 if quick else 400)
    print_table("c) pause + resume round trip, one before-tool interrupt, in memory", rows)
    verdict = "PASS" if size < PAUSE_SIZE_TARGET else "FAIL"
    print(
        f"   json.dumps(export_state()['pause']): {size} bytes  "
        f"target < {PAUSE_SIZE_TARGET} bytes  {verdict}"
    )
    import sessions  # bench/sessions.py: the session-store figures

    sessions.run(quick)
    print(f"\ntotal bench time: {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
