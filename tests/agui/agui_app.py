"""The agents the AG-UI tests drive: each asks a person before its tool runs.

``ops`` reads its prompt: ``deploy`` asks one approval (a boolean) before deploying; ``both``
asks two at once (deploy and a typed refund); ``hurry`` asks one that expires in a second;
``slow`` asks before a tool that waits for the file ``$INTERLUDE_TEST_GATE`` to exist (a
window to kill the process in). Every tool run is appended to ``$INTERLUDE_TEST_RUNS``;
pauses are signed with ``$INTERLUDE_TEST_SIGNING_KEY`` when it is set.
"""

from __future__ import annotations

import os
import time

from pydantic import BaseModel, Field

from interlude import Agent, AgentSession, App, ToolResult, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.testing import FunctionModel, ModelRequest


def _ran(what: str) -> None:
    path = os.environ.get("INTERLUDE_TEST_RUNS")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(what + "\n")


@tool
def deploy(service: str) -> str:
    """Deploy a service.

    Args:
        service: The service.
    """
    _ran(f"deploy {service}")
    return f"deployed {service}"


@tool
def refund(order: str, amount: int) -> str:
    """Refund an order.

    Args:
        order: The order id.
        amount: In cents.
    """
    _ran(f"refund {order} {amount}")
    return f"refunded {amount}"


@tool
def migrate(table: str) -> str:
    """Migrate a table (slowly).

    Args:
        table: The table.
    """
    gate = os.environ.get("INTERLUDE_TEST_GATE")
    if gate:
        with open(gate + ".entered", "w") as f:
            f.write("entered")
        while not os.path.exists(gate):
            time.sleep(0.02)
    _ran(f"migrate {table}")
    return f"migrated {table}"


PLANS: dict[str, list[ToolUse]] = {
    "deploy": [ToolUse("c1", "deploy", {"service": "web"})],
    "both": [
        ToolUse("c1", "deploy", {"service": "web"}),
        ToolUse("c2", "refund", {"order": "A-1", "amount": 500}),
    ],
    "hurry": [ToolUse("c1", "deploy", {"service": "hot"})],
    "slow": [ToolUse("c1", "migrate", {"table": "users"})],
}


def _reply(request: ModelRequest) -> str | list[ToolUse]:
    last = request.messages[-1]
    results = [b for b in last.content if isinstance(b, ToolResult)]
    if results:
        return "Done: " + "; ".join(f"{r.status}: {r.text}" for r in results)
    return PLANS[last.text.strip().lower()]


class Refund(BaseModel):
    approve: bool
    cap: int = Field(ge=0)


def _ask(event: BeforeToolCallEvent) -> None:
    use = event.tool_use
    if use.name == "refund":
        decision = event.interrupt("refund", f"refund {use.input['amount']}?", response_type=Refund)
        if not decision.approve or use.input["amount"] > decision.cap:
            event.cancel("refund not approved")
        return
    expires = 1.0 if use.input.get("service") == "hot" else None
    answer = event.interrupt(
        "approve", f"may I run {use.name}?", response_type=bool, expires_in=expires
    )
    if answer is not True:
        event.cancel("declined")


app = App()


@app.agent("ops")
def build(session: AgentSession) -> Agent:
    agent = Agent(
        FunctionModel(_reply),
        tools=[deploy, refund, migrate],
        name="ops",
        session=session.store,
        session_id=session.id,
        signing_key=os.environ.get("INTERLUDE_TEST_SIGNING_KEY") or None,
    )
    agent.hooks.add_callback(BeforeToolCallEvent, _ask)
    return agent
