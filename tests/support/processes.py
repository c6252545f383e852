"""Server processes for tests: started, waited on until they answer, stopped (killed if they
do not stop), with their output in the failure when they die or never answer."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .waiting import DEADLINE, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
"""The repository: where ``python -m tests.<...>`` children run from."""


@dataclass
class Started:
    """A process started by :func:`started`."""

    process: subprocess.Popen[str]
    port: int | None
    log: Path
    """Where its output (stdout and stderr) goes."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        """What it has printed so far (the end of it)."""
        try:
            return self.log.read_text(errors="replace")[-8000:]
        except OSError:
            return ""


@contextmanager
def started(
    argv: Sequence[str],
    *,
    port: int | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    timeout: float = DEADLINE,
    what: str | None = None,
) -> Iterator[Started]:
    """Run ``argv`` until the block ends; with ``port``, only once it accepts connections
    there. Its output goes to a file (shown if it dies or never answers: a pipe nobody reads
    would stall a talkative server); it is terminated at the end, and killed if it has not
    stopped within 10 s."""
    environment = {**os.environ, **(env or {})}
    fd, name = tempfile.mkstemp(prefix="interlude-test-", suffix=".log")
    with os.fdopen(fd, "w") as log:
        process = subprocess.Popen(
            list(argv),
            cwd=cwd or ROOT,
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
    running = Started(process, port, Path(name))
    try:
        if port is not None:
            try:
                wait_for_port(
                    port, what=what or f"{argv[0]} on port {port}", timeout=timeout, process=process
                )
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n--- its output\n{running.output()}") from None
        yield running
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        running.log.unlink(missing_ok=True)
