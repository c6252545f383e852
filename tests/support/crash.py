"""Crash matrices: a scenario run that SIGKILLs itself at every instrumented point, and a fresh
process that recovers it, each a ``fork`` of one clean parent.

A scenario module (``tests/durability/crash_child.py``, ``tests/multiagent/graph_crash_child.py``)
builds its agent or graph on a store wrapped by a :class:`CrashStore`, marks its points with
:meth:`Points.reach`, describes itself as a :class:`Scenario` and hands it to :func:`main`. It
runs as ``python -m tests.<folder>.<module> matrix --store sqlite --dir D`` from the repository
root (:func:`run_matrix`), in an interpreter that has made no event loop, store or thread, so
every process below is a fork of it.

A *point* is ``<label>#<k>``: the k-th time this process reached ``label``. ``CRASH_AT=<point>``
makes the process SIGKILL itself there; without it (the counting pass) it logs every point it
reaches. Every process appends events to ``events.jsonl`` with single ``write``s to an O_APPEND
file, so a kill loses none of them.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlude import Interrupt
from interlude.errors import SessionConflictError
from interlude.sessions import (
    PendingQuery,
    SessionStore,
    SessionUpdate,
    StoredSession,
    open_store,
)

from .processes import ROOT

KILLED = -signal.SIGKILL
"""How a self-killed child's status reads (the subprocess convention)."""
NOT_REACHED = 3
"""The exit code of a crash child that finished without reaching its point."""
APPROVAL = "approve"
"""The question every scenario's pause asks (answered ``True`` by the resume)."""
JOBS = 4
"""Cells at a time: a cell mostly waits (on fork, the disk, the database)."""
EVENTS = "events.jsonl"


# --- the event log and the kill switch --------------------------------------------------------


class Points:
    """Appends events to the log, and kills this process at ``crash_at`` (or logs points)."""

    def __init__(self, log: Path, role: str, crash_at: str | None) -> None:
        self.log = log
        self.role = role
        self.crash_at = crash_at
        self.seen: dict[str, int] = {}

    def event(self, ev: str, **data: Any) -> None:
        line = json.dumps({"role": self.role, "pid": os.getpid(), "ev": ev, **data}) + "\n"
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def reach(self, label: str) -> None:
        if self.role != "crash":
            return
        k = self.seen[label] = self.seen.get(label, 0) + 1
        point = f"{label}#{k}"
        if self.crash_at is None:
            self.event("point", point=point)
        elif point == self.crash_at:
            self.event("kill", point=point)
            os.kill(os.getpid(), signal.SIGKILL)


def read_events(directory: Path) -> list[dict[str, Any]]:
    log = directory / EVENTS
    return [json.loads(line) for line in (log.read_text().splitlines() if log.exists() else [])]


# --- the store wrapper ------------------------------------------------------------------------


class CrashStore:
    """Delegates to a real store; every save is a kill point before and after (``save.<who>``),
    and what the store committed is logged (``commit``, with what :meth:`committed` says)."""

    def __init__(self, inner: SessionStore, points: Points) -> None:
        self.inner = inner
        self.points = points
        self.saves = 0

    def who(self, session_id: str) -> str:
        """The label of the session saved (empty: the points are ``save.before``/``.after``)."""
        return ""

    def committed(self, session_id: str, update: SessionUpdate) -> dict[str, Any]:
        """What the ``commit`` event says about a save."""
        return {}

    async def load(self, session_id: str) -> StoredSession | None:
        return await self.inner.load(session_id)

    async def save(self, session_id: str, update: SessionUpdate) -> int:
        self.saves += 1
        who = self.who(session_id)
        label = f"save.{who}." if who else "save."
        self.points.reach(f"{label}before")
        version = await self.inner.save(session_id, update)
        self.points.event("commit", **self.committed(session_id, update))
        self.points.reach(f"{label}after")
        return version

    async def rewind(self, session_id: str, update: SessionUpdate) -> int:
        """The store's ``rewind`` (an undo's cut), kill points before and after like a save's
        (``rewind.<who>.before``/``.after``); its commit is logged with ``rewind: true``."""
        self.saves += 1
        who = self.who(session_id)
        label = f"rewind.{who}." if who else "rewind."
        self.points.reach(f"{label}before")
        version: int = await self.inner.rewind(session_id, update)  # type: ignore[attr-defined]
        self.points.event("commit", rewind=True, **self.committed(session_id, update))
        self.points.reach(f"{label}after")
        return version

    async def pending_interrupts(self, query: PendingQuery | None = None) -> Any:
        return await self.inner.pending_interrupts(query)

    async def list_sessions(self) -> list[str]:
        return await self.inner.list_sessions()

    async def delete(self, session_id: str) -> None:
        await self.inner.delete(session_id)


