"""The agents the inbox tests answer for: each asks a person before its tool runs.

``ops`` asks a plain approval (no answer schema: Approve/Decline, or any JSON); ``refunds`` a
typed one (an object with a boolean and a bounded integer) with a deadline in an hour;
``triage`` a choice (a Literal).
Every tool run is appended to ``RUNS``, and to the file ``$INTERLUDE_TEST_RUNS`` when it is
set (for runs in another process).
"""

from __future__ import annotations

import json
import os
from typing import Literal

from pydantic import BaseModel, Field

from interlude import Agent, AgentSession, App, ToolResult, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.testing import FunctionModel, ModelRequest

RUNS: list[str] = []


def _ran(what: str) -> None:
    RUNS.append(what)
    path = os.environ.get("INTERLUDE_TEST_RUNS")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(what + "\n")


@tool
def deploy(service: str, version: str) -> str:
    """Deploy a service.

    Args:
        service: The service.
        version: The version to deploy.
    """
    _ran(f"deploy {service} {version}")
    return f"deployed {service} {version}"


@tool
def refund(order: str, amount: int) -> str:
    """Refund an order.

    Args:
        order: The order id.
        amount: How much, in cents.
    """
    _ran(f"refund {order} {amount}")
    return f"refunded {amount}"


@tool
def route(ticket: str) -> str:
    """Route a ticket.

    Args:
        ticket: The ticket id.
    """
    _ran(f"route {ticket}")
    return f"routed {ticket}"


CALLS = {
    "deploy": {"service": "web", "version": "1.2.3"},
    "refund": {"order": "A-1", "amount": 500},
    "route": {"ticket": "T-9"},
}


def _model(tool_name: str) -> FunctionModel:
    def reply(request: ModelRequest) -> str | list[ToolUse]:
        results = [b for b in request.messages[-1].content if isinstance(b, ToolResult)]
        if not results:
            return [ToolUse(f"call_{tool_name}", tool_name, CALLS[tool_name])]
        return f"finished: {results[0].status}: {results[0].text}"

    return FunctionModel(reply)


class Decision(BaseModel):
    approve: bool
    cap: int = Field(ge=0, description="the most that may be refunded, in cents")
    note: str = ""


def _ask_plain(event: BeforeToolCallEvent) -> None:
    answer = event.interrupt("approve", {"question": f"May the agent run {event.tool_use.name}?"})
    if answer is not True:
        event.cancel(f"declined: {json.dumps(answer)}")


def _ask_typed(event: BeforeToolCallEvent) -> None:
    decision = event.interrupt(
        "refund",
        {"order": "A-1"},
        response_type=Decision,
        expires_in=3600,
        default={"approve": False, "cap": 0},
    )
    if not decision.approve or event.tool_use.input["amount"] > decision.cap:
        event.cancel("refund not approved")


def _ask_choice(event: BeforeToolCallEvent) -> None:
    queue = event.interrupt(
        "queue", {"ticket": "T-9"}, response_type=Literal["billing", "tech", "drop"]
    )
    if queue == "drop":
        event.cancel("dropped")


app = App()


def _agent(session: AgentSession, tool_name: str, ask: object) -> Agent:
    tools = {"deploy": deploy, "refund": refund, "route": route}
    agent = Agent(
        _model(tool_name), tools=[tools[tool_name]], session=session.store, session_id=session.id
    )
    agent.hooks.add_callback(BeforeToolCallEvent, ask)  # type: ignore[arg-type]
    return agent


@app.agent("ops")
def _ops(session: AgentSession) -> Agent:
    return _agent(session, "deploy", _ask_plain)


@app.agent("refunds")
def _refunds(session: AgentSession) -> Agent:
    return _agent(session, "refund", _ask_typed)


@app.agent("triage")
def _triage(session: AgentSession) -> Agent:
    return _agent(session, "route", _ask_choice)


PROMPTS = {"ops": "Deploy web 1.2.3", "refunds": "Refund order A-1", "triage": "Route T-9"}


def pause(name: str, session_id: str, store: object) -> str:
    """Start ``session_id`` on agent ``name`` and run it to its question; the question's id."""
    agent = app.start(name, session_id, store)  # type: ignore[arg-type]
    result = agent(PROMPTS[name])
    assert result.stop_reason == "interrupt", result.stop_reason
    (question,) = result.interrupts
    return question.id


ODD = {"service": "x\ud800y", "version": "1.0\u202e# txt.gnp"}
"""The input of the ``odd`` agent's tool call: a lone surrogate and a bidi override."""


def _odd_reply(request: ModelRequest) -> str | list[ToolUse]:
    results = [b for b in request.messages[-1].content if isinstance(b, ToolResult)]
    if not results:
        return [ToolUse("call_odd", "deploy", dict(ODD))]
    return f"finished: {results[0].status}"


@app.agent("odd")
def _odd(session: AgentSession) -> Agent:
    agent = Agent(
        FunctionModel(_odd_reply), tools=[deploy], session=session.store, session_id=session.id
    )
    agent.hooks.add_callback(BeforeToolCallEvent, _ask_plain)  # type: ignore[arg-type]
    return agent


PROMPTS["odd"] = "Deploy the odd one"
