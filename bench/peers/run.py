"""Interlude against its peers (LangGraph, Strands Agents, Pydantic AI, OpenAI Agents SDK): the
same workloads on every side that has them, each in a fresh process of that side's own venv.

Run from the repository root:
    .venv/bin/python bench/peers/run.py [--quick] [--only cycle,approval-memory]
        [--peers langgraph,strands] [--rounds N] [--json FILE] [--markdown]

Rounds are interleaved (round 1: every workload on Interlude, LangGraph, Strands, ...; round 2:
the same again), the load average is recorded per round, and each peer's figure is compared
with Interlude's of the same round. See bench/peers/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "sides")]

import report  # noqa: E402
import venvs  # noqa: E402
from _harness import PLAN, WORKLOADS  # noqa: E402

README = HERE.parents[1] / "README.md"
MARKERS = ("<!-- peers:start -->", "<!-- peers:end -->")
TIMEOUT_S = 900
Round = dict[str, dict[str, dict[str, Any]]]  # {side: {key: result}}


def run_side(
    side: str, workloads: Sequence[str], size: str, python: Path | None = None
) -> dict[str, dict[str, Any]]:
    """One fresh process of ``side``'s venv running ``workloads``: its results by key. A side
    that fails gives each key of those workloads an ``error`` (the end of its stderr)."""
    peer = venvs.SIDES_BY_NAME[side]
    python = python or venvs.python_of(peer)
    command = [str(python), str(peer.script), *workloads, "--size", size]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return _errors(workloads, f"timed out after {TIMEOUT_S} s")
    if done.returncode != 0:
        tail = " ".join(done.stderr.strip().splitlines()[-1:]) or f"exit {done.returncode}"
        return _errors(workloads, tail)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return {r["key"]: r for r in found["results"]}


def _errors(workloads: Sequence[str], message: str) -> dict[str, dict[str, Any]]:
    return {key: {"key": key, "error": message} for w in workloads for key in PLAN[w]}


def run_rounds(
    sides: Sequence[str], workloads: Sequence[str], size: str, rounds: int
) -> tuple[list[Round], list[tuple[float, float, float]]]:
    """``rounds`` interleaved rounds: in each, every workload on every side in turn (each
    its own process), so a slow spell of the machine hits the sides alike."""
    pythons = {side: venvs.python_of(venvs.SIDES_BY_NAME[side]) for side in sides}
    found: list[Round] = []
    loads: list[tuple[float, float, float]] = []
    for number in range(1, rounds + 1):
        loads.append(os.getloadavg())
        print(f"round {number}/{rounds} (load {loads[-1][0]:.2f}) ...", file=sys.stderr, flush=True)
        this: Round = {side: {} for side in sides}
        for workload in workloads:
            for side in sides:
                this[side].update(run_side(side, [workload], size, pythons[side]))
        found.append(this)
    return found, loads


def machine() -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()} {platform.machine()}",
    }


def describe(record: dict[str, Any]) -> str:
    """One sentence on when, where and under what load the figures were taken."""
    m = record["machine"]
    ones = [load[0] for load in record["loads"]]
    return (
        f"Measured {record['date']} on {m['cores']} cores, Python {m['python']}, "
        f"{len(record['rounds'])} rounds ({record['size']} size), load average (1 min) "
        f"{min(ones):.1f}-{max(ones):.1f} over the rounds."
    )


def markdown(record: dict[str, Any], summaries: list[report.KeySummary]) -> str:
    labels = {p.name: p.label for p in (venvs.INTERLUDE, *venvs.PEERS)}
    lines = [
        "",
        f"{describe(record)} Each peer's cell is its time over Interlude's in the same round, "
        "wall / CPU: the median over the rounds (min-max); above 1 the peer takes longer. "
        "n/a: the peer has no such feature; over budget: a run of 1,000 turns took over 10 s; "
        "error: the run raised. Strands has no SQLite store: its durable rows run on its "
        "FileSessionManager (JSON files). Why n/a, and which API each side runs: "
        "[bench/peers/README.md](bench/peers/README.md).",
        "",
        *report.markdown_table(summaries, labels),
        "",
    ]
    return "\n".join(lines)


def write_readme(text: str) -> None:
    current = README.read_text()
    README.write_text(report.replace_between(current, *MARKERS, text))


def _names(value: str, allowed: Sequence[str], what: str) -> list[str]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = sorted(set(names) - set(allowed))
    if unknown:
        raise SystemExit(f"unknown {what} {unknown}; choose from {', '.join(allowed)}")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and rounds")
    parser.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated workloads")
    peer_names = [p.name for p in venvs.PEERS]
    parser.add_argument("--peers", default=",".join(peer_names), help="comma-separated peers")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 3, quick 2)")
    parser.add_argument("--json", metavar="FILE", help="write every round's figures here")
    parser.add_argument("--markdown", action="store_true", help="rewrite the README's table")
    parser.add_argument("--repin", action="store_true", help="pin the newest releases; exit")
    args = parser.parse_args()
    peers = _names(args.peers, peer_names, "peers")
    if args.repin:
        venvs.repin(tuple(p for p in venvs.PEERS if p.name in peers))
        return
    workloads = _names(args.only, WORKLOADS, "workloads")
    sides = [venvs.INTERLUDE.name, *peers]
    size = "quick" if args.quick else "full"
    rounds = args.rounds or (2 if args.quick else 3)
    started = time.perf_counter()
    found, loads = run_rounds(sides, workloads, size, rounds)
    record = {
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "size": size,
        "sides": sides,
        "loads": loads,
        "rounds": found,
    }
    summaries = report.summarize(found, sides)
    labels = {p.name: p.label for p in (venvs.INTERLUDE, *venvs.PEERS)}
    print(describe(record))
    print("Ratios: the peer's time over Interlude's in the same round; median (min-max).")
    per_round = ", ".join("/".join(f"{x:.2f}" for x in load) for load in loads)
    print(f"Load average at the start of each round (1/5/15 min): {per_round}")
    print(report.text_tables(summaries, labels))
    print(f"\ntotal time: {time.perf_counter() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1))
    if args.markdown:
        write_readme(markdown(record, summaries))
        print(f"rewrote the peer table in {README}")


if __name__ == "__main__":
    main()
