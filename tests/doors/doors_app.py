"""The App the door tests serve with ``interlude serve --app tests.doors.doors_app:app`` (and
open in the test process, for a worker pass): every tool run appends one line to the file named by
``$DOORS_EFFECTS``, so a test counts runs across processes.

The model of every agent numbers its one tool call ``t1`` (as many real models do) and takes
the call's input from the prompt, which is the session's tag: two sessions differ only in what
they pay, deploy or refund.

- ``payer``: ``pay(to, cents)`` needs approval (the built-in approval question).
- ``deploys``: a hook asks two distinct members of ``ops`` before ``deploy(env)``.
- ``refunds``: ``refund(amount, to)`` needs approval; its own validation (a pydantic validator
  the JSON schema does not show) refuses an amount that is not positive.
- ``charges``: ``charge(to, cents)`` needs approval while a rule says so (a quota, a clock, a
  remote flag): for a ``to`` that :func:`flip` named, it says no more.

``$DOORS_BUILD_SECONDS`` makes building an agent take that long (as a factory that connects
to an MCP server or loads its configuration does): a race test sets it in one serving process
to hold open the time between a door's first read of a session and its claim on it.
"""

from __future__ import annotations

import os
import time
from typing import Annotated, Any

from pydantic import AfterValidator

from interlude import Agent, AgentSession, App, ToolResult, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.testing import FunctionModel, ModelRequest


def effect(line: str) -> None:
    with open(os.environ["DOORS_EFFECTS"], "a", encoding="utf-8") as f:
        f.write(line + "\n")


def effects(tag: str | None = None) -> list[str]:
    """The tool runs so far (those about ``tag`` only, when given)."""
    path = os.environ["DOORS_EFFECTS"]
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    return [line for line in lines if tag is None or line.split()[1] == tag]


@tool(needs_approval=True)
def pay(to: str, cents: int) -> str:
    """Pay someone.

    Args:
        to: Who.
        cents: How much.
    """
    effect(f"pay {to} {cents}")
    return f"paid {cents} to {to}"


@tool
def deploy(env: str) -> str:
    """Deploy the service.

    Args:
        env: Where to.
    """
    effect(f"deploy {env}")
    return f"deployed to {env}"


def positive(value: int) -> int:
    if value <= 0:
        raise ValueError("must be positive")
    return value


@tool(needs_approval=True)
def refund(amount: Annotated[int, AfterValidator(positive)], to: str) -> str:
    """Refund a customer.

    Args:
        amount: In cents, more than zero.
        to: Who.
    """
    effect(f"refund {to} {amount}")
    return f"refunded {amount} to {to}"


def _flips() -> str:
    return os.environ["DOORS_EFFECTS"] + ".flipped"


def flip(tag: str) -> None:
    """From now on, in every process, the rule of ``charge`` needs no approval for ``tag``."""
    with open(_flips(), "a", encoding="utf-8") as f:
        f.write(tag + "\n")


def _rule_asks(tool_input: dict[str, Any]) -> bool:
    if not os.path.exists(_flips()):
        return True
    with open(_flips(), encoding="utf-8") as f:
        return tool_input["to"] not in f.read().splitlines()


@tool(needs_approval=_rule_asks)
def charge(to: str, cents: int) -> str:
    """Charge a customer.

    Args:
        to: Who.
        cents: How much.
    """
    effect(f"charge {to} {cents}")
    return f"charged {cents} to {to}"


CALLS: dict[str, tuple[str, Any]] = {
    "payer": ("pay", lambda tag: {"to": tag, "cents": 100}),
    "deploys": ("deploy", lambda tag: {"env": tag}),
    "refunds": ("refund", lambda tag: {"amount": 300, "to": tag}),
    "charges": ("charge", lambda tag: {"to": tag, "cents": 700}),
}


def _model(agent: str) -> FunctionModel:
    name, make_input = CALLS[agent]

    def reply(request: ModelRequest) -> Any:
        results = [b for b in request.messages[-1].content if isinstance(b, ToolResult)]
        if results:
            return f"finished: {results[0].status}: {results[0].text}"
        tag = request.messages[0].text.strip()
        return [ToolUse("t1", name, make_input(tag))]

    return FunctionModel(reply)


def two_of_ops(event: BeforeToolCallEvent) -> None:
    answer = event.interrupt(
        "deploy", {"question": "Deploy?"}, approvers=["ops"], quorum=2, response_type=bool
    )
    if answer is not True:
        event.cancel("not approved")


def _build() -> None:
    time.sleep(float(os.environ.get("DOORS_BUILD_SECONDS", "0")))


app = App()


@app.agent("payer")
def _payer(session: AgentSession) -> Agent:
    _build()
    return Agent(_model("payer"), tools=[pay], session=session.store, session_id=session.id)


@app.agent("deploys")
def _deploys(session: AgentSession) -> Agent:
    _build()
    agent = Agent(_model("deploys"), tools=[deploy], session=session.store, session_id=session.id)
    agent.hooks.add_callback(BeforeToolCallEvent, two_of_ops)
    return agent


@app.agent("refunds")
def _refunds(session: AgentSession) -> Agent:
    _build()
    return Agent(_model("refunds"), tools=[refund], session=session.store, session_id=session.id)


@app.agent("charges")
def _charges(session: AgentSession) -> Agent:
    _build()
    return Agent(_model("charges"), tools=[charge], session=session.store, session_id=session.id)
