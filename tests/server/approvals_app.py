"""Agents whose questions say who may answer: ``deploys`` asks two of ``ops`` before a deploy
to production (escalating to ``leads`` after an hour); ``payments`` has a tool marked
``needs_approval`` (the built-in approval question). Tool runs are appended to ``RUNS``.

``LATE`` shifts the agents' clock back: a question raised with ``LATE[0] = 7200`` was asked two
hours ago, so it has escalated by now.
"""

from __future__ import annotations

import time

from interlude import Agent, AgentSession, App, ToolResult, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.testing import FunctionModel, ModelRequest

RUNS: list[str] = []
LATE = [0.0]


def clock() -> float:
    return time.time() - LATE[0]


@tool
def deploy(env: str) -> str:
    """Deploy the service.

    Args:
        env: Where to.
    """
    RUNS.append(f"deploy {env}")
    return f"deployed to {env}"


@tool(needs_approval=True)
def pay(amount: int, to: str) -> str:
    """Pay someone.

    Args:
        amount: In euros.
        to: Who is paid.
    """
    RUNS.append(f"pay {amount} to {to}")
    return f"paid {amount} to {to}"


CALLS = {"deploy": {"env": "prod"}, "pay": {"amount": 120, "to": "acme"}}


def _model(tool_name: str) -> FunctionModel:
    def reply(request: ModelRequest) -> str | list[ToolUse]:
        results = [b for b in request.messages[-1].content if isinstance(b, ToolResult)]
        if not results:
            return [ToolUse(f"call_{tool_name}", tool_name, CALLS[tool_name])]
        return f"finished: {results[0].status}: {results[0].text}"

    return FunctionModel(reply)


def two_of_ops(event: BeforeToolCallEvent) -> None:
    answer = event.interrupt(
        "deploy",
        {"question": "Deploy to production?"},
        approvers=["ops"],
        quorum=2,
        escalate_after=3600,
        escalate_to=["leads"],
    )
    if answer is not True:
        event.cancel("not approved")


app = App()


@app.agent("deploys")
def _deploys(session: AgentSession) -> Agent:
    agent = Agent(
        _model("deploy"),
        tools=[deploy],
        session=session.store,
        session_id=session.id,
        clock=clock,
    )
    agent.hooks.add_callback(BeforeToolCallEvent, two_of_ops)
    return agent


@app.agent("payments")
def _payments(session: AgentSession) -> Agent:
    return Agent(
        _model("pay"), tools=[pay], session=session.store, session_id=session.id, clock=clock
    )


PROMPTS = {"deploys": "Ship it", "payments": "Pay acme"}


def pause(name: str, session_id: str, store: object) -> str:
    """Start ``session_id`` on agent ``name`` and run it to its question; the question's id."""
    result = app.start(name, session_id, store)(PROMPTS[name])  # type: ignore[arg-type]
    assert result.stop_reason == "interrupt", result.stop_reason
    (question,) = result.interrupts
    return question.id
