"""Interlude against its peers (LangGraph, Strands Agents, Pydantic AI, OpenAI Agents SDK): the
same workloads on every side that has them, each in a fresh process of that side's own venv.

Run from the repository root:
    .venv/bin/python bench/peers/run.py [--quick] [--only cycle,approval-memory]
        [--peers langgraph,strands] [--rounds N] [--json FILE] [--markdown] [--before SRC]

Rounds are interleaved (round 1: every workload on Interlude, LangGraph, Strands, ...; round 2:
the same again), the load average is recorded per round, and each peer's figure is compared
with Interlude's of the same round. ``--before SRC`` adds an older Interlude tree (the directory
holding its ``interlude`` package) as one more side, run by the same side script and the same
.venv: the report then shows before against now too. See bench/peers/README.md.
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
from collections.abc import Mapping, Sequence
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
BEFORE = report.BEFORE  # the side of --before: Interlude's side script on an older tree

# What the before side's interpreter runs ahead of the Interlude side script: it imports
# interlude with the script's own sys.path, stops if that did not come from the --before tree,
# then runs the script as __main__. Without a script it prints where interlude came from.
BEFORE_CHECK = """\
import os, runpy, sys
from pathlib import Path
src = Path(os.environ["INTERLUDE_BEFORE_SRC"]).resolve()
script = sys.argv[1] if len(sys.argv) > 1 else None
sys.argv = sys.argv[1:]
if script:
    sys.path[0] = str(Path(script).resolve().parent)
import interlude
where = Path(interlude.__file__).resolve()
if not where.is_relative_to(src):
    sys.exit(f"--before: interlude was imported from {where}, not from {src}")
if script:
    runpy.run_path(script, run_name="__main__")
else:
    print(where)
