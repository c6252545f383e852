"""The crash matrix's processes: a scenario agent that SIGKILLs itself at a chosen point.

Run as a script (``python crash_child.py matrix ...``), in a fresh interpreter that has created
no event loop, store or thread, so it can ``fork``: every process below is a fork of it.

The scenario: the prompt is added; the model asks for two tools in one reply (a concurrent
batch); ``deploy`` (tool use ``c1``) needs approval from a before-tool hook, so the run pauses
while ``notify`` (``c2``) runs; the resume approves, ``deploy`` runs, and the model answers with
text. Phase 1 is the first invocation (up to the pause), phase 2 the resume (to the end). Every
hook event has a callback.

Instrumented points (a *point* is ``<label>#<k>``: the k-th time this process reached it):

- ``hook.<Event>.<key>.before`` / ``.after``: entering / leaving a callback (``key``: the tool
  use id, the message index ``m<i>`` or the conversation length ``L<n>``);
- ``tool.<id>.before_effect`` / ``.after_effect``: inside a tool, around its one side effect;
- ``model.L<n>``: the model was asked (conversation length ``n``);
- ``save.before`` / ``save.after``: around the store's save (``#k``: the k-th save), so "right
  after the pause is saved" and "after the claim of a resume" are points too.

``CRASH_AT=<point>`` makes the process SIGKILL itself there; without it (a counting pass) it
logs every point it reaches. Whatever the role, each process appends to ``events.jsonl``: the
points, each model request (``ask``), each tool side effect (``effect``), each save that came
back from the store (``commit``), and, for the recovering process, every in-doubt question
(``in_doubt``) and every refusal (``conflict``). Lines are single ``write``s to an O_APPEND
file, so a kill loses none of them.

Reproduce one point by hand (phase 2 needs the phase-1 pause first, as ``setup``)::

    python crash_child.py run --store sqlite --dir /tmp/x --role setup --phase 1
    CRASH_AT='save.after#1' python crash_child.py run --store sqlite --dir /tmp/x --phase 2
    python crash_child.py recover --store sqlite --dir /tmp/x
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from interlude import Agent, ToolContext, ToolResult, ToolUse, tool
from interlude.errors import SessionConflictError
from interlude.hooks import (
    AfterInvocationEvent,
    AfterModelCallEvent,
    AfterToolCallEvent,
    BeforeInvocationEvent,
    BeforeModelCallEvent,
    BeforeToolCallEvent,
    HookRegistry,
    MessageAddedEvent,
)
from interlude.sessions import (
    PendingQuery,
    SessionStore,
    SessionUpdate,
    StoredSession,
    open_store,
)
from interlude.testing import FunctionModel, ModelRequest
from interlude.testing._models import Turn

PROMPT = "Deploy the api and tell the team."
APPROVAL = "approve"
CALLS = {"c1": "deploy", "c2": "notify"}  # tool use id -> tool; c1 needs approval
LEASE = 30.0
KILLED = -signal.SIGKILL  # how a self-killed child's status reads (subprocess convention)
NOT_REACHED = 3  # exit code of a crash child that finished without reaching its point


# --- the event log and the kill switch --------------------------------------------------------


class Points:
    """Appends events to the log, and kills this process at ``crash_at`` (or counts points)."""

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


# --- the store wrapper ------------------------------------------------------------------------


def describe(pause: Any) -> str:
    """A short description of a stored pause slot, for reports: its steps and call phases."""
    if not isinstance(pause, dict):
        return "none"
    parts: list[str] = []
    step: Any = pause.get("step")
    while isinstance(step, dict):
        kind = str(step.get("kind"))
        if kind == "message_added":
            parts.append(f"message_added({step.get('index')})")
        elif kind == "tool_batch":
            calls = step.get("calls") or []
            phases = ",".join(f"{c['tool_use']['id']}={c['phase']}" for c in calls)
            parts.append(f"tool_batch[{phases}]")
        elif kind == "after_model_call":
            parts.append("after_model_call" + ("(reply)" if step.get("response") else ""))
        else:
            parts.append(kind)
        step = step.get("then")
    asked = [i.get("name") for i in pause.get("interrupts") or []]
    return ">".join(parts) + (f" asking {asked}" if asked else "")


class CrashStore:
    """Delegates to a real store; ``save`` is a kill point before and after the real save, and
    logs what the store committed (``count``: messages stored after it)."""

    def __init__(self, inner: SessionStore, points: Points) -> None:
        self.inner = inner
        self.points = points
        self.saves = 0

    async def load(self, session_id: str) -> StoredSession | None:
        return await self.inner.load(session_id)

    async def save(self, session_id: str, update: SessionUpdate) -> int:
        self.saves += 1
        self.points.reach("save.before")
        version = await self.inner.save(session_id, update)
        if update.pause is None:
            kind = "final" if update.claim is None else "journal"
        elif update.pending:
            kind = "pause"
        else:
            kind = "journal" if update.claim is not None else "release"
        self.points.event(
            "commit",
            n=self.saves,
            kind=kind,
            count=update.first_index + len(update.new_messages),
            claim=update.claim is not None,
            desc=describe(update.pause),
        )
        self.points.reach("save.after")
        return version

    async def pending_interrupts(self, query: PendingQuery | None = None) -> Any:
        return await self.inner.pending_interrupts(query)

    async def list_sessions(self) -> list[str]:
        return await self.inner.list_sessions()

    async def delete(self, session_id: str) -> None:
        await self.inner.delete(session_id)


# --- the scenario agent -----------------------------------------------------------------------


class Tracer:
    """One callback for every hook event, each a kill point on entry and on exit; the
    before-tool callback also asks for approval of ``deploy``."""

    def __init__(self, points: Points) -> None:
        self.points = points

    def register_hooks(self, registry: HookRegistry) -> None:
        registry.add_callback(BeforeInvocationEvent, self._wrap("BeforeInvocation", "-"))
        registry.add_callback(AfterInvocationEvent, self._wrap("AfterInvocation", "-"))
        registry.add_callback(MessageAddedEvent, self._wrap("MessageAdded", "m"))
        registry.add_callback(BeforeModelCallEvent, self._wrap("BeforeModelCall", "L"))
        registry.add_callback(AfterModelCallEvent, self._wrap("AfterModelCall", "L"))
        registry.add_callback(BeforeToolCallEvent, self._before_tool)
        registry.add_callback(AfterToolCallEvent, self._after_tool)

    def _wrap(self, name: str, key: str) -> Callable[[Any], None]:
        def callback(event: Any) -> None:
            count = len(event.agent.messages)
            where = {"-": "-", "m": f"m{count - 1}", "L": f"L{count}"}[key]
            self.points.reach(f"hook.{name}.{where}.before")
            self.points.reach(f"hook.{name}.{where}.after")

        return callback

    def _before_tool(self, event: BeforeToolCallEvent) -> None:
        label = f"hook.BeforeToolCall.{event.tool_use.id}"
        self.points.reach(f"{label}.before")
        if event.tool_use.name == "deploy" and event.interrupt(APPROVAL) is not True:
            event.cancel("not approved")
        self.points.reach(f"{label}.after")

    def _after_tool(self, event: AfterToolCallEvent) -> None:
        label = f"hook.AfterToolCall.{event.tool_use.id}"
        self.points.reach(f"{label}.before")
        self.points.reach(f"{label}.after")


_POINTS: list[Points] = []  # this process's log (the tools are built once, before forking)


async def _effect(context: ToolContext, what: str) -> str:
    points = _POINTS[-1]
    tool_use_id = context.tool_use.id
    points.reach(f"tool.{tool_use_id}.before_effect")
    points.event("effect", id=tool_use_id, tool=context.tool_use.name)
    points.reach(f"tool.{tool_use_id}.after_effect")
    return what


@tool
async def deploy(service: str, context: ToolContext) -> str:
    """Deploy a service.

    Args:
        service: The service.
    """
    return await _effect(context, f"deployed {service}")


@tool
async def notify(text: str, context: ToolContext) -> str:
    """Tell the team.

    Args:
        text: The message.
    """
    return await _effect(context, f"notified: {text}")


def build(store: SessionStore, session_id: str, points: Points) -> Agent:
    """The scenario agent on ``store`` (wrapped so saves are kill points)."""
    _POINTS[:] = [points]

    def reply(request: ModelRequest) -> Turn:
        n = len(request.messages)
        points.event("ask", length=n)
        points.reach(f"model.L{n}")
        if n == 1:
            return [
                ToolUse("c1", "deploy", {"service": "api"}),
                ToolUse("c2", "notify", {"text": "deploying api"}),
            ]
        if n == 3:
            results = request.messages[2].content
            summary = ", ".join(
                f"{r.tool_use_id}={r.status}" for r in results if isinstance(r, ToolResult)
            )
            return f"finished: {summary}"
        raise AssertionError(f"the scenario has no reply for {n} messages")

    return Agent(
        FunctionModel(reply),
        tools=[deploy, notify],
        hooks=[Tracer(points)],
        session=CrashStore(store, points),
        session_id=session_id,
        session_lease=LEASE,
    )


# --- the processes ----------------------------------------------------------------------------


def open_point_store(store: str, directory: Path) -> SessionStore:
    """``store`` is "sqlite" (a database file in ``directory``) or a postgresql:// URL."""
    if store == "sqlite":
        return open_store(f"sqlite:///{directory / 'sessions.db'}")
    return open_store(store)


