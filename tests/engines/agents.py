"""The App every engine of the conformance kit runs (embedded SQLite and PostgreSQL, Temporal,
DBOS): the same factories, tools and model, so the same questions, ids and audit trails.

Tools record each run as a line in ``$INTERLUDE_ENGINES_RUNS/<run>/<path>``: the tool's input is
a relative path, so it is the same on every engine, and ``<run>`` is what the test wrote in
``$INTERLUDE_ENGINES_RUNS/current`` before driving a run (one run at a time). Not the tool's
``context.agent.session_id``: under Temporal and DBOS it is None (see test_conformance's
``test_a_tool_sees_its_session``). The environment variable reaches the worker processes.
The first user message is JSON, ``[[tool, input], ...]``: the model asks for those calls once,
then says "Done."
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from interlude import Agent, AgentSession, App, ToolContext, ToolResult, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.multiagent import Graph
from interlude.testing import FunctionModel
from interlude.testing._models import ModelRequest

app = App()

RUNS = "INTERLUDE_ENGINES_RUNS"
"""The environment variable naming where the tools record their runs."""


def runs_dir(session_id: str) -> Path:
    return Path(os.environ[RUNS]) / session_id


def driving(session_id: str) -> None:
    """Make ``session_id`` the run the tools record for."""
    (Path(os.environ[RUNS]) / "current").write_text(session_id, encoding="utf-8")


def _full(context: ToolContext, path: str) -> Path:
    current = (Path(os.environ[RUNS]) / "current").read_text(encoding="utf-8")
    folder = runs_dir(current)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / path


def _record(full: Path, what: str) -> None:
    with open(full, "a", encoding="utf-8") as f:
        f.write(f"{os.getpid()} {what}\n")


def tool_runs(session_id: str) -> dict[str, int]:
    """How often each file of the session's runs was written (a line per run)."""
    folder = runs_dir(session_id)
    if not folder.is_dir():
        return {}
    return {
        p.name: len(p.read_text(encoding="utf-8").splitlines())
        for p in sorted(folder.iterdir())
        if not p.name.endswith(".release")
    }


@tool
def touch(path: str, context: ToolContext) -> str:
    """Record a run in a file.

    Args:
        path: The file.
    """
    _record(_full(context, path), "touch")
    return f"touched {path}"


@tool
def whoami(path: str, context: ToolContext) -> str:
    """Record the session id and idempotency key the tool's context gives.

    Args:
        path: The file.
    """
    seen = {
        "session_id": context.agent.session_id,
        "key": context.idempotency_key,
        "agent": context.agent.name,
        "tool_use_id": context.tool_use.id,
    }
    with open(_full(context, path), "a", encoding="utf-8") as f:
        f.write(json.dumps(seen) + "\n")
    return "seen"


@tool
def slow(path: str, context: ToolContext) -> str:
    """Record a start, wait until ``<path>.release`` exists (two minutes at most), record a
    run: a test kills the process running it meanwhile.

    Args:
        path: The file.
    """
    full = _full(context, path)
    _record(full.with_name(full.name + ".started"), "slow")
    released = full.with_name(full.name + ".release")
    deadline = time.monotonic() + 120
    while not released.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    _record(full, "slow")
    return "slow done"


def _reply(request: ModelRequest) -> str | list[ToolUse]:
    last = request.messages[-1]
    if len(request.messages) > 1 and last.role == "user":
        return "Done."
    calls = json.loads(getattr(request.messages[0].content[0], "text", "[]"))
    return [ToolUse(f"call_{i}", name, args) for i, (name, args) in enumerate(calls)]


def prompt(*calls: tuple[str, dict[str, str]]) -> str:
    return json.dumps([list(c) for c in calls])


class Decision(BaseModel):
    approved: bool
    note: str = ""


def _approve(event: BeforeToolCallEvent) -> None:
    if event.interrupt("approve", reason=dict(event.tool_use.input)) is not True:
        event.cancel("not approved")


def _approve_typed(event: BeforeToolCallEvent) -> None:
    decision = event.interrupt("approve", reason=event.tool_use.name, response_type=Decision)
    if not decision.approved:
        event.cancel(f"declined: {decision.note}")


