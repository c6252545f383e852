"""Agents served over MCP in the tests (``--app tests.channels.mcp_app:app`` for the
processes the tests start):

- ``payments`` calls ``pay``, a tool marked ``needs_approval`` (the built-in approval);
- ``deploys`` asks ``Deploy to production?`` (a yes/no question) before ``deploy``, and only
  members of ``ops`` may answer;
- ``tickets`` asks ``How many seats?`` (a whole number, which has no decline) from inside
  ``book``.

Each tool run is appended to ``RUNS``, and, with $MCP_APP_RUNS set, to that file as a line of
JSON (the proof, across processes, of how often a tool ran).
"""

from __future__ import annotations

import json
import os
from typing import Any

from interlude import Agent, AgentSession, App, ToolContext, ToolResult, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.testing import FunctionModel, ModelRequest

RUNS: list[str] = []


def _ran(what: str) -> None:
    RUNS.append(what)
    path = os.environ.get("MCP_APP_RUNS")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"run": what, "pid": os.getpid()}) + "\n")


@tool(needs_approval=True)
def pay(amount: int, to: str) -> str:
    """Pay someone.

    Args:
        amount: In euros.
        to: Who is paid.
    """
    _ran(f"pay {amount} to {to}")
    return f"paid {amount} to {to}"


@tool
def deploy(env: str) -> str:
    """Deploy the service.

    Args:
        env: Where to.
    """
    _ran(f"deploy {env}")
    return f"deployed to {env}"


@tool
def book(show: str, context: ToolContext) -> str:
    """Book seats for a show.

    Args:
        show: Which show.
    """
    seats = context.interrupt("seats", reason=f"How many seats for {show}?", response_type=int)
    _ran(f"book {seats} for {show}")
    return f"booked {seats} seats for {show}"


CALLS: dict[str, dict[str, Any]] = {
    "pay": {"amount": 120, "to": "acme"},
    "deploy": {"env": "prod"},
    "book": {"show": "Hamlet"},
}


def _model(tool_name: str) -> FunctionModel:
    def reply(request: ModelRequest) -> str | list[ToolUse]:
        results = [b for b in request.messages[-1].content if isinstance(b, ToolResult)]
        if not results:
            return [ToolUse(f"call_{tool_name}", tool_name, CALLS[tool_name])]
        return f"finished: {results[0].status}: {results[0].text}"

    return FunctionModel(reply)


def ops_only(event: BeforeToolCallEvent) -> None:
    if event.tool_use.name != "deploy":
        return
    answer = event.interrupt(
        "deploy", reason="Deploy to production?", response_type=bool, approvers=["ops"]
    )
    if answer is not True:
        event.cancel("not approved")


app = App()


@app.agent("payments")
def _payments(session: AgentSession) -> Agent:
    return Agent(_model("pay"), tools=[pay], session=session.store, session_id=session.id)


@app.agent("deploys")
def _deploys(session: AgentSession) -> Agent:
    agent = Agent(_model("deploy"), tools=[deploy], session=session.store, session_id=session.id)
    agent.hooks.add_callback(BeforeToolCallEvent, ops_only)
    return agent


@app.agent("tickets")
def _tickets(session: AgentSession) -> Agent:
    return Agent(_model("book"), tools=[book], session=session.store, session_id=session.id)
