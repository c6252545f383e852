"""An operator's application for the notification tests: agent "payer" asks before it pays.

With $NOTIFY_KILL set, its notifications go to $NOTIFY_URL through a target that kills its
own process with SIGKILL ``before`` or ``after`` the POST (a crash between the question and
its notification, or between the send and marking it sent); $NOTIFY_LEASE is how long a
notifier holds a notification it delivers.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from typing import Any

from interlude import Agent, AgentSession, App, ToolResult, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.testing import FunctionModel, ModelRequest

PAID: list[str] = []


class Killer:
    """Delivers through ``inner``, but kills this process before or after doing so."""

    def __init__(self, inner: Any, when: str) -> None:
        self.inner, self.when, self.name = inner, when, f"killer {when}"

    async def send(self, message: Mapping[str, Any]) -> None:
        if self.when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        await self.inner.send(message)
        if self.when == "after":
            os.kill(os.getpid(), signal.SIGKILL)


def _notify() -> Any:
    kill = os.environ.get("NOTIFY_KILL")
    if not kill:
        return None
    from interlude.notify import Notifications, Webhook

    hook = Webhook(os.environ["NOTIFY_URL"], secret=os.environ.get("NOTIFY_SECRET"), retries=0)
    return Notifications(targets=(Killer(hook, kill),), lease=float(os.environ["NOTIFY_LEASE"]))


app = App(notify=_notify())


@tool
def pay(to: str) -> str:
    """Pay someone.

    Args:
        to: Who.
    """
    PAID.append(to)
    return f"paid {to}"


def reply(request: ModelRequest) -> Any:
    last = request.messages[-1]
    if any(isinstance(b, ToolResult) for b in last.content):
        return "paid."
    return [ToolUse("p1", "pay", {"to": last.text.split()[-1]})]


def approve(event: BeforeToolCallEvent) -> None:
    expires = float(os.environ.get("NOTIFY_EXPIRES", "3600"))
    if event.interrupt("approve", {"pay": event.tool_use.input}, expires_in=expires) is not True:
        event.cancel("not approved")


@app.agent("payer")
def build(session: AgentSession) -> Agent:
    agent = Agent(FunctionModel(reply), tools=[pay], session=session.store, session_id=session.id)
    agent.hooks.add_callback(BeforeToolCallEvent, approve)
    return agent
