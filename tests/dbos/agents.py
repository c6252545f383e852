"""The agents the DBOS tests run in a worker process: an App whose tools count their runs in
files (the worker is another process, killed by some tests), and a model that can be held.

The first user message is JSON: ``{"calls": [[tool, input], ...], "hold": PATH?}``: the model
asks for those calls once, then says "Done."; with ``hold``, every model call records itself in
``PATH.started`` (with how many messages it was given) and waits until ``PATH.release`` exists
(a test kills the worker meanwhile); with ``hold_from: N`` too, only from the N-th call
recorded there on.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from pydantic import BaseModel

from interlude import Agent, AgentSession, App, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.testing import FunctionModel
from interlude.testing._models import ModelRequest

app = App()


def record(path: str, what: str) -> int:
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"{os.getpid()} {what}\n")
    return len(Path(path).read_text(encoding="utf-8").splitlines())


def runs(path: str | Path) -> int:
    """How many lines ``path`` holds (0: none)."""
    p = Path(path)
    return len(p.read_text(encoding="utf-8").splitlines()) if p.exists() else 0


def _hold(path: str) -> None:
    released = Path(path + ".release")
    deadline = time.monotonic() + 120
    while not released.exists() and time.monotonic() < deadline:
        time.sleep(0.02)


@tool
def touch(path: str) -> str:
    """Record a run in a file.

    Args:
        path: The file.
    """
    record(path, "touch")
    return f"touched {path}"


@tool
def slow(path: str) -> str:
    """Record a start, wait until ``path.release`` exists, then record a run.

    Args:
        path: The file.
    """
    record(path + ".started", "slow")
    _hold(path)
    record(path, "slow")
    return "slow done"


def _reply(request: ModelRequest) -> str | list[ToolUse]:
    first = json.loads(getattr(request.messages[0].content[0], "text", "{}"))
    hold = first.get("hold")
    if hold:
        made = record(hold + ".started", f"model {len(request.messages)}")
        if made >= first.get("hold_from", 1):
            _hold(hold)
    last = request.messages[-1]
    if len(request.messages) > 1 and last.role == "user":
        return "Done."
    return [ToolUse(f"call_{i}", name, args) for i, (name, args) in enumerate(first["calls"])]


class Decision(BaseModel):
    approved: bool
    note: str = ""


def _approve(event: BeforeToolCallEvent) -> None:
    if event.interrupt("approve", reason=event.tool_use.name) is not True:
        event.cancel("not approved")


def _approve_typed(event: BeforeToolCallEvent) -> None:
    decision = event.interrupt("approve", reason=event.tool_use.name, response_type=Decision)
    if not decision.approved:
        event.cancel(f"declined: {decision.note}")


def _approve_by_deadline(event: BeforeToolCallEvent) -> None:
    answer = event.interrupt("approve", reason=event.tool_use.name, expires_in=2.0, default=True)
    if answer is not True:
        event.cancel("not approved")


def _agent(session: AgentSession) -> Agent:
    return Agent(
        FunctionModel(_reply), tools=[touch, slow], session=session.store, session_id=session.id
    )


@app.agent("plain")
def build_plain(session: AgentSession) -> Agent:
    return _agent(session)


@app.agent("approve")
def build_approve(session: AgentSession) -> Agent:
    agent = _agent(session)
    agent.hooks.add_callback(BeforeToolCallEvent, _approve)
    return agent


@app.agent("typed")
def build_typed(session: AgentSession) -> Agent:
    agent = _agent(session)
    agent.hooks.add_callback(BeforeToolCallEvent, _approve_typed)
    return agent


@app.agent("deadline")
def build_deadline(session: AgentSession) -> Agent:
    agent = _agent(session)
    agent.hooks.add_callback(BeforeToolCallEvent, _approve_by_deadline)
    return agent
