"""Resume against history: a fresh agent's resume after a 10-message and a 1,000-message talk.

Run alone with  .venv/bin/python bench/resume.py [--quick]  (bench/bench.py runs it too).

i) On SQLiteStore: an agent with ``n`` messages of history pauses at a before-tool approval; a
freshly built agent (it loads the session) resumes it (the tool runs, the model answers).
Timed: building the fresh agent and its resume, medians over interleaved rounds. The issue's
target is a resume after 1,000 messages within 2x one after 10; the figures below say how far
that is, and where the time goes (store read, JSON, messages decoded) for the long one.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from common import Row, print_table
from sessions import agent_for

from interlude import Message, Text, ToolUse
from interlude.sessions import SQLiteStore

GROWTH_TARGET = 2.0  # issue 37: after 1,000 messages <= 2x after 10
SHORT, LONG = 10, 1000


def _history(n: int) -> list[Message]:
    return [
        Message("user" if i % 2 == 0 else "assistant", [Text(f"message {i} " + "x" * 200)])
        for i in range(n)
    ]


def fresh_resume_ms(store: Any, sid: str, history: int, profile: Any = None) -> float:
    """ms for building a fresh agent on a paused ``history``-message session and resuming it."""
    agent = agent_for(store, sid, ["ok", [ToolUse("t1", "act", {"item": "x"})]], _history(history))
    agent("warm up")  # stores the history
    paused = agent("one more")
    gc.collect()
    if profile is not None:
        profile.enable()
    t0 = time.perf_counter()
    fresh = agent_for(store, sid, ["done"])
    result = fresh.resume({paused.interrupts[0].id: True})
    elapsed = (time.perf_counter() - t0) * 1e3
    if profile is not None:
        profile.disable()
    assert result.stop_reason == "end_turn"
    return elapsed


def measure(rounds: int) -> dict[int, list[float]]:
    found: dict[int, list[float]] = {SHORT: [], LONG: []}
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "resume.db")
        for r in range(rounds + 3):  # interleaved; the first three are warm-up
            for n, samples in found.items():
                ms = fresh_resume_ms(store, f"r{n}-{r}", n)
                if r >= 3:
                    samples.append(ms)
        store.close()
    return found


def where_it_goes(top: int = 8) -> list[str]:
    """The long resume's largest own-time functions under cProfile (shares, not timings)."""
    profile = cProfile.Profile()
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "profile.db")
        for i in range(3):
            fresh_resume_ms(store, f"p{i}", LONG, profile)
        store.close()
    stats = pstats.Stats(profile)
    total = sum(row[2] for row in stats.stats.values())
    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)
    lines = []
    for (file, line, name), (_, calls, own, *_rest) in rows[:top]:
        where = f"{Path(file).name}:{line}({name})" if line else name
        lines.append(f"      {own / total:5.1%}  {calls:>6} calls  {where}")
    return lines


def run(quick: bool) -> None:
    found = measure(5 if quick else 30)
    rows = [Row(f"fresh agent + resume after {n:,} messages", v, "ms") for n, v in found.items()]
    print_table("i) resume against history, SQLiteStore (fresh agent built, then resumed)", rows)
    ratio = statistics.median(found[LONG]) / statistics.median(found[SHORT])
    verdict = "PASS" if ratio <= GROWTH_TARGET else "FAIL"
    print(
        f"   after {LONG:,} / after {SHORT}: {ratio:.2f}x  target <= {GROWTH_TARGET}x  {verdict} "
        "(every message is read and decoded: the next model call sends them all)"
    )
    print(f"   where the {LONG:,}-message resume spends its time (own time, cProfile):")
    for line in where_it_goes():
        print(line)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    run(parser.parse_args().quick)
