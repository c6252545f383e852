"""The graph crash matrix's processes: a three-node graph that SIGKILLs itself at a chosen point.

Run as a script (``python graph_crash_child.py matrix --store sqlite --dir D``) in a fresh
interpreter that has made no event loop, store or thread, so that every process below is a
``fork`` of it (the agent's matrix, tests/durability/crash_child.py, works the same way).

The scenario: ``research -> review -> publish``. Each node's model asks for its one tool, then
answers with the tool's result in its text. ``research``'s tool is ``fetch``, ``publish``'s is
``post``; ``review``'s tool ``sign`` asks a person (``approve``) before its side effect, so the
graph pauses inside ``review``. Phase 1 is the first invocation (to that pause), phase 2 the
resume (to the end).

Two more scenarios (``--scenario``), the same agents and tools in other shapes:

- ``swarm``: a swarm of ``research`` and ``review``; ``research``'s model asks for ``fetch`` and
  the handoff to ``review`` in one turn, then answers; ``review`` pauses as above.
- ``nested``: ``research -> team -> publish``, where ``team`` is a swarm whose one agent is
  ``review`` (so the approval is asked two levels down, and ``team`` keeps its own record in its
  own session). The node hooks are on every level, so ``node.review.*`` are points too.
- ``member``: a swarm of ``research`` and ``team``, a graph whose one node is ``review``:
  ``research`` hands off to the graph member, whose agent pauses (a swarm member that is a
  graph: it ends the swarm's run with its reply).

Instrumented points (``<label>#<k>``, the k-th time this process reached the label):

- ``node.<n>.before`` / ``node.<n>.after``: the graph's ``BeforeNodeCallEvent`` (before a node
  starts) and ``AfterNodeCallEvent`` (it finished; the graph has not saved its record yet);
- ``tool.<t>.before_effect`` / ``.after_effect``: inside a tool, around its one side effect;
- ``model.<n>.L<k>``: node ``n``'s model was asked (conversation length ``k``);
- ``save.<who>.before`` / ``.after``: around every store save, ``who`` being ``graph`` (the
  graph's record: its claim, each node recorded, the pause, the end) or a node's name (that
  node agent's own saves: its claim, journal, pause, end).

Every process appends events to ``events.jsonl`` (single ``write``s to an O_APPEND file, so a
kill loses none): the points, each model request (``ask``), each side effect (``effect``),
each node that finished (``node_done``), each save the store committed (``commit``), and for
the recovering process the in-doubt questions and any refusal (``conflict``).
"""

from __future__ import annotations

import argparse
import asyncio
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
from interlude.multiagent import HANDOFF, AfterNodeCallEvent, BeforeNodeCallEvent, Graph, Swarm
from interlude.sessions import PendingQuery, SessionStore, SessionUpdate, StoredSession, open_store
from interlude.testing import FunctionModel, ModelRequest
from interlude.testing._models import Turn

PROMPT = "Ship the release notes."
NODES = ("research", "review", "publish")
TOOLS = {"research": "fetch", "review": "sign", "publish": "post"}
RESULTS = {"fetch": "fetched 3 changes", "sign": "signed", "post": "posted"}
APPROVAL = "approve"
LEASE = 30.0
NOT_REACHED = 3
SCENARIO = ["flat"]  # set by main (before any fork)
ORDER = {
    "flat": NODES,
    "swarm": ("research", "review"),
    "nested": ("research", "team", "publish"),
    "member": ("research", "team"),
}
"""The top level's nodes in the order they finish."""
AGENTS = {
    "flat": NODES,
    "swarm": ("research", "review"),
    "nested": NODES,
    "member": ("research", "review"),
}
"""The agents (at any level) of each scenario."""


class Points:
    """Appends events to the log, and kills this process at ``crash_at`` (or logs points)."""

    def __init__(self, log: Path, role: str, crash_at: str | None) -> None:
        self.log, self.role, self.crash_at = log, role, crash_at
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


class CrashStore:
    """Delegates to a real store; each save is a kill point before and after, and is logged."""

    def __init__(self, inner: SessionStore, points: Points, graph_id: str) -> None:
        self.inner, self.points, self.graph_id = inner, points, graph_id

    def _who(self, session_id: str) -> str:
        return "graph" if session_id == self.graph_id else session_id.rsplit(":", 1)[-1]

    async def load(self, session_id: str) -> StoredSession | None:
        return await self.inner.load(session_id)

    async def save(self, session_id: str, update: SessionUpdate) -> int:
        who = self._who(session_id)
        self.points.reach(f"save.{who}.before")
        version = await self.inner.save(session_id, update)
        record = (update.state or {}).get("interlude.orchestration")
        status = record.get("status") if isinstance(record, dict) else None
        self.points.event(
            "commit", who=who, claim=update.claim is not None, paused=bool(update.pending),
            status=status, final=update.pause is None and update.claim is None,
        )  # fmt: skip
        self.points.reach(f"save.{who}.after")
        return version

    async def pending_interrupts(self, query: PendingQuery | None = None) -> Any:
        return await self.inner.pending_interrupts(query)

    async def list_sessions(self) -> list[str]:
        return await self.inner.list_sessions()

    async def delete(self, session_id: str) -> None:
        await self.inner.delete(session_id)

    async def audit_trail(self, session_id: str) -> Any:
        return await self.inner.audit_trail(session_id)


