"""Ctrl-C (SIGINT) at random moments, 40 tries each for ``interlude demo`` and ``interlude
answer``: never a stale claim, never a lost approval, never a hang.

Each try runs the real command in a subprocess and sends it SIGINT after a random delay, spread
over the command's whole life (start-up, imports, the run, the output) and denser around the
run itself. The delays come from a seeded ``random.Random`` (``INTERLUDE_CTRL_C_SEED`` picks
another seed, ``INTERLUDE_CTRL_C_TRIES`` another number of tries), and a failure names the seed,
the try and its delay. The commands run two at a time (the CI machines have two cores); the
checks afterwards run in this process, the follow-up commands through the CLI's own ``main``.

Counted but not failed: a Ctrl-C that lands in Python's exit once the command is done (the
sync loop's atexit callback, the join of worker threads) prints that KeyboardInterrupt's
traceback ("Exception ignored in ..."), and one that lands in ``run_sync`` before the coroutine
became a task leaves a "coroutine ... was never awaited" warning; neither changes the session.
A Ctrl-C that lands in ``run_sync`` after the task exists but before its SIGINT handler is in
place is too narrow a window for random tries:
``test_ctrl_c_as_a_sync_call_starts_leaves_nothing_running`` sends it there on purpose.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import random
import re
import select
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from interlude import Agent, Message, ToolResult
from interlude.cli import main as cli_main
from interlude.cli._demo import PROMPT
from interlude.cli._demo import build as build_demo
from interlude.sessions import SQLiteStore, StoredSession
from tests.support.processes import ROOT

from . import ctrl_c_agent

CLI = [sys.executable, "-m", "interlude"]
SEED = int(os.environ.get("INTERLUDE_CTRL_C_SEED", "20260214"))
TRIES = int(os.environ.get("INTERLUDE_CTRL_C_TRIES", "40"))
WORKERS = 2
HANG = 90.0  # seconds a command may take after its SIGINT before it counts as hung (a command
# ends within a second or two of it; the margin is for a machine at load 30)
QUESTION = {"question": "May the agent run delete_files?"}
DELETE_ID = "call_delete"
INTRO = b"Interlude demo:"  # the demo's first line, printed just before its run
READY = b"READY"  # printed on stderr by ctrl_c_agent.build, just before the resume
COUNTING_AGENT = "tests.durability.ctrl_c_agent:app"  # the children run from the repository
InProcessAgent = Callable[[SQLiteStore, str], Agent]


# --- firing a command ---------------------------------------------------------------------


@dataclass
class Plan:
    """When to send SIGINT: ``delay`` seconds after the start, or after ``marker`` appears."""

    delay: float | None  # None: no SIGINT (a calibration run)
    marker: bytes | None = None
    on_stderr: bool = False

    def __str__(self) -> str:
        if self.delay is None:
            return "no SIGINT"
        where = "the start" if self.marker is None else f"{self.marker.decode()!r}"
        return f"SIGINT {self.delay * 1000:.1f} ms after {where}"


Job = tuple[list[str], Plan, str, dict[str, str]]  # argv, plan, label, extra environment


@dataclass
class Shot:
    """One command run, and how it ended."""

    argv: list[str]
    plan: Plan
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    hung: bool = False
    signalled: bool = False
    marker_at: float | None = None  # seconds from the start
    elapsed: float = 0.0
    label: str = ""

    def __str__(self) -> str:
        marker = "" if self.marker_at is None else f", marker at {self.marker_at:.3f} s"
        return (
            f"{self.label}: {self.plan} (seed {SEED}){marker}; sent={self.signalled}, "
            f"hung={self.hung}, exit {self.returncode} after {self.elapsed:.3f} s\n"
            f"$ {shlex.join(self.argv)}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"
        )


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("INTERLUDE_STORE", "FORCE_COLOR", ctrl_c_agent.OUTBOX):
        env.pop(name, None)
    env.update(NO_COLOR="1", TERM="dumb", PYTHONUNBUFFERED="1")
    return env


def fire(argv: list[str], plan: Plan, cwd: Path, env: dict[str, str], label: str = "") -> Shot:
    """Run ``argv``; send SIGINT as planned; wait (a command still going HANG seconds later is
    killed and reported as hung)."""
    shot = Shot(argv, plan, label=label)
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    early = {1: b"", 2: b""}  # what was read while waiting for the marker
    if plan.marker is not None:
        stream, key = (proc.stderr, 2) if plan.on_stderr else (proc.stdout, 1)
        fd = stream.fileno()
        deadline = start + HANG
        while plan.marker not in early[key] and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], deadline - time.monotonic())
            if not ready:
                break
            chunk = os.read(fd, 65536)
            if not chunk:
                break  # the command ended before printing the marker
            early[key] += chunk
        if plan.marker in early[key]:
            shot.marker_at = time.monotonic() - start
    if plan.delay is not None:
        origin = start if plan.marker is None else start + (shot.marker_at or 0.0)
        time.sleep(max(0.0, origin + plan.delay - time.monotonic()))
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            shot.signalled = True
    try:
        out, err = proc.communicate(timeout=HANG)
    except subprocess.TimeoutExpired:
        shot.hung = True
        proc.kill()
        out, err = proc.communicate()
    shot.elapsed = time.monotonic() - start
    shot.returncode = proc.returncode
    shot.stdout = (early[1] + out).decode(errors="replace")
    shot.stderr = (early[2] + err).decode(errors="replace")
    return shot


def fire_all(jobs: list[Job], cwd: Path) -> list[Shot]:
    """Fire the jobs, WORKERS at a time; the shots in the jobs' order."""
    env = _env()
    with ThreadPoolExecutor(WORKERS) as pool:
        futures = [
            pool.submit(fire, argv, plan, cwd, {**env, **extra}, label)
            for argv, plan, label, extra in jobs
        ]
        return [f.result() for f in futures]