def session_id_for(directory: Path) -> str:
    return f"crash-{directory.name}"


def close(store: SessionStore) -> None:
    closer = getattr(store, "close", None)
    if callable(closer):
        closer()


def run_phase(store_name: str, directory: Path, role: str, phase: int) -> int:
    """Run phase 1 (the prompt, up to the pause) or 2 (approve and carry on to the end)."""
    points = Points(directory / "events.jsonl", role, os.environ.get("CRASH_AT"))
    store = open_point_store(store_name, directory)
    try:
        agent = build(store, session_id_for(directory), points)
        if phase == 1:
            result = agent(PROMPT)
            expected = "interrupt"
        else:
            [question] = agent.interrupts
            result = agent.resume({question.id: True})
            expected = "end_turn"
        if result.stop_reason != expected:
            points.event("unexpected", stop_reason=result.stop_reason)
            return 2
    finally:
        close(store)
    return NOT_REACHED if role == "crash" and points.crash_at is not None else 0


def stored(store: SessionStore, session_id: str) -> dict[str, Any] | None:
    loaded = asyncio.run(store.load(session_id))
    return None if loaded is None else dataclasses.asdict(loaded)


def recover(store_name: str, directory: Path) -> dict[str, Any]:
    """The recovery driver: build the agent, carry it on (recover, answer, or start the
    invocation if nothing was stored) until the invocation ends, in this one process."""
    points = Points(directory / "events.jsonl", "recover", None)
    store = open_point_store(store_name, directory)
    session_id = session_id_for(directory)
    report: dict[str, Any] = {"rounds": [], "error": None}
    try:
        report["snapshot"] = stored(store, session_id)
        started = time.monotonic()
        agent = build(store, session_id, points)
        for _ in range(8):
            if agent.needs_recovery:
                report["rounds"].append("recover")
                result = agent.recover()
            elif agent.is_paused:
                answers: dict[str, Any] = {}
                for question in agent.interrupts:
                    if question.source == "in_doubt":
                        assert question.tool_use is not None
                        points.event("in_doubt", id=question.tool_use.id, name=question.name)
                        answers[question.id] = "fail"
                    elif question.name == APPROVAL:
                        answers[question.id] = True
                    else:
                        raise AssertionError(f"unexpected question {question!r}")
                report["rounds"].append(f"resume {sorted(answers.values(), key=str)}")
                result = agent.resume(answers)
            elif not agent.messages:  # nothing was stored: the invocation never started
                report["rounds"].append("prompt")
                result = agent(PROMPT)
            else:
                break
            report["rounds"][-1] += f" -> {result.stop_reason}"
        else:
            raise AssertionError(f"no end after {report['rounds']}")
        report["seconds"] = time.monotonic() - started
    except SessionConflictError as exc:
        points.event("conflict", message=str(exc))
        report["error"] = f"SessionConflictError: {exc}"
    except BaseException:
        report["error"] = traceback.format_exc()
    try:
        report["final"] = stored(store, session_id)
    finally:
        close(store)
    return report


