"""The App the Slack tests run, in the test process and in a serving process: every tool run
appends one line to the file named by ``$SLACK_EFFECTS``, so a test counts runs across
processes. The prompt is the session's tag, which the tool call carries.

- ``payer``: ``pay(to)`` needs approval (the built-in approval question).
- ``deployer``: a hook asks ``ops`` before ``deploy(env)``: two different members must approve.
- ``shipper``: a hook asks which box (``small``, ``medium``, ``large``) before ``ship(size)``.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from interlude import Agent, AgentSession, App, ToolResult, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.testing import FunctionModel, ModelRequest

PEOPLE = {
    "U0ANA": {"name": "ana", "groups": ["ops"]},
    "U0BO": {"name": "bo", "groups": ["ops"]},
    "U0CY": {"name": "cy", "groups": ["ops"]},
    "U0DEV": {"name": "dev", "groups": ["devs"]},
    "U0GUEST": "guest",
}
"""The Slack users the door knows: three of ops, one of devs, one in no group."""


def effect(line: str) -> None:
    with open(os.environ["SLACK_EFFECTS"], "a", encoding="utf-8") as f:
        f.write(line + "\n")


def effects() -> list[str]:
    path = os.environ["SLACK_EFFECTS"]
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


@tool(needs_approval=True)
def pay(to: str) -> str:
    """Pay someone.

    Args:
        to: Who.
    """
    effect(f"pay {to}")
    return f"paid {to}"


@tool
def deploy(env: str) -> str:
    """Deploy the service.

    Args:
        env: Where to.
    """
    effect(f"deploy {env}")
    return f"deployed to {env}"


@tool
def ship(size: str) -> str:
    """Ship a parcel.

    Args:
        size: How big.
    """
    effect(f"ship {size}")
    return f"shipped {size}"


CALLS = {"payer": ("pay", "to"), "deployer": ("deploy", "env"), "shipper": ("ship", "size")}


def _model(agent: str) -> FunctionModel:
    name, key = CALLS[agent]

    def reply(request: ModelRequest) -> Any:
        if any(isinstance(b, ToolResult) for b in request.messages[-1].content):
            return "done."
        return [ToolUse("t1", name, {key: request.messages[0].text.strip()})]

    return FunctionModel(reply)


def two_of_ops(event: BeforeToolCallEvent) -> None:
    env = event.tool_use.input["env"]
    if event.interrupt("deploy", {"env": env}, approvers=["ops"], quorum=2) is not True:
        event.cancel("not approved")


def which_size(event: BeforeToolCallEvent) -> None:
    size = event.interrupt(
        "size",
        {"question": "Which box?"},
        response_type=Literal["small", "medium", "large"],
    )
    if size == "large":
        event.cancel("no large boxes today")


def build_app(notify: Any = None, inbox_url: str | None = None) -> App:
    """The App, with ``notify`` targets and the inbox's address."""
    app = App(notify=notify, inbox_url=inbox_url)
    tools = {"payer": [pay], "deployer": [deploy], "shipper": [ship]}
    hooks = {"deployer": two_of_ops, "shipper": which_size}
    for name in CALLS:

        def build(session: AgentSession, name: str = name) -> Agent:
            agent = Agent(
                _model(name), tools=tools[name], session=session.store, session_id=session.id
            )
            if name in hooks:
                agent.hooks.add_callback(BeforeToolCallEvent, hooks[name])
            return agent

        app.agent(name)(build)
    return app


app = build_app()
"""What a serving process answers for (no notifications: the test process sends them)."""