def calibrate(
    argvs: list[list[str]], marker: bytes, on_stderr: bool, cwd: Path
) -> tuple[float, float]:
    """Run the commands to their end (no SIGINT), two at a time as the tries will: (seconds to
    the marker, seconds from the marker to the end), the slowest of them. They also warm the
    caches (bytecode, the file system) for the tries."""
    plan = Plan(None, marker, on_stderr)
    shots = fire_all([(argv, plan, "calibration", {}) for argv in argvs], cwd)
    for shot in shots:
        assert shot.returncode == 0 and not shot.hung and shot.marker_at is not None, str(shot)
    to_marker = max(s.marker_at or 0.0 for s in shots)
    after = max(s.elapsed - (s.marker_at or 0.0) for s in shots)
    return to_marker, after


def random_plan(
    rng: random.Random,
    to_marker: float,
    after: float,
    marker: bytes | None,
    on_stderr: bool = False,
) -> Plan:
    """A quarter of the tries: anywhere in the command's life, from its start. The others: after
    the marker (printed just before the run), half of them within its first 30 ms (the run
    itself), half anywhere until the command would end."""
    total = (to_marker + after) * 1.1
    if marker is None or rng.random() < 0.25:
        return Plan(rng.uniform(0.0, total))
    window = rng.choice([0.03, after * 1.1])
    return Plan(rng.uniform(0.0, window), marker, on_stderr)


# --- looking at a session -----------------------------------------------------------------


def load(db: Path, session_id: str) -> StoredSession | None:
    with SQLiteStore(db) as store:
        return asyncio.run(store.load(session_id))


@contextlib.contextmanager
def fresh_agent(db: Path, session_id: str, build: InProcessAgent) -> Iterator[Agent]:
    with SQLiteStore(db) as store:
        yield build(store, session_id)