"""


def before_env(src: Path) -> dict[str, str]:
    """The before side's environment: ``src`` first on PYTHONPATH (ahead of the .venv's own
    editable ``src``), and named for BEFORE_CHECK."""
    path = [str(src), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path), "INTERLUDE_BEFORE_SRC": str(src)}


def side_command(
    side: str, python: Path | None = None, before: Path | None = None
) -> tuple[list[str], dict[str, str] | None]:
    """The command (up to the workloads) and environment of one process of ``side``."""
    if side == BEFORE:
        if before is None:
            raise ValueError("the before side needs the --before tree")
        python = python or venvs.INTERLUDE_PYTHON
        script = venvs.INTERLUDE.script
        return [str(python), "-c", BEFORE_CHECK, str(script)], before_env(before)
    peer = venvs.SIDES_BY_NAME[side]
    return [str(python or venvs.python_of(peer)), str(peer.script)], None


def run_side(
    side: str,
    workloads: Sequence[str],
    size: str,
    python: Path | None = None,
    *,
    before: Path | None = None,
) -> dict[str, dict[str, Any]]:
    """One fresh process of ``side``'s venv running ``workloads``: its results by key. A side
    that fails gives each key of those workloads an ``error`` (the end of its stderr)."""
    prefix, env = side_command(side, python, before)
    command = [*prefix, *workloads, "--size", size]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        return _errors(workloads, f"timed out after {TIMEOUT_S} s")
    if done.returncode != 0:
        tail = " ".join(done.stderr.strip().splitlines()[-1:]) or f"exit {done.returncode}"
        return _errors(workloads, tail)
    try:
        found = json.loads(done.stdout.strip().splitlines()[-1])
        return {r["key"]: r for r in found["results"]}
    except (IndexError, KeyError, TypeError, ValueError) as exc:
        return _errors(workloads, f"no results on stdout ({type(exc).__name__}: {exc})")


def _errors(workloads: Sequence[str], message: str) -> dict[str, dict[str, Any]]:
    return {key: {"key": key, "error": message} for w in workloads for key in PLAN[w]}


def run_rounds(
    sides: Sequence[str],
    workloads: Sequence[str],
    size: str,
    rounds: int,
    before: Path | None = None,
) -> tuple[list[Round], list[tuple[float, float, float]]]:
    """``rounds`` interleaved rounds: in each, every workload on every side in turn (each
    its own process), so a slow spell of the machine hits the sides alike."""
    pythons = {side: _python(side) for side in sides}
    found: list[Round] = []
    loads: list[tuple[float, float, float]] = []
    for number in range(1, rounds + 1):
        loads.append(os.getloadavg())
        print(f"round {number}/{rounds} (load {loads[-1][0]:.2f}) ...", file=sys.stderr, flush=True)
        this: Round = {side: {} for side in sides}
        for workload in workloads:
            for side in sides:
                this[side].update(run_side(side, [workload], size, pythons[side], before=before))
        found.append(this)
    return found, loads


def _python(side: str) -> Path:
    """The interpreter of ``side``: the before side's is Interlude's."""
    return venvs.INTERLUDE_PYTHON if side == BEFORE else venvs.python_of(venvs.SIDES_BY_NAME[side])


def check_before(src: Path) -> Path:
    """Where the before side imports interlude from (inside ``src``), or exit saying why not."""
    if not (src / "interlude" / "__init__.py").is_file():
        raise SystemExit(f"--before {src}: no interlude package there (give its src directory)")
    done = subprocess.run(
        [str(venvs.INTERLUDE_PYTHON), "-c", BEFORE_CHECK],
        capture_output=True,
        text=True,
        env=before_env(src),
    )
    if done.returncode != 0:
        raise SystemExit(f"--before {src}: {done.stderr.strip() or f'exit {done.returncode}'}")
    return Path(done.stdout.strip())


def revision(path: Path) -> dict[str, Any]:
    """The git commit ``path`` is checked out at, and whether the files under it differ from
    that commit (``None`` for both outside git)."""

    def git(*args: str) -> str | None:
        done = subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "--short", "HEAD")
    changed = git("status", "--porcelain", "--", ".") if commit else None
    return {"path": str(path), "commit": commit, "changed": bool(changed) if commit else None}


def revision_text(rev: Mapping[str, Any], *, short: bool = False) -> str:
    """A tree's commit, marked when its files differ from it ("+"), or else its path."""
    if not rev.get("commit"):
        return str(rev["path"])
    return str(rev["commit"]) + (
        ("+" if short else " + uncommitted changes") if rev["changed"] else ""
    )


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
    parser.add_argument(
        "--before",
        metavar="SRC",
        type=Path,
        help="also run an older Interlude: SRC holds its interlude package (e.g. a git "
        "worktree's src); the report adds before vs now (not the README table)",
    )
    args = parser.parse_args()
    peers = _names(args.peers, peer_names, "peers")
    if args.repin:
        venvs.repin(tuple(p for p in venvs.PEERS if p.name in peers))
        return
    workloads = _names(args.only, WORKLOADS, "workloads")
    before: Path | None = args.before.resolve() if args.before else None
    sides = [venvs.INTERLUDE.name, *([BEFORE] if before else []), *peers]
    size = "quick" if args.quick else "full"
    rounds = args.rounds or (2 if args.quick else 3)
    labels = {p.name: p.label for p in (venvs.INTERLUDE, *venvs.PEERS)}
    record: dict[str, Any] = {
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "size": size,
        "sides": sides,
    }
    if before:
        where = check_before(before)
        record["now"] = revision(HERE.parents[1] / "src")
        record["before"] = {**revision(before), "imports": str(where)}
        print(f"before: interlude from {where}", file=sys.stderr, flush=True)
        labels = {
            **labels,
            venvs.INTERLUDE.name: f"Interlude now ({revision_text(record['now'], short=True)})",
            BEFORE: f"Interlude before ({revision_text(record['before'], short=True)})",
        }
    started = time.perf_counter()
    found, loads = run_rounds(sides, workloads, size, rounds, before)
    record.update(loads=loads, rounds=found)
    summaries = report.summarize(found, sides)
    changes = report.changes(found) if before else []
    if changes:
        record["before_vs_now"] = [c.as_json() for c in changes]
    print(describe(record))
    whose = (
        "the side's time over Interlude's (now)" if before else "the peer's time over Interlude's"
    )
    print(f"Ratios: {whose} in the same round; median (min-max).")
    per_round = ", ".join("/".join(f"{x:.2f}" for x in load) for load in loads)
    print(f"Load average at the start of each round (1/5/15 min): {per_round}")
    print(report.text_tables(summaries, labels, changes))
    if before:
        print(
            f"\nBefore ({revision_text(record['before'])}) and now "
            f"({revision_text(record['now'])}): medians over the rounds; now over before in "
            "each round, median (min-max); below 1 now takes less time."
        )
        print("\n".join(report.change_table(changes)))
    print(f"\ntotal time: {time.perf_counter() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1))
    if args.markdown:  # the README's table: Interlude now and the peers, never the before side
        write_readme(markdown(record, report.summarize(found, [s for s in sides if s != BEFORE])))
        print(f"rewrote the peer table in {README}")


if __name__ == "__main__":
    main()
