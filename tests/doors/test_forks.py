"""A fork made at an open question, answered after its parent ran the same call, asks
``ran_in_parent`` at that moment: the guard reads the parent when the fork's answer is applied,
not only when the fork was made (issue 34: "a fork pays twice", 6 of 6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from interlude import Agent, ToolResult, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.sessions import SQLiteStore
from interlude.testing import FunctionModel, ModelRequest

PAID: list[str] = []


@tool
def pay(to: str, cents: int) -> str:
    """Pay someone.

    Args:
        to: Who.
        cents: How much.
    """
    PAID.append(f"{to} {cents}")
    return f"paid {cents} to {to}"


def _reply(request: ModelRequest) -> Any:
    results = [b for b in request.messages[-1].content if isinstance(b, ToolResult)]
    if results:
        return f"Finished: {results[0].status}: {results[0].text}"
    return [ToolUse("t1", "pay", {"to": "acme", "cents": 900})]


def _approve(event: BeforeToolCallEvent) -> None:
    if event.interrupt("approve", "pay acme?", response_type=bool) is not True:
        event.cancel("not approved")


def build(store: SQLiteStore, session_id: str) -> Agent:
    agent = Agent(
        FunctionModel(_reply), tools=[pay], name="payer", session=store, session_id=session_id
    )
    agent.hooks.add_callback(BeforeToolCallEvent, _approve)
    return agent


@pytest.mark.parametrize("fork_agent", ["the fork's agent", "reopened from the store"])
def test_a_fork_approved_after_its_parent_ran_the_call_asks_first(
    fork_agent: str, tmp_path: Path
) -> None:
    PAID.clear()
    store = SQLiteStore(tmp_path / "s.db")
    parent = build(store, "parent")
    [question] = parent("pay acme").interrupts
    fork = parent.fork(at=question.id, session_id="branch", by="bo")
    assert [q.id for q in fork.interrupts] == [question.id] and PAID == []

    parent.resume({question.id: True}, by="ana")
    assert PAID == ["acme 900"]

    if fork_agent == "reopened from the store":
        fork = build(store, "branch")  # as a worker or another process opens it
    result = fork.resume({question.id: True}, by="bo")

    assert PAID == ["acme 900"]  # not paid twice
    assert [(q.name, q.source) for q in result.interrupts] == [("ran_in_parent", "in_doubt")]
    [guard] = result.interrupts
    assert guard.tool_use is not None and guard.tool_use.name == "pay"
    fork.resume({guard.id: "reuse"}, by="bo")  # the parent's result; the tool does not run
    assert PAID == ["acme 900"]
