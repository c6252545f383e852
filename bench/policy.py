"""Approval policies: replaying 1,000 stored sessions under a candidate, and a policy's cost per
tool call in the loop.

Run alone with  .venv/bin/python bench/policy.py [--quick] [--sessions N]

i) Replay: N sessions (default 1,000) are run live on SQLite under one policy (a payment each,
   asked, approved, declined or edited by turns, or allowed; every tenth a denied wipe), then
   ``candidate.replay(store)`` is timed, fresh store object each round. Issue 38's target: under
   10 s for 1,000 sessions, with 0 model calls and 0 tool runs (both counted here).
ii) Per call: a 200-cycle in-memory run whose tool calls are all allowed, without a policy, with
   a one-rule CEL policy, a one-rule Python-function policy, and a CEL policy plus a shadow;
   medians of interleaved rounds, us per cycle.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from common import Row, print_table

from interlude import Agent, ToolUse, tool
from interlude.policy import Policy, PolicyCall, Rule
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel

REPLAY_TARGET_S = 10.0  # issue 38: 1,000 sessions in under 10 s

LIVE = Policy(
    [
        Rule(tool="pay", when="input.amount > 100", then="ask"),
        Rule(tool="pay", then="allow"),
        Rule(tool="wipe", then="deny"),
    ],
    version="live",
)
CANDIDATE = Policy(
    [
        Rule(tool="pay", when="input.amount > 200", then="deny"),
        Rule(tool="pay", when="input.amount > 50", then="ask"),
        Rule(tool="pay", then="allow"),
        Rule(tool="wipe", then="ask"),
    ],
    version="candidate",
)


class Counted:
    """A model that counts its calls (the replay must make none)."""

    def __init__(self, turns: list[Any]) -> None:
        self.inner = ScriptedModel(turns)
        self.calls = 0

    def stream(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.inner.stream(*args, **kwargs)


RUNS = {"tools": 0, "model": 0}


@tool
def pay(amount: int) -> str:
    """Pay."""
    RUNS["tools"] += 1
    return f"paid {amount}"


@tool
def wipe() -> str:
    """Wipe."""
    RUNS["tools"] += 1
    return "wiped"


def build(path: Path, sessions: int) -> None:
    store = SQLiteStore(path)
    for i in range(sessions):
        use = (
            ToolUse("c1", "wipe", {}) if i % 10 == 9 else ToolUse("c1", "pay", {"amount": i % 300})
        )
        model = Counted([[use], "ok"])
        agent = Agent(model, tools=[pay, wipe], policy=LIVE, session=store, session_id=f"s{i}")
        result = agent("go")
        if result.stop_reason == "interrupt":
            [q] = result.interrupts
            answer: Any = (True, False, {"approve": True, "input": {"amount": 1}})[i % 3]
            agent.resume({q.id: answer})
        RUNS["model"] += model.calls
    store.close()


def bench_replay(sessions: int, rounds: int) -> tuple[list[Row], str]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "sessions.db"
        t0 = time.perf_counter()
        build(path, sessions)
        built_s = time.perf_counter() - t0
        before = dict(RUNS)
        wall: list[float] = []
        cpu: list[float] = []
        report = None
        for _ in range(rounds):
            store = SQLiteStore(path)
            w0, c0 = time.perf_counter(), time.process_time()
            report = asyncio.run(CANDIDATE.replay(store))
            wall.append(time.perf_counter() - w0)
            cpu.append(time.process_time() - c0)
            store.close()
        assert report is not None and report.calls == sessions
        assert before == RUNS, "a tool ran or the model was called during a replay"
    note = (
        f"   {sessions:,} sessions built live in {built_s:.1f} s; the replay examined "
        f"{report.calls:,} calls: would {dict(report.would)}, {len(report.changes)} changes, "
        f"{len(report.unjudged)} unjudged; model calls and tool runs during replays: 0"
    )
    rows = [
        Row(f"replay of {sessions:,} sessions (wall)", wall, "s", REPLAY_TARGET_S),
        Row(f"replay of {sessions:,} sessions (CPU)", cpu, "s"),
        Row("per session (wall)", [w / sessions * 1e6 for w in wall], "us"),
    ]
    return rows, note


def _cycle_agent(cycles: int, **policy: Any) -> Agent:
    turns: list[Any] = [[ToolUse(f"t{i}", "add", {"x": i})] for i in range(cycles)]

    @tool(inline=True)
    def add(x: int) -> int:
        """Add."""
        return x + 1

    return Agent(ScriptedModel([*turns, "done"]), tools=[add], max_cycles=cycles + 1, **policy)


def _by_function(call: PolicyCall) -> bool:
    return call.input.get("x", 0) >= 0


KINDS = {
    "no policy": {},
    "CEL policy (1 rule)": {
        "policy": Policy([Rule(tool="add", when="input.x >= 0", then="allow")])
    },
    "Python policy (1 rule)": {
        "policy": Policy([Rule(tool="add", when=_by_function, then="allow")])
    },
    "CEL policy + shadow": {
        "policy": Policy([Rule(tool="add", when="input.x >= 0", then="allow")]),
        "shadow": Policy([Rule(tool="add", then="ask")]),
    },
}


def bench_per_call(cycles: int, rounds: int) -> list[Row]:
    found: dict[str, list[float]] = {k: [] for k in KINDS}
    for r in range(rounds + 1):  # interleaved; the first round warms up
        for kind, options in KINDS.items():
            agent = _cycle_agent(cycles, **options)
            t0 = time.perf_counter()
            result = agent("go")
            us = (time.perf_counter() - t0) / cycles * 1e6
            assert str(result) == "done"
            if r:
                found[kind].append(us)
    base = statistics.median(found["no policy"])
    rows = []
    for kind, samples in found.items():
        extra = "" if kind == "no policy" else f" (+{statistics.median(samples) - base:.1f})"
        rows.append(Row(f"cycle, {kind}{extra}", samples, "us/cycle"))
    return rows


def run(quick: bool, sessions: int = 1000) -> None:
    """The section as bench/bench.py runs it (``quick``: 200 sessions, fewer rounds)."""
    rounds = 3 if quick else 7
    sessions = min(sessions, 200) if quick else sessions
    rows, note = bench_replay(sessions, rounds)
    print_table("i) replay under a candidate policy, SQLiteStore", rows)
    print(note)
    print_table(
        "ii) a policy's cost per tool call (200 cycles, in memory)", bench_per_call(200, rounds)
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sessions", type=int, default=1000)
    args = parser.parse_args()
    run(args.quick, args.sessions)


if __name__ == "__main__":
    main()
