"""The suite on a busy machine: the README's test command, run again and again beside CPU burners.

    python3 .ci/under_load.py                 # 3 runs in a row at load ~10, from a clone of HEAD
    python3 .ci/under_load.py --runs 1 --load 6 --commit 26ee54a

It clones the commit into a fresh folder (with ../shared beside it, as CI has it), installs it
there as the README says, then starts busy-looping processes and keeps the 1-minute load average
near the target (it adds or stops a burner every 20 s), and runs
`INTERLUDE_REQUIRE_SERVICES=1 .venv/bin/python -m pytest -q` until one run fails or all passed.
Each run's outcome, wall time and load (median, lowest, highest of samples every 20 s) is printed
and written to <workdir>/summary.txt; every run's output is kept in <workdir>/run-N.log.
Burners are stopped however the script ends. Nothing here is part of CI: it takes ~45 min a run.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


class Burners:
    """Busy-looping processes, added or stopped to hold the load average near a target."""

    def __init__(self, target: float, most: int) -> None:
        self.target, self.most = target, most
        self.procs: list[subprocess.Popen[bytes]] = []
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._steer, daemon=True)

    def start(self, first: int) -> None:
        for _ in range(first):
            self._add()
        self._thread.start()

    def _add(self) -> None:
        self.procs.append(subprocess.Popen([sys.executable, "-c", "while 1: pass"]))

    def _steer(self) -> None:
        while not self._stop.wait(20):
            load = os.getloadavg()[0]
            self.samples.append(load)
            if load < self.target - 1 and len(self.procs) < self.most:
                self._add()
            elif load > self.target + 1 and len(self.procs) > 1:
                self.procs.pop().kill()

    def take_samples(self) -> list[float]:
        taken, self.samples = self.samples, []
        return taken

    def stop(self) -> None:
        self._stop.set()
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.wait()


def prepare(commit: str, workdir: Path) -> Path:
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    clone = workdir / "main"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", "--detach", commit], check=True)
    shared = REPO.parent / "shared"
    if shared.exists():
        (workdir / "shared").symlink_to(shared)
    print(f"--- installing {commit} into {clone} (quiet machine: no burners yet)", flush=True)
    install = subprocess.run(
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev]'",
        shell=True,
        cwd=clone,
        capture_output=True,
        text=True,
    )
    if install.returncode != 0:
        sys.exit(f"the install failed:\n{install.stderr}")
    return clone


def run_once(clone: Path, log: Path) -> tuple[int, float, str]:
    env = dict(os.environ, INTERLUDE_REQUIRE_SERVICES="1")
    started = time.monotonic()
    with log.open("wb") as out:
        rc = subprocess.call(
            [".venv/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider"],
            cwd=clone,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            # The suite presses Ctrl-C on its children: give it SIGINT's default action even if
            # this script was started with SIGINT ignored (nohup, `cmd &`).
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    wall = time.monotonic() - started
    tail = log.read_text(errors="replace").strip().splitlines()
    outcome = next((line for line in reversed(tail) if re.search(r"\d+ (passed|failed)", line)), "")
    return rc, wall, outcome.strip("= ")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--load", type=float, default=10.0, help="1-minute load average to hold")
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/interlude-under-load"))
    args = parser.parse_args()
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", args.commit],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    clone = prepare(commit, args.workdir)
    cores = os.cpu_count() or 1
    burners = Burners(args.load, most=int(args.load) + 4)
    lines = [f"commit {commit}, {cores} cores, target load {args.load}"]
    print(lines[0], flush=True)
    burners.start(first=max(1, int(args.load) - cores - 2))
    failed = False
    try:
        for n in range(1, args.runs + 1):
            rc, wall, outcome = run_once(clone, args.workdir / f"run-{n}.log")
            loads = burners.take_samples() or [os.getloadavg()[0]]
            line = (
                f"run {n}: {'green' if rc == 0 else f'RED (exit {rc})'}, {outcome}, "
                f"{wall / 60:.1f} min, load median {statistics.median(loads):.1f} "
                f"(lowest {min(loads):.1f}, highest {max(loads):.1f}, {len(loads)} samples)"
            )
            lines.append(line)
            print(line, flush=True)
            if rc != 0:
                failed = True
                break
    finally:
        burners.stop()
        (args.workdir / "summary.txt").write_text("\n".join(lines) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
