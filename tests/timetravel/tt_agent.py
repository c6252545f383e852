"""The agent the time-travel tests record and fork: ``lookup`` runs freely, ``delete`` asks
first. Every tool run is appended to ``RUNS`` (and to ``$INTERLUDE_TEST_RUNS`` when set, for
runs in another process)."""

from __future__ import annotations

import os
from typing import Any

from interlude import Agent, ToolResult, ToolUse, tool
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
def lookup(name: str) -> str:
    """Look a file up.

    Args:
        name: The file.
    """
    _ran(f"lookup {name}")
    return f"/var/log/{name}"


@tool
def delete(path: str) -> str:
    """Delete a file.

    Args:
        path: The file.
    """
    _ran(f"delete {path}")
    return f"deleted {path}"


def approve(event: BeforeToolCallEvent) -> None:
    if event.tool_use.name != "delete":
        return
    if event.interrupt("approve", f"delete {event.tool_use.input['path']}?") is not True:
        event.cancel("not approved")


def reply(request: ModelRequest) -> str | list[ToolUse]:
    """Looks the file up, asks to delete it, then says what happened."""
    results = [b for b in request.messages[-1].content if isinstance(b, ToolResult)]
    if not results:
        return [ToolUse("t1", "lookup", {"name": "old.log"})]
    if results[0].tool_use_id == "t1":
        return [ToolUse("t2", "delete", {"path": results[0].text})]
    return f"Finished: {results[0].status}: {results[0].text}"


class Calls:
    """A model that answers with ``reply`` and counts its calls; ``fail=True``: any call fails
    the test (a fork must make none)."""

    def __init__(self, fail: bool = False) -> None:
        self.count = 0
        self.fail = fail
        self.model = FunctionModel(self._reply)

    def _reply(self, request: ModelRequest) -> Any:
        if self.fail:
            raise AssertionError("the model was called")
        self.count += 1
        return reply(request)


def build(model: Any, store: Any = None, session_id: str | None = None, **kw: Any) -> Agent:
    agent = Agent(
        model,
        tools=[lookup, delete],
        name="janitor",
        session=store,
        session_id=session_id,
        tool_executor="sequential",
        **kw,
    )
    agent.hooks.add_callback(BeforeToolCallEvent, approve)
    return agent