def cli(*argv: str) -> tuple[int, str, str]:
    """An ``interlude`` command run in this process (the same code as the console script)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(list(argv))
    return code, out.getvalue(), err.getvalue()


def delete_results(messages: list[Message]) -> list[ToolResult]:
    return [
        b
        for m in messages
        for b in m.content
        if isinstance(b, ToolResult) and b.tool_use_id == DELETE_ID
    ]


def outbox_runs(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


EXCEPTION_LINE = re.compile(r"[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)(?::|$)")


def check_stderr(shot: Shot, seen: Counter[str]) -> None:
    """What a tidy Ctrl-C may print: nothing, the CLI's ``interrupted`` line, or tracebacks of
    the KeyboardInterrupt itself (where it landed in Python's start-up or exit, not in a run).
    Never another exception, never a task destroyed mid-run.

    Noise is counted, not failed (see the module's notes): "Exception ignored" (the
    KeyboardInterrupt landed in the exit's cleanup: atexit, thread joins) and "coroutine ...
    was never awaited" (it landed in ``run_sync`` before the coroutine became a task)."""
    err = shot.stderr
    assert "Task was destroyed" not in err, "a run's task was left pending and destroyed at exit"
    if "Exception ignored" in err:
        seen["noise: a KeyboardInterrupt ignored while Python exited"] += 1
    if "was never awaited" in err:
        seen["noise: a coroutine never awaited"] += 1
    if "<frozen importlib._bootstrap" in err or err.count(", in <module>") > 1:
        # It landed while a module was being imported (a module body below __main__'s in
        # the traceback), before any run: a run's sync call holds Ctrl-C itself. Python's
        # import machinery may turn it into another error (a chained KeyError, a TypeError,
        # a RuntimeError from a class body). The session checks still apply.
        seen["noise: a KeyboardInterrupt during start-up imports"] += 1
        return
    raised: list[str] = []
    for line in err.splitlines():
        if line.startswith("interlude: error:"):
            assert line == "interlude: error: interrupted", f"the command failed: {line!r}"
        elif EXCEPTION_LINE.match(line):
            raised.append(line)
    if raised:
        # A traceback may chain what the interrupted code was handling (an OSError that
        # get_terminal_size catches, say), but what escaped must be the KeyboardInterrupt.
        assert raised[-1].startswith("KeyboardInterrupt"), f"an exception on stderr: {raised!r}"
        if len(raised) > 1:
            seen["noise: a KeyboardInterrupt chained to what the code was handling"] += 1


def judge(shot: Shot, seen: Counter[str], check_session: Callable[[], None]) -> str:
    """Everything wrong with one try (empty if nothing): a hang, the session, the output."""
    problems: list[str] = []
    if shot.hung:
        problems.append("the command hung after SIGINT")
    for check in (check_session, lambda: check_stderr(shot, seen)):
        try:
            check()
        except AssertionError as exc:
            problems.append(str(exc))
    return "\n".join(problems)


def pending_ids(db: Path, session_id: str) -> list[str]:
    """The session's interrupt ids `interlude pending` lists (it must work at once)."""
    code, out, err = cli("pending", "--store", f"sqlite:///{db}", "--json")
    assert code == 0, f"`interlude pending` failed ({code}): {err.strip()}"
    return [e["id"] for e in json.loads(out) if e["session"] == session_id]


# --- demo ---------------------------------------------------------------------------------


def check_demo(db: Path, session_id: str, seen: Counter[str], assert_valid: Any) -> None:
    """What a demo run stopped by Ctrl-C may leave: nothing; an idle session (the run was
    cancelled: conversation closed, the delete never run); or the pause with its question.
    Never a claim, never a run to recover; `pending` (and `answer`, when paused) work at once."""
    stored = load(db, session_id)
    pending = pending_ids(db, session_id)
    if stored is None:
        seen["nothing stored"] += 1
        assert pending == []
        return
    assert stored.claim is None, f"a stale claim: {stored.claim}"
    with fresh_agent(db, session_id, build_demo) as agent:
        assert not agent.needs_recovery, "Ctrl-C left a stopped run (a journal) behind"
        if not agent.is_paused:  # a pause before a tool waits with the tool use unanswered
            assert_valid(agent)
        assert not [r for r in delete_results(agent.messages) if r.status == "success"], (
            "the delete ran without an approval"
        )
        if not agent.is_paused:
            assert pending == []
            seen["idle, conversation closed" if agent.messages else "idle, empty"] += 1
            result = agent(PROMPT)  # the session takes a new run at once
            assert result.stop_reason == "interrupt"
            return
    seen["paused"] += 1
    [question] = agent.interrupts
    assert question.name == "approve" and question.reason == QUESTION
    assert question.tool_use is not None and question.tool_use.name == "delete_files"
    assert pending == [question.id], f"pending lists {pending}"
    code, out, err = cli(
        "answer", "--store", f"sqlite:///{db}", session_id, question.id, "true", "--json"
    )
    assert code == 0, f"`interlude answer` failed ({code}): {err}"
    assert json.loads(out)["stop_reason"] == "end_turn", out
    after = load(db, session_id)
    assert after is not None and after.claim is None and after.pause is None
    results = delete_results([Message.from_dict(m) for m in after.messages])
    assert [r.status for r in results] == ["success"], results


def test_ctrl_c_during_demo(tmp_path: Path, assert_valid: Any) -> None:
    started = time.monotonic()
    store = f"sqlite:///{tmp_path}/calibration.db"
    to_marker, after = calibrate(
        [[*CLI, "demo", "--store", store, "--session", f"calib-{k}"] for k in range(2)],
        INTRO,
        False,
        tmp_path,
    )
    jobs: list[Job] = []
    for i in range(TRIES):
        rng = random.Random(f"{SEED}:demo:{i}")
        db = tmp_path / f"d{i}.db"
        argv = [*CLI, "demo", "--store", f"sqlite:///{db}", "--session", f"ctrlc-{i}"]
        jobs.append((argv, random_plan(rng, to_marker, after, INTRO), f"demo try {i}", {}))
    shots = fire_all(jobs, tmp_path)
    seen: Counter[str] = Counter()
    failures: list[str] = []
    for i, shot in enumerate(shots):
        check = partial(check_demo, tmp_path / f"d{i}.db", f"ctrlc-{i}", seen, assert_valid)
        problems = judge(shot, seen, check)
        if problems:
            failures.append(f"{problems}\n{shot}")
    print(
        f"\ndemo: {TRIES} tries in {time.monotonic() - started:.1f} s (seed {SEED}; "
        f"{to_marker:.3f} s to the intro, {after:.3f} s after it): {dict(seen)}"
    )
    assert not failures, f"{len(failures)} of {TRIES} tries failed:\n\n" + "\n\n".join(failures)


# --- resume -------------------------------------------------------------------------------


@dataclass
class Paused:
    db: Path
    session_id: str
    interrupt_id: str
    counting: bool  # answered by ctrl_c_agent:build (counts the delete tool's runs)
    outbox: Path


def make_paused(tmp_path: Path, i: int, counting: bool) -> Paused:
    db = tmp_path / f"r{i}.db"
    session_id = f"resume-{i}"
    with SQLiteStore(db) as store:
        result = build_demo(store, session_id)(PROMPT)
    [question] = result.interrupts
    return Paused(db, session_id, question.id, counting, tmp_path / f"outbox{i}.jsonl")


def answer_argv(p: Paused) -> list[str]:
    argv = [*CLI, "answer", "--store", f"sqlite:///{p.db}", p.session_id, p.interrupt_id, "true"]
    return [*argv, "--app", COUNTING_AGENT] if p.counting else argv


def check_resume(
    p: Paused, seen: Counter[str], assert_valid: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After Ctrl-C during `answer`: no claim, no run to recover, and the approval either still
    waits (the same question; answering it again runs the delete once) or was acted on (the
    conversation records the delete call's result). The delete never runs twice."""
    stored = load(p.db, p.session_id)
    assert stored is not None
    assert stored.claim is None, f"a stale claim: {stored.claim}"
    build: InProcessAgent = ctrl_c_agent.build if p.counting else build_demo
    with fresh_agent(p.db, p.session_id, build) as agent:
        assert not agent.needs_recovery, "Ctrl-C left a stopped run (a journal) behind"
        if not agent.is_paused:
            assert_valid(agent)
        results = delete_results(agent.messages)
        paused, interrupts, count = agent.is_paused, agent.interrupts, len(agent.messages)
    runs = outbox_runs(p.outbox)
    pending = pending_ids(p.db, p.session_id)
    if paused:
        assert [i.id for i in interrupts] == [p.interrupt_id], "a different question"
        assert interrupts[0].reason == QUESTION
        assert pending == [p.interrupt_id], f"pending lists {pending}"
        assert results == [], f"paused, yet the delete has a result: {results}"
        assert runs == 0, "paused, yet the delete ran"
        seen["still paused"] += 1
        monkeypatch.setenv(ctrl_c_agent.OUTBOX, str(p.outbox))
        agent_flag = ["--app", COUNTING_AGENT] if p.counting else []
        code, out, err = cli(
            "answer",
            "--store",
            f"sqlite:///{p.db}",
            p.session_id,
            p.interrupt_id,
            "true",
            "--json",
            *agent_flag,
        )
        assert code == 0, f"answering again failed ({code}): {err}"
        assert json.loads(out)["stop_reason"] == "end_turn", out
        after = load(p.db, p.session_id)
        assert after is not None and after.claim is None and after.pause is None
        again = delete_results([Message.from_dict(m) for m in after.messages])
        assert [r.status for r in again] == ["success"], again
        if p.counting:
            assert outbox_runs(p.outbox) == 1, "the delete did not run exactly once"
        return
    assert pending == [], f"not paused, yet pending lists {pending}"
    assert len(results) == 1, f"the approval was lost: no result for the delete ({results})"
    [result] = results
    if result.status == "success":
        assert result.text.startswith("deleted 3 file(s)"), result.text
        assert not p.counting or runs == 1, f"recorded as run, but it ran {runs} time(s)"
        seen["delete ran" + (", reply given" if count > 5 else "")] += 1
        return
    # Stopped while the delete ran (its thread cannot be stopped): said to have maybe run.
    assert "may have had effects" in result.text, f"the approval was lost: {result.text!r}"
    assert runs <= 1
    seen[
        f"stopped in the delete (it ran {runs} time(s))" if p.counting else "stopped in the delete"
    ] += 1


def test_ctrl_c_during_answer(
    tmp_path: Path, assert_valid: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = time.monotonic()
    calibration = [make_paused(tmp_path, TRIES + k, counting=True) for k in range(2)]
    to_marker, after = calibrate([answer_argv(p) for p in calibration], READY, True, ROOT)
    # Odd tries answer with the counting agent (and aim at its READY line); even ones with the
    # factory the session recorded (the demo's own), aimed from the start.
    paused = [make_paused(tmp_path, i, counting=i % 2 == 1) for i in range(TRIES)]
    jobs: list[Job] = []
    for i, p in enumerate(paused):
        rng = random.Random(f"{SEED}:answer:{i}")
        marker = READY if p.counting else None
        plan = random_plan(rng, to_marker, after, marker, on_stderr=True)
        extra = {ctrl_c_agent.OUTBOX: str(p.outbox)} if p.counting else {}
        jobs.append((answer_argv(p), plan, f"answer try {i}", extra))
    shots = fire_all(jobs, ROOT)
    seen: Counter[str] = Counter()
    failures: list[str] = []
    for p, shot in zip(paused, shots, strict=True):
        problems = judge(shot, seen, partial(check_resume, p, seen, assert_valid, monkeypatch))
        if problems:
            failures.append(f"{problems}\n{shot}")
    print(
        f"\nanswer: {TRIES} tries in {time.monotonic() - started:.1f} s (seed {SEED}; "
        f"{to_marker:.3f} s to READY, {after:.3f} s after it): {dict(seen)}"
    )
    assert not failures, f"{len(failures)} of {TRIES} tries failed:\n\n" + "\n\n".join(failures)


# --- the moment a sync call starts --------------------------------------------------------

WINDOW_CHILD = """
import os, signal, sys
import interlude._sync as sync
from interlude.cli._demo import PROMPT, build
from interlude.sessions import SQLiteStore

owns_sigint = sync._owns_sigint


def ctrl_c_now() -> bool:
    # A real SIGINT, delivered where run_sync has created the run's task but not yet put in
    # its own SIGINT handler: Python's default handler raises KeyboardInterrupt right here.
    os.kill(os.getpid(), signal.SIGINT)
    return owns_sigint()


db, session_id, what = sys.argv[1:4]
agent = build(SQLiteStore(db), session_id)
sync._owns_sigint = ctrl_c_now
try:
    if what == "resume":
        agent.resume({agent.interrupts[0].id: True})
    else:
        agent(PROMPT)
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
"""


@pytest.mark.parametrize("what", ["prompt", "resume"])
def test_ctrl_c_as_a_sync_call_starts_leaves_nothing_running(tmp_path: Path, what: str) -> None:
    """Ctrl-C a few bytecodes into ``agent(...)`` / ``agent.resume(...)``, before the call's
    SIGINT handler is in place (a window random tries rarely hit): KeyboardInterrupt, and the
    run never starts, not even later, while the process exits. The session is as it was: no
    claim, no stopped run; a resume's pause (and its question) is still there."""
    db, session_id = tmp_path / "w.db", "window"
    question_id = None
    if what == "resume":
        with SQLiteStore(db) as store:
            [question] = build_demo(store, session_id)(PROMPT).interrupts
        question_id = question.id
    before = load(db, session_id)
    proc = subprocess.run(
        [sys.executable, "-c", WINDOW_CHILD, str(db), session_id, what],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=HANG,
    )
    shown = f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert proc.stdout.strip() == "KeyboardInterrupt", shown
    stored = load(db, session_id)
    if before is None:
        assert stored is None or (stored.claim is None and stored.pause is None), shown
    else:
        assert stored is not None and stored.claim is None, f"a stale claim\n{shown}"
        with fresh_agent(db, session_id, build_demo) as agent:
            assert not agent.needs_recovery, f"a stopped run was left behind\n{shown}"
            assert [i.id for i in agent.interrupts] == [question_id], shown
        assert stored.version == before.version, "the session changed"
    assert "Task was destroyed" not in proc.stderr, shown
