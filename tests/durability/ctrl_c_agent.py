"""Agents for the Ctrl-C and claim tests, run in child processes.

``build`` is the demo's agent (same model, tools, hook and interrupt ids) whose delete tool
also appends a line to ``$CTRL_C_OUTBOX`` each time it really runs, so a test can count the
runs; it is served by ``app`` (``interlude answer --app tests.durability.ctrl_c_agent:app``,
run from the repository root) and prints ``READY`` on stderr when the agent is built, just
before the resume.

``python ctrl_c_agent.py DB SESSION LOG LEASE UNTIL`` runs ``slow_agent`` to the end: its one
tool works until the file ``UNTIL`` exists (logging its start and end to ``LOG``) on a session
claimed with ``LEASE``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

from interlude import Agent, AgentSession, App, ToolUse, tool
from interlude.cli import _demo
from interlude.hooks import BeforeToolCallEvent
from interlude.sessions import SessionStore, SQLiteStore
from interlude.testing import FunctionModel, ScriptedModel

OUTBOX = "CTRL_C_OUTBOX"


@tool
def delete_files(paths: list[str]) -> str:
    """Delete files (simulated: nothing on this machine is touched).

    Args:
        paths: The files to delete.
    """
    outbox = os.environ.get(OUTBOX)
    if outbox:
        with open(outbox, "a", encoding="utf-8") as f:
            f.write(json.dumps({"paths": paths, "pid": os.getpid(), "at": time.time()}) + "\n")
    result: str = _demo.delete_files.fn(paths)
    return result


def build(store: SessionStore, session_id: str) -> Agent:
    """The demo agent, with the counting delete tool."""
    agent = Agent(
        FunctionModel(_demo._offline_reply),
        tools=[_demo.list_files, delete_files],
        system_prompt="You are a careful ops assistant. Ask before deleting anything.",
        session=store,
        session_id=session_id,
    )
    agent.hooks.add_callback(BeforeToolCallEvent, _demo._ask_before_risky_tools)
    print(f"READY {time.time()}", file=sys.stderr, flush=True)
    return agent


app = App()


@app.agent(_demo.NAME)
def _build_counting(session: AgentSession) -> Agent:
    return build(session.store, session.id)


def slow_agent(db: str, session_id: str, log: str, lease: float, until: str | None = None) -> Agent:
    """An agent whose one tool, ``slow`` (an async tool), works until the file ``until``
    exists (the test says when: a condition, not a duration)."""

    @tool
    async def slow() -> str:
        """Work for a while."""
        _note(log, f"start {os.getpid()}")
        while until is not None and not _exists(until):  # noqa: ASYNC110 (another process says)
            await asyncio.sleep(0.01)
        _note(log, f"end {os.getpid()}")
        return "worked until told to stop"

    return Agent(
        ScriptedModel([[ToolUse("t_slow", "slow", {})], "done"]),
        tools=[slow],
        session=SQLiteStore(db),
        session_id=session_id,
        session_lease=lease,
    )


def _exists(path: str) -> bool:
    return os.path.exists(path)


def _note(log: str, line: str) -> None:
    with Path(log).open("a") as f:
        f.write(line + "\n")


if __name__ == "__main__":
    db, sid, log, lease, until = sys.argv[1:6]
    result = slow_agent(db, sid, log, float(lease), until)("work slowly")
    print(json.dumps({"stop_reason": result.stop_reason, "reply": str(result)}))
