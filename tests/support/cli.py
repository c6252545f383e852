"""Running the ``interlude`` command as a user runs it, and what it said.

A command runs in this process (``interlude.cli.main(argv)``) with what a process of its own
would have: the working folder, the environment, its standard output and error, its exit code
(an uncaught exception is a traceback on stderr and exit 1), and a clock when a test sets
one. Modules it imports from the working folder (a user's ``--app``) are forgotten afterwards,
as a process forgets them. Tests about a process itself (the console script, a command killed
with SIGKILL, commands racing each other, a hint run as printed) run real processes
(:func:`run_processes`, :func:`processes`).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import shlex
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import interlude
from interlude.cli import main

CLI = [sys.executable, "-m", "interlude"]
"""A command of a process of its own: ``python -m interlude``."""
INTERRUPT_KEYS = frozenset(
    {"id", "name", "reason", "source", "tool", "input", "shown", "response_schema", "expires_at"}
)
"""The keys of a question in the command's ``--json`` output."""


@dataclass
class Ran:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return (
            f"$ {shlex.join(self.argv)}\n-> exit {self.returncode}\n"
            f"stdout:\n{self.stdout}\nstderr:\n{self.stderr}"
        )

    def ok(self) -> Ran:
        assert self.returncode == 0, str(self)
        assert "Traceback" not in self.stderr, str(self)
        return self

    def json(self) -> Any:
        self.ok()
        return json.loads(self.stdout)


def cli_env(**extra: str) -> dict[str, str]:
    """A user's environment: none of the CLI's own variables set, no colours, and
    ``interlude`` on PATH this installation's (as in an activated venv), so the commands the
    CLI suggests read ``interlude ...`` (test_readme covers the venv that is not activated)."""
    env = dict(os.environ)
    for name in ("INTERLUDE_STORE", "INTERLUDE_APP", "INTERLUDE_TEMPORAL", "FORCE_COLOR"):
        env.pop(name, None)
    env.update(NO_COLOR="1", TERM="dumb", PYTHONUNBUFFERED="1")
    bin_dir = os.path.dirname(os.path.abspath(sys.executable))
    env["PATH"] = os.pathsep.join(p for p in (bin_dir, env.get("PATH", "")) if p)
    env.update(extra)
    return env


@contextlib.contextmanager
def as_a_process(cwd: Path, env: dict[str, str], at: float | None = None) -> Iterator[None]:
    """Within the block, this process has ``cwd`` for its folder, ``env`` for its environment
    and (with ``at``) a clock stopped at that epoch second; all put back afterwards, and the
    modules imported from ``cwd`` forgotten."""
    saved_env, saved_cwd, saved_clock = dict(os.environ), os.getcwd(), time.time
    modules = set(sys.modules)
    importlib.invalidate_caches()  # a module written into cwd just now is found
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    if at is not None:
        time.time = lambda: at
    try:
        yield
    finally:
        time.time = saved_clock
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        # Forgotten: the user's modules in ``cwd`` (an app written there), never Interlude's
        # own (``cwd`` may be the repository, which holds src/interlude): a module of the
        # package imported again is a second copy, and a test that patched the first one
        # (monkeypatch.setattr(module, ...)) would patch what no longer runs.
        folder = str(Path(cwd).resolve())
        own = str(Path(interlude.__file__).resolve().parent) + os.sep
        for name in set(sys.modules) - modules:
            path = os.path.abspath(getattr(sys.modules[name], "__file__", None) or "")
            if path.startswith(folder + os.sep) and not path.startswith(own):
                del sys.modules[name]


def run(cwd: Path, *args: str, env: dict[str, str] | None = None, at: float | None = None) -> Ran:
    """``interlude ARGS...`` run in ``cwd`` (in this process; see the module's docstring)."""
    out, err = io.StringIO(), io.StringIO()
    with (
        as_a_process(cwd, env or cli_env(), at),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's --help
            code = exc.code if isinstance(exc.code, int) else 1
        except Exception:
            traceback.print_exc()
            code = 1
    return Ran(["interlude", *args], code, out.getvalue(), err.getvalue())


def run_many(cwd: Path, *commands: Sequence[str], env: dict[str, str] | None = None) -> list[Ran]:
    """Each ``interlude ARGS...`` of ``commands`` run in ``cwd``, one after another."""
    return [run(cwd, *command, env=env) for command in commands]


def run_processes(cwd: Path, *argvs: Sequence[str], env: dict[str, str] | None = None) -> list[Ran]:
    """Each argv run in ``cwd`` as a process of its own, all at the same time."""
    return processes([(cwd, argv) for argv in argvs], env=env)


def processes(
    jobs: Sequence[tuple[Path, Sequence[str]]],
    *,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> list[Ran]:
    """Each ``(folder, argv)`` of ``jobs`` run in its folder as a process of its own, all at
    the same time."""
    procs = [
        subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=env or cli_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for cwd, argv in jobs
    ]
    done = []
    for (_, argv), proc in zip(jobs, procs, strict=True):
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"timed out: {shlex.join(argv)}\n{out}\n{err}")
        done.append(Ran(list(argv), proc.returncode, out, err))
    return done