_POINTS: list[Points] = []


async def _effect(context: ToolContext) -> str:
    points, name = _POINTS[-1], context.tool_use.name
    points.reach(f"tool.{name}.before_effect")
    points.event("effect", tool=name)
    points.reach(f"tool.{name}.after_effect")
    return RESULTS[name]


@tool
async def fetch(context: ToolContext) -> str:
    """Fetch the changes."""
    return await _effect(context)


@tool
async def sign(context: ToolContext) -> str:
    """Sign the release, once a person approved it."""
    if context.interrupt(APPROVAL, reason="sign the release?") is not True:
        return "not approved"
    return await _effect(context)


@tool
async def post(context: ToolContext) -> str:
    """Post the notes."""
    return await _effect(context)


def expected_text(node: str) -> str:
    """The final text of a top-level node (``team`` says what its ``review`` said)."""
    agent = "review" if node == "team" else node
    return f"{agent} done: {RESULTS[TOOLS[agent]]}"


def _model(node: str, points: Points) -> FunctionModel:
    def reply(request: ModelRequest) -> Turn:
        n = len(request.messages)
        points.event("ask", node=node, length=n)
        points.reach(f"model.{node}.L{n}")
        if n == 1:
            use = ToolUse(f"{node}-1", TOOLS[node], {})
            if SCENARIO[0] in ("swarm", "member") and node == "research":
                target = "review" if SCENARIO[0] == "swarm" else "team"
                message = {"agent_name": target, "message": "sign it"}
                return [use, ToolUse(f"{node}-h", HANDOFF, message)]
            return [use]
        if n == 3:
            results = [
                b
                for b in request.messages[2].content
                if isinstance(b, ToolResult) and b.tool_use_id == f"{node}-1"
            ]
            return f"{node} done: " + ", ".join(r.content[0].text for r in results)  # type: ignore[union-attr]
        raise AssertionError(f"node {node} has no reply for {n} messages")

    return FunctionModel(reply)


def build(store: SessionStore, graph_id: str, points: Points) -> Graph | Swarm:
    """The scenario's graph or swarm on ``store`` (wrapped so every save is a kill point)."""
    _POINTS[:] = [points]
    tools = {"fetch": fetch, "sign": sign, "post": post}
    agents = {
        n: Agent(_model(n, points), tools=[tools[TOOLS[n]]], name=n, session_lease=LEASE)
        for n in NODES
    }

    def before(event: BeforeNodeCallEvent) -> None:
        points.reach(f"node.{event.node}.before")

    def after(event: AfterNodeCallEvent) -> None:
        points.event("node_done", node=event.node)
        points.reach(f"node.{event.node}.after")

    settings: dict[str, Any] = {
        "session": CrashStore(store, points, graph_id),
        "session_id": graph_id,
        "name": "release",
        "session_lease": LEASE,
    }
    graph: Graph | Swarm
    if SCENARIO[0] == "swarm":
        graph = Swarm([agents["research"], agents["review"]], entry="research", **settings)
    elif SCENARIO[0] == "member":
        team = Graph({"review": agents["review"]}, entry="review", name="team")
        team.hooks.add_callback(BeforeNodeCallEvent, before)  # copied with it
        team.hooks.add_callback(AfterNodeCallEvent, after)
        graph = Swarm([agents["research"], team], entry="research", **settings)
    else:
        middle: Agent | Swarm = agents["review"]
        if SCENARIO[0] == "nested":  # its hooks are copied with it: every level's nodes
            middle = Swarm([agents["review"]], name="team", session_lease=LEASE)
            middle.hooks.add_callback(BeforeNodeCallEvent, before)
            middle.hooks.add_callback(AfterNodeCallEvent, after)
        key = str(middle.name)
        graph = Graph(
            {"research": agents["research"], key: middle, "publish": agents["publish"]},
            [("research", key), (key, "publish")],
            entry="research",
            **settings,
        )
    graph.hooks.add_callback(BeforeNodeCallEvent, before)
    graph.hooks.add_callback(AfterNodeCallEvent, after)
    return graph


def open_point_store(store: str, directory: Path) -> SessionStore:
    if store == "sqlite":
        return open_store(f"sqlite:///{directory / 'sessions.db'}")
    if store == "file":
        return open_store(f"file://{directory / 'sessions'}")
    return open_store(store)


def graph_id_for(directory: Path) -> str:
    return f"g-{directory.name}"


def close(store: SessionStore) -> None:
    closer = getattr(store, "close", None)
    if callable(closer):
        closer()