def open_point_store(store: str, directory: Path) -> SessionStore:
    """``store`` is "sqlite" (a database file in ``directory``), "file" (a folder in it) or a
    postgresql:// URL."""
    if store == "sqlite":
        return open_store(f"sqlite:///{directory / 'sessions.db'}")
    if store == "file":
        return open_store(f"file://{directory / 'sessions'}")
    return open_store(store)


def close(store: SessionStore) -> None:
    closer = getattr(store, "close", None)
    if callable(closer):
        closer()


def load(store: SessionStore, session_id: str) -> StoredSession | None:
    return asyncio.run(store.load(session_id))


# --- a scenario -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """What a crash matrix runs: an agent or a graph that pauses once for :data:`APPROVAL`
    (by default: ``invoke``, ``phases``, ``answer``, ``start``, ``finished`` and ``by`` say
    otherwise, e.g. for tests/undo/crash_undo_child.py's undo after a finished run)."""

    prompt: str
    build: Callable[[SessionStore, str, Points], Any]
    """The agent or graph on ``store`` (wrapped in a :class:`CrashStore`), session id given."""
    session_prefix: str
    answer_in_doubt: Callable[[Interrupt, Points, Path], Any]
    """The recovering process's answer to an in-doubt question (``Path``: the cell's folder);
    it logs the ``in_doubt`` event."""
    never_started: Callable[[Any, SessionStore, str], bool] = lambda target, store, sid: (
        load(store, sid) is None
    )
    """Whether nothing was stored, so the recovery gives the prompt (default: no session)."""
    before_recovery: Callable[[SessionStore, str], dict[str, Any]] = lambda store, sid: {}
    """What the report keeps of the session before the recovery (e.g. its snapshot)."""
    after_recovery: Callable[[SessionStore, str], dict[str, Any]] = lambda store, sid: {}
    """What the report keeps of the session after it (e.g. the final conversation)."""
    invoke: Callable[[Any, int], tuple[Any, str]] | None = None
    """How phase ``n`` invokes the target, and the stop reason it must end with (None: phase 1
    gives the prompt and pauses, phase 2 approves the pause and ends the turn)."""
    phases: tuple[int, ...] = (1, 2)
    """The phases the matrix kills in (a cell of phase 2 runs phase 1 first, as ``setup``)."""
    answer: Callable[[Interrupt], Any] | None = None
    """The recovery's answer to a question that is not in doubt (None: :data:`APPROVAL` is
    answered ``True``, any other question is unexpected)."""
    start: Callable[[Any], Any] | None = None
    """What the recovery invokes when ``never_started`` says so (None: the prompt)."""
    finished: Callable[[Any], bool] = lambda target: False
    """Whether the scenario's work is done though the target may still hold a stopped run or
    a pause (e.g. an undo that cut the session back to a checkpoint): checked first."""
    by: str | None = None
    """Who the recovery answers as (``resume(..., by=...)``; None: nobody named)."""

    def session_id(self, directory: Path) -> str:
        return f"{self.session_prefix}{directory.name}"


def run_phase(scenario: Scenario, store_name: str, directory: Path, role: str, phase: int) -> int:
    """Run phase 1 (the prompt, up to the pause) or 2 (approve and carry on to the end)."""
    points = Points(directory / EVENTS, role, os.environ.get("CRASH_AT"))
    store = open_point_store(store_name, directory)
    try:
        target = scenario.build(store, scenario.session_id(directory), points)
        if scenario.invoke is not None:
            result, expected = scenario.invoke(target, phase)
        elif phase == 1:
            result, expected = target(scenario.prompt), "interrupt"
        else:
            [question] = target.interrupts
            result, expected = target.resume({question.id: True}), "end_turn"
        if result.stop_reason != expected:
            points.event("unexpected", stop_reason=result.stop_reason)
            return 2
    finally:
        close(store)
    return NOT_REACHED if role == "crash" and points.crash_at is not None else 0


def _drive(
    scenario: Scenario, target: Any, store: SessionStore, points: Points, rounds: list[str]
) -> None:
    """Carry ``target`` on (recover, answer, or give the prompt if nothing was stored) until
    the invocation ends, noting each round in ``rounds``."""
    directory = points.log.parent
    for _ in range(8):
        if scenario.finished(target):
            return
        if target.needs_recovery:
            rounds.append("recover")
            result = target.recover()
        elif target.is_paused:
            answers: dict[str, Any] = {}
            for question in target.interrupts:
                if question.source == "in_doubt":
                    answers[question.id] = scenario.answer_in_doubt(question, points, directory)
                elif scenario.answer is not None:
                    answers[question.id] = scenario.answer(question)
                elif question.name == APPROVAL:
                    answers[question.id] = True
                else:
                    raise AssertionError(f"unexpected question {question!r}")
            rounds.append(f"resume {sorted(map(str, answers.values()))}")
            named = {} if scenario.by is None else {"by": scenario.by}
            result = target.resume(answers, **named)
        elif scenario.never_started(target, store, scenario.session_id(directory)):
            if scenario.start is None:
                rounds.append("prompt")
                result = target(scenario.prompt)
            else:
                rounds.append("start")
                result = scenario.start(target)
        else:
            return
        rounds[-1] += f" -> {result.stop_reason}"
    raise AssertionError(f"no end after {rounds}")


def recover(scenario: Scenario, store_name: str, directory: Path) -> dict[str, Any]:
    """The recovery driver: a fresh process builds the same agent or graph and carries it on
    until the invocation ends. ``seconds``: how long that took."""
    points = Points(directory / EVENTS, "recover", None)
    store = open_point_store(store_name, directory)
    session_id = scenario.session_id(directory)
    report: dict[str, Any] = {"rounds": [], "error": None}
    try:
        report.update(scenario.before_recovery(store, session_id))
        started = time.monotonic()
        target = scenario.build(store, session_id, points)
        _drive(scenario, target, store, points, report["rounds"])
        report["seconds"] = time.monotonic() - started
    except SessionConflictError as exc:
        points.event("conflict", message=str(exc))
        report["error"] = f"SessionConflictError: {exc}"
    except BaseException:
        report["error"] = traceback.format_exc()
    try:
        report.update(scenario.after_recovery(store, session_id))
    finally:
        close(store)
    return report


# --- the matrix: one clean parent forks every process -----------------------------------------


def fork(fn: Callable[[], int]) -> int:
    """Run ``fn`` in a forked child; its status as subprocess gives it (-9: SIGKILLed)."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = fn()
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def cell(
    scenario: Scenario, store: str, directory: Path, phase: int, point: str | None
) -> dict[str, Any]:
    """One cell: (phase 2: a setup process pauses first) a process dies at ``point``; a fresh
    one recovers. ``point=None`` is the counting pass: the run goes through, logging points."""
    directory.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    out: dict[str, Any] = {"phase": phase, "point": point, "dir": str(directory)}
    if phase == 2:
        out["setup"] = fork(lambda: run_phase(scenario, store, directory, "setup", 1))
    if point is None:
        os.environ.pop("CRASH_AT", None)
    else:
        os.environ["CRASH_AT"] = point
    out["crash"] = fork(lambda: run_phase(scenario, store, directory, "crash", phase))
    os.environ.pop("CRASH_AT", None)
    if point is not None:
        out.update(recover(scenario, store, directory))
    out["events"] = read_events(directory)
    out["cell_seconds"] = time.monotonic() - started
    return out


def matrix(scenario: Scenario, store: str, root: Path, jobs: int) -> dict[str, Any]:
    """Count the points of the scenario's phases, then run every point, ``jobs`` cells at a
    time."""
    started = time.monotonic()
    counts = {
        phase: cell(scenario, store, root / f"count{phase}", phase, None)
        for phase in scenario.phases
    }
    cells = [
        (phase, e["point"])
        for phase, counted in counts.items()
        for e in counted["events"]
        if e["ev"] == "point"
    ]
    running: set[int] = set()
    for i, (phase, point) in enumerate(cells):
        while len(running) >= jobs:
            running.discard(os.wait()[0])
        pid = os.fork()
        if pid == 0:
            directory = root / f"p{i:03d}"
            try:
                out = cell(scenario, store, directory, phase, point)
            except BaseException:
                out = {"phase": phase, "point": point, "error": traceback.format_exc()}
            try:
                (directory / "cell.json").write_text(json.dumps(out))
            finally:
                os._exit(0)
        running.add(pid)
    while running:
        running.discard(os.wait()[0])
    results = []
    for i, (phase, point) in enumerate(cells):
        path = root / f"p{i:03d}" / "cell.json"
        missing = {"phase": phase, "point": point, "error": "the cell's process failed"}
        results.append(json.loads(path.read_text()) if path.exists() else missing)
    return {
        "counts": {str(p): c for p, c in counts.items()},
        "cells": results,
        "seconds": time.monotonic() - started,
    }


def main(
    argv: Sequence[str],
    scenario: Callable[[argparse.Namespace], Scenario],
    *,
    options: Callable[[argparse.ArgumentParser], None] | None = None,
) -> int:
    """The child's command line: ``matrix`` (every point), ``run`` (one process: ``--role``,
    ``--phase``, ``CRASH_AT``) or ``recover``. ``scenario`` makes the scenario from the
    arguments (``options`` adds its own)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["matrix", "run", "recover"])
    parser.add_argument("--store", required=True, help='"sqlite", "file" or a postgresql:// URL')
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--jobs", type=int, default=JOBS)
    parser.add_argument("--phase", type=int, default=1)
    parser.add_argument("--role", default="crash")
    if options is not None:
        options(parser)
    args = parser.parse_args(argv)
    chosen = scenario(args)
    args.dir.mkdir(parents=True, exist_ok=True)
    if args.command == "run":
        return run_phase(chosen, args.store, args.dir, args.role, args.phase)
    if args.command == "recover":
        print(json.dumps(recover(chosen, args.store, args.dir), indent=2))
        return 0
    # Load once, before forking, what every child would load (no connection, loop or thread).
    driver = ["interlude.sessions._sqlite", "interlude.sessions._file"]
    if args.store not in ("sqlite", "file"):
        driver = ["interlude.sessions._postgres", "psycopg", "psycopg_pool"]
    for module in [*driver, "interlude._agent._persist", "interlude._agent._loop"]:
        importlib.import_module(module)
    gc.freeze()  # the children share these pages: keep the collector from touching them
    (args.dir / "matrix.json").write_text(
        json.dumps(matrix(chosen, args.store, args.dir, args.jobs))
    )
    return 0


