"""Stored JSON that names a key twice is reported as corrupt, not read as its last value."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from interlude import Agent, ToolUse, tool
from interlude.errors import SessionCorruptError
from interlude.hooks import BeforeToolCallEvent
from interlude.sessions import FileStore, SQLiteStore
from interlude.testing import ScriptedModel


@tool
def pay(cents: int) -> str:
    """Pay.

    Args:
        cents: How much.
    """
    return "paid"


def _paused(store: object) -> Agent:
    agent = Agent(
        ScriptedModel([[ToolUse("p1", "pay", {"cents": 100})]]),
        tools=[pay],
        session=store,  # type: ignore[arg-type]
        session_id="s1",
    )
    agent.hooks.add_callback(BeforeToolCallEvent, lambda e: e.interrupt("approve"))
    agent("pay")
    return agent


def test_a_stored_message_with_a_duplicate_key_is_corrupt(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    _paused(SQLiteStore(db))
    with sqlite3.connect(db) as conn:
        (data,) = conn.execute("SELECT data FROM messages WHERE idx = 1").fetchone()
        twice = data.replace('"cents": 100', '"cents": 100, "cents": 100000')
        assert twice != data
        conn.execute("UPDATE messages SET data = ? WHERE idx = 1", (twice,))
    fresh = Agent(ScriptedModel([]), tools=[pay], session=SQLiteStore(db), session_id="s1")
    with pytest.raises(SessionCorruptError, match="'cents' appears twice"):
        fresh.interrupts  # noqa: B018  # the first look loads the session


def test_a_file_store_head_with_a_duplicate_key_is_corrupt(tmp_path: Path) -> None:
    _paused(FileStore(tmp_path))
    [head] = [p for p in tmp_path.rglob("*.json") if p.read_text().lstrip().startswith("{")][:1]
    text = head.read_text()
    head.write_text(text.replace("{", '{"version": 1, ', 1))
    fresh = Agent(ScriptedModel([]), tools=[pay], session=FileStore(tmp_path), session_id="s1")
    with pytest.raises(SessionCorruptError, match="twice"):
        fresh.interrupts  # noqa: B018
