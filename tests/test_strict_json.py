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


# A stored conversation is read in one pass of the decoder (all its messages as one array);
# rows that pass only when read together are still refused, naming the row that is wrong.
HOSTILE_ROWS = {
    "two values in one row": lambda data: data + ", " + data,
    "a value split over two rows": lambda data: data[:-1],
    "not UTF-8": lambda data: data.encode() + b"\xff",
}


@pytest.mark.parametrize("damage", HOSTILE_ROWS.values(), ids=list(HOSTILE_ROWS))
def test_a_damaged_message_row_is_named_though_rows_are_read_together(
    tmp_path: Path, damage: object
) -> None:
    db = tmp_path / "s.db"
    _paused(SQLiteStore(db))
    with sqlite3.connect(db) as conn:
        (data,) = conn.execute("SELECT data FROM messages WHERE idx = 0").fetchone()
        conn.execute("UPDATE messages SET data = ? WHERE idx = 0", (damage(data),))  # type: ignore[operator]
    fresh = Agent(ScriptedModel([]), tools=[pay], session=SQLiteStore(db), session_id="s1")
    with pytest.raises(SessionCorruptError, match="message 0 is not valid JSON"):
        fresh.interrupts  # noqa: B018


def test_messages_read_together_are_the_messages_read_one_by_one(tmp_path: Path) -> None:
    from interlude._json import loads, loads_all

    rows = [b'{"a": 1}', b' [1, "\\u00e9"] ', b'"text"', b"null", '{"b": {"é": []}}'.encode()]
    assert loads_all(rows) == [loads(r) for r in rows]
    assert loads_all([r.decode() for r in rows]) == [loads(r) for r in rows]
    assert loads_all([]) == []
    for hostile in ([b"1, 2", b"3"], [b"[1", b"2]"], [b'{"a": 1, "a": 2}'], [b"1", "2"]):
        assert loads_all(hostile) is None  # type: ignore[arg-type]  # read one by one instead


def test_a_split_file_store_line_is_named(tmp_path: Path) -> None:
    _paused(FileStore(tmp_path))
    [lines] = list(tmp_path.rglob("messages.jsonl"))
    first, rest = lines.read_bytes().split(b"\n", 1)
    lines.write_bytes(first[:-1] + b"\n" + rest[:-1] + b"}\n")  # same size, split elsewhere
    fresh = Agent(ScriptedModel([]), tools=[pay], session=FileStore(tmp_path), session_id="s1")
    with pytest.raises(SessionCorruptError, match="line 1 is not valid JSON"):
        fresh.interrupts  # noqa: B018


@pytest.mark.parametrize("number", ["NaN", "Infinity", "1e999"])
def test_a_stored_message_holding_a_number_json_cannot_carry_is_corrupt(
    tmp_path: Path, number: str
) -> None:
    """Messages read together skip the plain-JSON check (their text had no such number);
    one that has one is read on its own and refused, as before."""
    from interlude._json import loads_all

    assert loads_all([b"[1]", f"[{number}]".encode()]) is None
    db = tmp_path / "s.db"
    _paused(SQLiteStore(db))
    with sqlite3.connect(db) as conn:
        (data,) = conn.execute("SELECT data FROM messages WHERE idx = 1").fetchone()
        bad = data.replace('"cents": 100', f'"cents": {number}')
        assert bad != data
        conn.execute("UPDATE messages SET data = ? WHERE idx = 1", (bad,))
    fresh = Agent(ScriptedModel([]), tools=[pay], session=SQLiteStore(db), session_id="s1")
    with pytest.raises(SessionCorruptError, match="not plain JSON"):
        fresh.interrupts  # noqa: B018
