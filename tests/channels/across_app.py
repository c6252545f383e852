"""The App the kill tests serve (``interlude serve --app tests.channels.across_app:app --mcp``)
and run in a worker (``interlude worker --app tests.channels.across_app:app``): one agent,
``mover``, whose before-tool hook asks ``Go ahead?`` (a yes or no that anyone may answer)
before ``move(what)``; the prompt is the session's tag, which the call carries.

Every run of ``move`` appends to the file ``$ACROSS_EFFECTS`` names: ``start <tag> <pid>`` as
its body starts and ``done <tag> <pid>`` once its effect is made, so a test counts runs (and
sees which process made them) across processes.

A *gate* holds a process at one point of a session's run while the file
``$ACROSS_GATES/<session>.<point>`` exists, after writing ``<session>.<point>.held`` (its pid):
the test kills the process there. The points, in the order an answer reaches them:

- ``recorded``: the agent is built for a session whose answer waits in the store's answer
  queue (the floor recorded it and now carries the session on: nothing of the answer applied);
- ``applying``: the hook got the answer back (the resume that applies it is under way);
- ``tool``: inside ``move``'s body, before its effect.

The agents hold their session's claim for ``LEASE`` seconds (renewed while they run), so a
worker takes a killed process's session over soon after the kill.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from interlude import Agent, AgentSession, App, ToolResult, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.testing import FunctionModel, ModelRequest

LEASE = 2.0
"""The run claim's lease, in seconds (the default is 30)."""
HELD_FOR = 600.0
"""How long a gate holds at most (a test kills the process long before)."""
POINTS = ("recorded", "applying", "tool")


def _effect(line: str) -> None:
    with open(os.environ["ACROSS_EFFECTS"], "a", encoding="utf-8") as f:
        f.write(f"{line} {os.getpid()}\n")


def effects(path: Path, tag: str) -> list[tuple[str, int]]:
    """(``start`` or ``done``, pid) of each line about ``tag`` in the effects file ``path``."""
    if not path.exists():
        return []
    lines = [line.split() for line in path.read_text(encoding="utf-8").splitlines()]
    return [(kind, int(pid)) for kind, what, pid in lines if what == tag]


def gate(session: str, point: str) -> None:
    """Hold here while the test's file for ``session`` and ``point`` exists."""
    gates = os.environ.get("ACROSS_GATES")
    if not gates:
        return
    hold = Path(gates) / f"{session}.{point}"
    if not hold.exists():
        return
    held = hold.with_name(hold.name + ".held")
    writing = held.with_name(held.name + ".tmp")  # whole or absent: the test reads it once it
    writing.write_text(str(os.getpid()), encoding="utf-8")  # exists (a loaded machine showed
    os.replace(writing, held)  # it empty between its creation and its write)
    deadline = time.monotonic() + HELD_FOR
    while hold.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"held at {point} for {HELD_FOR:.0f} s: the test never came")
        time.sleep(0.05)


def _answer_waits(session: str) -> bool:
    """Whether an answer to ``session`` waits in the store's answer queue (SQLite, read here as
    any process would: the file ``$ACROSS_DB``)."""
    db = os.environ.get("ACROSS_DB")
    if not db or not os.path.exists(db):
        return False
    conn = sqlite3.connect(db, timeout=30)
    try:
        (count,) = conn.execute(
            "SELECT count(*) FROM answers WHERE session_id = ?", (session,)
        ).fetchone()
    finally:
        conn.close()
    return int(count) > 0


@tool
def move(what: str) -> str:
    """Move something.

    Args:
        what: What to move.
    """
    _effect(f"start {what}")
    gate(what, "tool")
    _effect(f"done {what}")
    return f"moved {what}"


def _reply(request: ModelRequest) -> Any:
    results = [b for b in request.messages[-1].content if isinstance(b, ToolResult)]
    if results:
        return f"finished: {results[0].status}: {results[0].text}"
    return [ToolUse("m1", "move", {"what": request.messages[0].text.strip()})]


def _go_ahead(event: BeforeToolCallEvent) -> None:
    what = str(event.tool_use.input["what"])
    if event.interrupt("go", reason=f"Move {what}?", response_type=bool) is not True:
        event.cancel("not approved")
        return
    gate(what, "applying")


app = App()


@app.agent("mover")
def _mover(session: AgentSession) -> Agent:
    if _answer_waits(session.id):
        gate(session.id, "recorded")
    agent = Agent(
        FunctionModel(_reply),
        tools=[move],
        session=session.store,
        session_id=session.id,
        session_lease=LEASE,
    )
    agent.hooks.add_callback(BeforeToolCallEvent, _go_ahead)
    return agent
