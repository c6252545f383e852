"""The demo agent: it wants to run a risky tool, and a before-tool hook asks a person first.

``app`` is the built-in demo application (one agent, ``"demo"``): the ``interlude`` command
uses it when no ``--app`` is given, the same kind of :class:`~interlude.App` a user passes as
``--app module:attribute``. Offline the agent runs on a FunctionModel that plays a careful ops
assistant; with ``model`` (``"provider:name"``) it runs on that model.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .. import Agent, AgentSession, App, ToolResult, ToolUse, tool
from ..hooks import BeforeToolCallEvent
from ..models import model_from_string
from ..testing import FunctionModel, ModelRequest
from ._defaults import DEMO_AGENT

if TYPE_CHECKING:
    from ..sessions import SessionStore

__all__ = ["NAME", "PROMPT", "app", "build", "choose_model"]

NAME = DEMO_AGENT
PROMPT = "Free some disk space: clean up the old log files in /var/log/app."
RISKY = {"delete_files"}


@tool
def list_files(directory: str) -> list[dict[str, Any]]:
    """List the files in a directory with their sizes (simulated).

    Args:
        directory: The directory to list.
    """
    return [{"name": f"{directory}/app-2026-0{i}.log", "megabytes": 120 * i} for i in range(1, 4)]


@tool
def delete_files(paths: list[str]) -> str:
    """Delete files (simulated: nothing on this machine is touched).

    Args:
        paths: The files to delete.
    """
    return f"deleted {len(paths)} file(s): " + ", ".join(paths)


def _offline_reply(request: ModelRequest) -> str | list[ToolUse]:
    """A scripted ops assistant: list, then delete, then report (or accept a refusal)."""
    last = request.messages[-1]
    results = [b for b in last.content if isinstance(b, ToolResult)]
    if not results:
        return [ToolUse("call_list", "list_files", {"directory": "/var/log/app"})]
    if results[0].tool_use_id == "call_list":
        paths = [f"/var/log/app/app-2026-0{i}.log" for i in range(1, 4)]
        return [ToolUse("call_delete", "delete_files", {"paths": paths})]
    if results[0].status == "error":
        return "Understood, I left the files alone. " + results[0].text
    return "Done: I deleted the three old log files and freed about 720 MB."


def _ask_before_risky_tools(event: BeforeToolCallEvent) -> None:
    if event.tool_use.name not in RISKY:
        return
    approved = event.interrupt(
        "approve",
        reason={"question": f"May the agent run {event.tool_use.name}?"},
    )
    if approved is not True:
        event.cancel(f"a person declined: {json.dumps(approved, ensure_ascii=False)}")


def build(store: SessionStore, session_id: str, model: str | None = None) -> Agent:
    """The demo agent on ``store`` / ``session_id`` (agent name ``"demo"``).

    It runs offline unless ``model`` (``"provider:name"``) is given; the choice is kept in the
    session's state, so a later ``interlude answer`` carries on with the same model.
    """
    agent = Agent(
        FunctionModel(_offline_reply),
        tools=[list_files, delete_files],
        system_prompt="You are a careful ops assistant. Ask before deleting anything.",
        session=store,
        session_id=session_id,
        name=NAME,
    )
    choose_model(agent, model)
    agent.hooks.add_callback(BeforeToolCallEvent, _ask_before_risky_tools)
    return agent


def choose_model(agent: Agent, model: str | None) -> None:
    """Run ``agent`` on ``model``, or on the one its session chose before (else offline)."""
    chosen = model or agent.state.get("demo_model")
    if isinstance(chosen, str) and chosen:
        agent.model = model_from_string(chosen)
        agent.state["demo_model"] = chosen


app = App()
"""The built-in demo application: ``interlude`` commands use it when given no ``--app``."""


@app.agent(NAME)
def _build_demo(session: AgentSession) -> Agent:
    return build(session.store, session.id)