def _approve_by_deadline(event: BeforeToolCallEvent) -> None:
    answer = event.interrupt("approve", reason=event.tool_use.name, expires_in=1.5, default=True)
    if answer is not True:
        event.cancel("not approved")


def _two_approve(event: BeforeToolCallEvent) -> None:
    if event.interrupt("deploy", dict(event.tool_use.input), quorum=2) is not True:
        event.cancel("not approved")


def _agent(session: AgentSession) -> Agent:
    return Agent(
        FunctionModel(_reply),
        tools=[touch, slow, whoami],
        session=session.store,
        session_id=session.id,
        session_lease=2.0,
    )


def _with(hook: Callable[[BeforeToolCallEvent], None]) -> Callable[[AgentSession], Agent]:
    def build(session: AgentSession) -> Agent:
        agent = _agent(session)
        agent.hooks.add_callback(BeforeToolCallEvent, hook)
        return agent

    return build


app.agent("plain")(_agent)
app.agent("approve")(_with(_approve))
app.agent("typed")(_with(_approve_typed))
app.agent("deadline")(_with(_approve_by_deadline))
app.agent("quorum")(_with(_two_approve))


def _undo_touch(input: dict[str, Any], result: Any, context: ToolContext) -> str:
    _record(_full(context, f"{input['path']}.undo"), "undo")
    return f"untouched {input['path']}"


@tool(compensate=_undo_touch)
def keep(path: str, context: ToolContext) -> str:
    """Record a run in a file; undone by recording in ``<path>.undo``.

    Args:
        path: The file.
    """
    _record(_full(context, path), "keep")
    return f"kept {path}"


@tool(needs_approval=True)
def gated(path: str, context: ToolContext) -> str:
    """Record a run in a file, once a person approved it.

    Args:
        path: The file.
    """
    _record(_full(context, path), "gated")
    return f"gated {path}"


def _one_by_one(request: ModelRequest) -> str | list[ToolUse]:
    """The prompt's calls one per turn (ids ``call_<i>``), then "Done."."""
    done = sum(1 for m in request.messages for b in m.content if isinstance(b, ToolResult))
    calls = json.loads(getattr(request.messages[0].content[0], "text", "[]"))
    if done < len(calls):
        name, args = calls[done]
        return [ToolUse(f"call_{done}", name, args)]
    return "Done."


@app.agent("undo")
def build_undo(session: AgentSession) -> Agent:
    """One call per turn, of ``keep`` (compensable) and ``gated`` (asks an approval)."""
    return Agent(
        FunctionModel(_one_by_one),
        tools=[keep, gated],
        session=session.store,
        session_id=session.id,
        session_lease=2.0,
    )


def _node_reply(node: str) -> Callable[[ModelRequest], str | list[ToolUse]]:
    """A graph node's model: the first line of its first user message is JSON ``{node:
    [[tool, input], ...]}``; the node asks for its calls once, then says what it did."""

    def reply(request: ModelRequest) -> str | list[ToolUse]:
        last = request.messages[-1]
        if len(request.messages) > 1 and last.role == "user":
            return f"{node} done."
        first = getattr(request.messages[0].content[0], "text", "{}")
        calls = json.loads(first.split("\n", 1)[0]).get(node, [])
        return [ToolUse(f"{node}_{i}", name, args) for i, (name, args) in enumerate(calls)]

    return reply


@app.graph("review")
def build_review(session: AgentSession) -> Graph:
    """Two nodes, ``draft`` then ``publish``; ``publish``'s tool calls ask an approval."""
    draft = Agent(FunctionModel(_node_reply("draft")), tools=[touch], name="draft")
    publish = Agent(FunctionModel(_node_reply("publish")), tools=[touch], name="publish")
    publish.hooks.add_callback(BeforeToolCallEvent, _approve)
    return Graph(
        {"draft": draft, "publish": publish},
        [("draft", "publish")],
        entry="draft",
        session=session.store,
        session_id=session.id,
    )


def temporal_tools() -> dict[str, Any]:
    """The Temporal workers' activity options: ``slow`` heartbeats, so a lost worker is
    noticed after a second."""
    from interlude.temporal import ActivityOptions

    return {
        "slow": ActivityOptions(
            start_to_close_timeout=timedelta(seconds=60), heartbeat_timeout=timedelta(seconds=1)
        )
    }
