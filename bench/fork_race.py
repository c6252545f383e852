"""A fork and its parent approved at the same instant, in two processes, many times: how often
the tool ran in both (it must be never; issue 34). Each try is a fresh parent paused at an
approval and a fork of it; the two processes resume them behind one barrier.

Run from the repository root:
    .venv/bin/python bench/fork_race.py [sqlite|file|postgresql ...] [--tries N]
To measure another version, put its ``src`` first: ``PYTHONPATH=/path/to/old/src ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the test helpers that build the agents (tests.doors)


def race(kind: str, tries: int) -> int:
    from tests.doors.test_forks import _store, build

    tmp = Path(tempfile.mkdtemp())
    store, url = _store(kind, tmp)
    for i in range(tries):
        [question] = build(store, f"p{i}")("pay acme").interrupts
        build(store, f"p{i}").fork(at=question.id, session_id=f"f{i}", by="bo")
    barrier, paid = tmp / "barrier", tmp / "paid"
    barrier.mkdir()
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.doors.fork_race_child",
                url or "",
                side,
                str(tries),
                str(barrier),
                str(paid),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ},
        )
        for side in ("p", "f")
    ]
    for child in children:
        json.loads(child.communicate(timeout=600)[0].splitlines()[-1])
    lines = paid.read_text().splitlines() if paid.exists() else []
    ran = [sum(1 for line in lines if line.split()[0] in (f"p{i}", f"f{i}")) for i in range(tries)]
    return sum(1 for n in ran if n > 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stores", nargs="*", default=["sqlite", "file", "postgresql"])
    parser.add_argument("--tries", type=int, default=30)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    for kind in args.stores:
        twice = race(kind, args.tries)
        print(f"{kind:11s} ran twice in {twice} of {args.tries} tries  (load {load:.1f})")


if __name__ == "__main__":
    main()