# --- the matrix: one clean parent forks every process -----------------------------------------


def fork(fn: Callable[[], int]) -> int:
    """Run ``fn`` in a forked child; return its status as subprocess does (-9: SIGKILLed)."""
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
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def crash_point(store: str, directory: Path, phase: int, point: str | None) -> dict[str, Any]:
    """One cell: (phase 2: a setup process pauses) a process dies at ``point``; a fresh one
    recovers. ``point=None`` is the counting pass: the run goes through, logging its points."""
    directory.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    out: dict[str, Any] = {"phase": phase, "point": point, "dir": str(directory)}
    if phase == 2:
        out["setup"] = fork(lambda: run_phase(store, directory, "setup", 1))
    if point is None:
        os.environ.pop("CRASH_AT", None)
    else:
        os.environ["CRASH_AT"] = point
    out["crash"] = fork(lambda: run_phase(store, directory, "crash", phase))
    os.environ.pop("CRASH_AT", None)
    if point is not None:
        out.update(recover(store, directory))
    log = directory / "events.jsonl"
    lines = log.read_text().splitlines() if log.exists() else []
    out["events"] = [json.loads(line) for line in lines]
    out["cell_seconds"] = time.monotonic() - started
    return out


def matrix(store: str, root: Path, jobs: int) -> dict[str, Any]:
    """Count the points of both phases, then run every point, ``jobs`` cells at a time."""
    started = time.monotonic()
    counts = {phase: crash_point(store, root / f"count{phase}", phase, None) for phase in (1, 2)}
    cells: list[tuple[int, str]] = []
    for phase, counted in counts.items():
        cells += [(phase, e["point"]) for e in counted["events"] if e["ev"] == "point"]
    running: dict[int, int] = {}
    for i, (phase, point) in enumerate(cells):
        while len(running) >= jobs:
            pid, _ = os.wait()
            running.pop(pid, None)
        pid = os.fork()
        if pid == 0:
            code = 1
            directory = root / f"p{i:03d}"
            try:
                cell = crash_point(store, directory, phase, point)
                code = 0
            except BaseException:
                cell = {"phase": phase, "point": point, "error": traceback.format_exc()}
            try:
                (directory / "cell.json").write_text(json.dumps(cell))
            finally:
                os._exit(code)
        running[pid] = i
    while running:
        pid, _ = os.wait()
        running.pop(pid, None)
    results: list[dict[str, Any]] = []
    for i, (phase, point) in enumerate(cells):
        path = root / f"p{i:03d}" / "cell.json"
        if path.exists():
            results.append(json.loads(path.read_text()))
        else:
            results.append({"phase": phase, "point": point, "error": "the cell's process failed"})
    return {
        "counts": {str(p): c for p, c in counts.items()},
        "cells": results,
        "seconds": time.monotonic() - started,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["matrix", "run", "recover"])
    parser.add_argument("--store", required=True, help='"sqlite" or a postgresql:// URL')
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--phase", type=int, default=1)
    parser.add_argument("--role", default="crash")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    if args.command == "run":
        return run_phase(args.store, args.dir, args.role, args.phase)
    if args.command == "recover":
        print(json.dumps(recover(args.store, args.dir), indent=2))
        return 0
    # Load once, before forking, what every child would load (no connection, loop or thread).
    import importlib

    driver = ["interlude.sessions._sqlite"]
    if args.store != "sqlite":
        driver = ["interlude.sessions._postgres", "psycopg", "psycopg_pool"]
    for module in [*driver, "interlude._agent._persist", "interlude._agent._loop"]:
        importlib.import_module(module)
    deploy.spec, notify.spec  # noqa: B018  (builds the tools' validators once, for every fork)
    import gc

    gc.freeze()  # the children share these pages: keep the collector from touching them

    result = matrix(args.store, args.dir, args.jobs)
    out = args.out or args.dir / "matrix.json"
    out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
