"""The app of the fencing test: agent "payroll" (the worker tests' payroll agent: it pays after
an approval) whose ``pay`` freezes its own process (SIGSTOP) in the middle of its body when
``$FENCING_FREEZE`` is set, so a test knows for certain the call is under way, and stalled.

Run in a worker process from the repository root: ``--app tests.durability.fencing_app:app``.
"""

from __future__ import annotations

import json
import os
import signal

from interlude import Agent, AgentSession, App, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.testing import FunctionModel
from tests.workers.payroll_app import approve, reply

app = App()


@tool
def pay(to: str, cents: int) -> str:
    """Pay someone (stopped in the middle when ``$FENCING_FREEZE`` is set)."""
    if os.environ.get("FENCING_FREEZE"):  # stopped here until the test sends SIGCONT
        os.kill(os.getpid(), signal.SIGSTOP)
    with open(os.environ["FENCING_LEDGER"], "a", encoding="utf-8") as ledger:
        ledger.write(json.dumps({"to": to, "cents": cents, "pid": os.getpid()}) + "\n")
    return f"paid {cents} to {to}"


@app.agent("payroll")
def build(session: AgentSession) -> Agent:
    lease = float(os.environ.get("FENCING_LEASE", "30"))
    on = {"session": session.store, "session_id": session.id, "session_lease": lease}
    agent = Agent(FunctionModel(reply), tools=[pay], **on)
    agent.hooks.add_callback(BeforeToolCallEvent, approve)
    return agent
