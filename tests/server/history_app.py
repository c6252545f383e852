"""An agent whose history has every kind of step the inbox's history table shows: ``lister``
asks ``go_ahead`` before its run (a question about no tool call), then calls ``find``, a tool
that needs approval (the built-in question, about the call) and returns a JSON list, then
replies. ``run_through`` answers both as ana and lets a worker carry the session to its end.
"""

from __future__ import annotations

import asyncio

from interlude import Agent, AgentSession, App, Inbox, ToolResult, ToolUse, Worker, tool
from interlude.hooks import BeforeInvocationEvent
from interlude.testing import FunctionModel, ModelRequest

FOUND = [{"id": 7, "title": "disk full on web-1"}, {"id": 9, "title": "cert expires"}]


@tool(needs_approval=True)
def find(query: str) -> list[dict[str, object]]:
    """Find tickets.

    Args:
        query: What to look for.
    """
    return FOUND


def _reply(request: ModelRequest) -> str | list[ToolUse]:
    if any(isinstance(b, ToolResult) for b in request.messages[-1].content):
        return "Two tickets are open."
    return [ToolUse("call_find", "find", {"query": "open tickets"})]


def _go_ahead(event: BeforeInvocationEvent) -> None:
    event.interrupt("go_ahead", "Look through the tickets now?")


app = App()


@app.agent("lister")
def _lister(session: AgentSession) -> Agent:
    agent = Agent(FunctionModel(_reply), tools=[find], session=session.store, session_id=session.id)
    agent.hooks.add_callback(BeforeInvocationEvent, _go_ahead)
    return agent


def run_through(session_id: str, store: str) -> None:
    """Start ``session_id``, answer its two questions as ana (a worker applying each), and
    leave it finished."""
    (asked,) = app.start("lister", session_id, store)("What is open?").interrupts
    inbox = Inbox(store)
    for _ in range(2):
        inbox.record(session_id, {asked.id: True}, by="ana")
        asyncio.run(Worker(app, store).run_once())
        waiting = inbox.session(session_id).interrupts
        if not waiting:
            return
        (asked,) = waiting
    raise AssertionError("the session did not finish")
