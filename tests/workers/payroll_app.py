"""An operator's application for the worker tests: agent "payroll" pays, after approval.

Each real payment appends a line to the file named by $PAYROLL_LEDGER (or to ``LEDGER``),
so a test can count how often each tool call ran, also across worker processes.
"""

from __future__ import annotations

import json
import os
from typing import Any

from interlude import Agent, AgentSession, App, ToolResult, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.testing import FunctionModel, ModelRequest

app = App()
LEDGER: list[dict[str, Any]] = []
CLOCK: list[float] = []  # set to [now] to fix the time the agents see


@tool
def pay(to: str, cents: int) -> str:
    """Pay someone.

    Args:
        to: Who.
        cents: How much.
    """
    started = os.environ.get("PAYROLL_STARTED")
    if started:  # say the body started, then take long enough to be killed in the middle
        with open(started, "a", encoding="utf-8") as f:
            f.write(f"{to}\n")
        import time

        time.sleep(float(os.environ.get("PAYROLL_SLOW", "0")))
    entry = {"to": to, "cents": cents, "pid": os.getpid()}
    path = os.environ.get("PAYROLL_LEDGER")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
    else:
        LEDGER.append(entry)
    return f"paid {cents} to {to}"


def reply(request: ModelRequest) -> Any:
    last = request.messages[-1]
    if any(isinstance(b, ToolResult) for b in last.content):
        return "paid."
    to = last.text.split()[-1]
    return [ToolUse("p1", "pay", {"to": to, "cents": 100})]


def approve(event: BeforeToolCallEvent) -> None:
    expires = float(os.environ.get("PAYROLL_EXPIRES", "3600"))
    if event.interrupt("approve", {"pay": event.tool_use.input}, expires_in=expires) is not True:
        event.cancel("not approved")


@app.agent("payroll")
def build(session: AgentSession) -> Agent:
    clock = (lambda: CLOCK[0]) if CLOCK else None
    agent = Agent(
        FunctionModel(reply),
        tools=[pay],
        session=session.store,
        session_id=session.id,
        clock=clock,
        session_lease=float(os.environ.get("PAYROLL_LEASE", "30")),
    )
    agent.hooks.add_callback(BeforeToolCallEvent, approve)
    return agent