def run_phase(store_name: str, directory: Path, role: str, phase: int) -> int:
    points = Points(directory / "events.jsonl", role, os.environ.get("CRASH_AT"))
    store = open_point_store(store_name, directory)
    try:
        graph = build(store, graph_id_for(directory), points)
        if phase == 1:
            result, expected = graph(PROMPT), "interrupt"
        else:
            [question] = graph.interrupts
            result, expected = graph.resume({question.id: True}), "end_turn"
        if result.stop_reason != expected:
            points.event("unexpected", stop_reason=result.stop_reason)
            return 2
    finally:
        close(store)
    return NOT_REACHED if role == "crash" and points.crash_at is not None else 0


def _effects(log: Path) -> set[str]:
    lines = log.read_text().splitlines() if log.exists() else []
    return {e["tool"] for e in map(json.loads, lines) if e["ev"] == "effect"}


def recover(store_name: str, directory: Path) -> dict[str, Any]:
    """A fresh process drives the graph to its end: ``recover()`` a stopped run, answer a
    pause (approve: yes; an in-doubt call: its real result if its effect is in the log, else
    run it again), or give the task if nothing was stored."""
    log = directory / "events.jsonl"
    points = Points(log, "recover", None)
    store = open_point_store(store_name, directory)
    graph_id = graph_id_for(directory)
    report: dict[str, Any] = {"rounds": [], "error": None}
    try:
        graph = build(store, graph_id, points)
        for _ in range(8):
            if graph.needs_recovery:
                report["rounds"].append("recover")
                result = graph.recover()
            elif graph.is_paused:
                answers: dict[str, Any] = {}
                for question in graph.interrupts:
                    if question.source == "in_doubt":
                        assert question.tool_use is not None
                        name = question.tool_use.name
                        points.event("in_doubt", tool=name)
                        done = name in _effects(log)
                        answers[question.id] = {"result": RESULTS[name]} if done else "rerun"
                    elif question.name == APPROVAL:
                        answers[question.id] = True
                    else:
                        raise AssertionError(f"unexpected question {question!r}")
                report["rounds"].append(f"resume {sorted(map(str, answers.values()))}")
                result = graph.resume(answers)
            elif asyncio.run(store.load(graph_id)) is None:
                report["rounds"].append("task")
                result = graph(PROMPT)
            else:
                break
            report["rounds"][-1] += f" -> {result.stop_reason}"
        else:
            raise AssertionError(f"no end after {report['rounds']}")
    except SessionConflictError as exc:
        points.event("conflict", message=str(exc))
        report["error"] = f"SessionConflictError: {exc}"
    except BaseException:
        report["error"] = traceback.format_exc()
    try:
        final = asyncio.run(store.load(graph_id))
        report["final"] = None if final is None else final.state.get("interlude.orchestration")
        report["claim"] = None if final is None else final.claim
    finally:
        close(store)
    return report


# --- the matrix: one clean parent forks every process ------------------------------------------


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


def cell(store: str, directory: Path, phase: int, point: str | None) -> dict[str, Any]:
    """(Phase 2: a setup process pauses first.) A process dies at ``point``; a fresh one
    recovers. ``point=None`` is the counting pass."""
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
    out["events"] = [json.loads(x) for x in (log.read_text().splitlines() if log.exists() else [])]
    out["seconds"] = time.monotonic() - started
    return out


def matrix(store: str, root: Path, jobs: int) -> dict[str, Any]:
    """Count the points of both phases, then run every point, ``jobs`` cells at a time."""
    started = time.monotonic()
    counts = {phase: cell(store, root / f"count{phase}", phase, None) for phase in (1, 2)}
    cells = [
        (phase, e["point"])
        for phase, c in counts.items()
        for e in c["events"]
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
                out = cell(store, directory, phase, point)
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


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["matrix", "run", "recover"])
    parser.add_argument("--store", required=True, help='"sqlite", "file" or a postgresql:// URL')
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--phase", type=int, default=1)
    parser.add_argument("--role", default="crash")
    parser.add_argument("--scenario", choices=sorted(ORDER), default="flat")
    args = parser.parse_args(argv)
    SCENARIO[0] = args.scenario
    args.dir.mkdir(parents=True, exist_ok=True)
    if args.command == "run":
        return run_phase(args.store, args.dir, args.role, args.phase)
    if args.command == "recover":
        print(json.dumps(recover(args.store, args.dir), indent=2))
        return 0
    import importlib

    for module in [
        "interlude.sessions._sqlite",
        "interlude.sessions._file",
        "interlude._agent._loop",
        "interlude._agent._persist",
    ]:
        importlib.import_module(module)
    fetch.spec, sign.spec, post.spec  # noqa: B018  (built once, before forking)
    import gc

    gc.freeze()
    (args.dir / "matrix.json").write_text(json.dumps(matrix(args.store, args.dir, args.jobs)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