# --- the test's side --------------------------------------------------------------------------


@contextmanager
def scratch(fallback: Path, prefix: str = "interlude-crash-") -> Iterator[Path]:
    """A folder for a matrix: in /dev/shm when there is one (SIGKILL leaves the page cache
    intact, so a RAM file system tests the same thing, without waiting for fsync), else
    ``fallback``."""
    if Path("/dev/shm").is_dir() and os.access("/dev/shm", os.W_OK):
        path = Path(tempfile.mkdtemp(prefix=prefix, dir="/dev/shm"))
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
    else:
        yield fallback


def run_matrix(module: str, store: str, root: Path, *more: str) -> dict[str, Any]:
    """``python -m <module> matrix`` from the repository root; its ``matrix.json``, with the
    children's stderr (the tracebacks of children that failed unexpectedly) as ``stderr``."""
    argv = [sys.executable, "-m", module, "matrix", "--store", store, "--dir", str(root), *more]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result: dict[str, Any] = json.loads((root / "matrix.json").read_text())
    result["stderr"] = proc.stderr
    return result


def reproduce(module: str, cell: dict[str, Any], *more: str) -> str:
    """Shell commands (from the repository root) that replay one cell on SQLite."""
    extra = "".join(f" {m}" for m in more)
    run = f"python -m {module} run --store sqlite --dir /tmp/cell{extra}"
    setup = f"{run} --role setup --phase 1 && " if cell["phase"] == 2 else ""
    return (
        f"reproduce: {setup}CRASH_AT='{cell['point']}' {run} --phase {cell['phase']}; "
        f"python -m {module} recover --store sqlite --dir /tmp/cell{extra}"
    )
