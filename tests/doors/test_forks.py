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


# --- the fork and its parent answered the other way round, or at the same instant --------------


def _store(kind: str, tmp_path: Path) -> tuple[Any, str | None]:
    """A store of ``kind`` and the URL another process opens it by (None: in this process)."""
    from interlude.sessions import FileStore, MemoryStore, open_store

    if kind == "memory":
        return MemoryStore(), None
    if kind == "sqlite":
        return SQLiteStore(tmp_path / "s.db"), f"sqlite:///{tmp_path / 's.db'}"
    if kind == "file":
        return FileStore(tmp_path / "files"), f"file://{tmp_path / 'files'}"
    from tests.support import postgres

    postgres.require_postgres()
    url = postgres.schema_url(postgres.unique_schema())
    return open_store(url), url


STORES = ["memory", "sqlite", "file", "postgresql"]


@pytest.mark.parametrize("kind", STORES)
def test_a_parent_approved_after_its_fork_ran_the_call_asks_first(
    kind: str, tmp_path: Path
) -> None:
    """The other way round: the fork is approved first and pays; the parent, approved after,
    asks ``ran_in_fork`` (naming the fork) instead of paying again, and can take its result."""
    PAID.clear()
    store, _ = _store(kind, tmp_path)
    parent = build(store, "parent")
    [question] = parent("pay acme").interrupts
    fork = parent.fork(at=question.id, session_id="branch", by="bo")

    fork.resume({question.id: True}, by="bo")
    assert PAID == ["acme 900"]

    result = build(store, "parent").resume({question.id: True}, by="ana")
    assert PAID == ["acme 900"]  # not paid twice
    [guard] = result.interrupts
    assert (guard.name, guard.source, guard.reason["session"]) == (
        "ran_in_fork",
        "in_doubt",
        "branch",
    )
    done = build(store, "parent").resume({guard.id: "reuse"}, by="ana")
    assert PAID == ["acme 900"] and done.stop_reason == "end_turn"
    assert "Finished: success: paid 900 to acme" in str(done.message)


@pytest.mark.parametrize("kind", STORES)
def test_two_forks_of_one_question_pay_once(kind: str, tmp_path: Path) -> None:
    """Two forks of the same open question (and a fork of a fork): the first to run the call
    pays; each other asks before paying, and "rerun" pays again only when a person says so."""
    PAID.clear()
    store, _ = _store(kind, tmp_path)
    parent = build(store, "parent")
    [question] = parent("pay acme").interrupts
    one = parent.fork(at=question.id, session_id="one", by="bo")
    two = parent.fork(at=question.id, session_id="two", by="bo")
    deeper = one.fork(at=question.id, session_id="deeper", by="cy")

    two.resume({question.id: True}, by="bo")
    assert PAID == ["acme 900"]
    for agent, who in ((one, "one"), (deeper, "deeper"), (build(store, "parent"), "parent")):
        [guard] = agent.resume({question.id: True}, by=who).interrupts
        assert (guard.name, guard.reason["session"]) == ("ran_in_fork", "two"), who
    assert PAID == ["acme 900"]
    [guard] = build(store, "deeper").interrupts
    build(store, "deeper").resume({guard.id: "rerun"}, by="cy")
    assert PAID == ["acme 900", "acme 900"]  # a person chose to pay again


@pytest.mark.parametrize("kind", ["sqlite", "file", "postgresql"])
def test_a_fork_and_its_parent_approved_at_the_same_instant_pay_once(
    kind: str, tmp_path: Path
) -> None:
    """Two processes resume a parent and its fork, approved at the same instant, many times:
    each time exactly one pays and the other asks (``ran_in_fork`` or ``ran_in_parent``)."""
    import json
    import subprocess
    import sys

    store, url = _store(kind, tmp_path)
    assert url is not None
    tries = 12
    for i in range(tries):
        [question] = build(store, f"p{i}")("pay acme").interrupts
        build(store, f"p{i}").fork(at=question.id, session_id=f"f{i}", by="bo")
    barrier, paid = tmp_path / "barrier", tmp_path / "paid"
    barrier.mkdir()
    root = Path(__file__).resolve().parents[2]
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.doors.fork_race_child",
                url,
                side,
                str(tries),
                str(barrier),
                str(paid),
            ],
            cwd=root,
            stdout=subprocess.PIPE,
            text=True,
        )
        for side in ("p", "f")
    ]
    outcomes = [
        json.loads(c.communicate(timeout=240)[0].strip().splitlines()[-1]) for c in children
    ]
    assert all(c.returncode == 0 for c in children)
    lines = paid.read_text().splitlines() if paid.exists() else []
    for i in range(tries):
        ran = [line for line in lines if line.split()[0] in (f"p{i}", f"f{i}")]
        asked = [o[i] for o in outcomes]
        assert len(ran) == 1, f"try {i}: paid {ran}, outcomes {asked}"
        assert sorted(asked) in (["end_turn", "ran_in_fork"], ["end_turn", "ran_in_parent"]), (
            f"try {i}: {asked}"
        )
