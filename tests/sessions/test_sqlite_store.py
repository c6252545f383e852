"""SQLiteStore specifics: its schema, WAL, migrations, SQL pending index, corruption, processes."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import textwrap
from datetime import datetime
from pathlib import Path

import pytest

from interlude._interrupt import Interrupt
from interlude.errors import (
    InvalidSessionIdError,
    SessionConflictError,
    SessionCorruptError,
    SessionError,
    StateFormatError,
)
from interlude.sessions import PendingInterrupt, PendingQuery, SessionUpdate, SQLiteStore

from .records import deadline, interrupt, msg, update, with_extras


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "nested" / "dir" / "sessions.db"


@pytest.fixture
def store(db: Path):
    with SQLiteStore(db) as s:
        yield s


def rows(db: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, params).fetchall()


async def test_round_trip(store: SQLiteStore) -> None:
    assert await store.load("s1") is None
    pause = {"step": {"kind": "tool_batch"}, "interrupts": ["i1"]}
    v = await store.save("s1", update(0, 0, [msg("a"), msg("b")], pause=pause, state={"k": 1}))
    assert v == 1
    s = await store.load("s1")
    assert s is not None
    assert (s.session_id, s.version, s.format_version) == ("s1", 1, 1)
    assert s.messages == [msg("a"), msg("b")]
    assert (s.state, s.pause, s.tools) == ({"k": 1}, pause, ["record"])
    # state=None keeps the stored state; pause None clears the pause
    assert await store.save("s1", update(1, 2, [msg("c")])) == 2
    s = await store.load("s1")
    assert s is not None and s.state == {"k": 1} and s.pause is None and len(s.messages) == 3


async def test_append_only_and_conflicts_write_nothing(store: SQLiteStore, db: Path) -> None:
    await store.save("s", update(0, 0, [msg("a"), msg("b")]))
    before = rows(db, "SELECT idx, data FROM messages ORDER BY idx")
    await store.save("s", update(1, 2, [msg("c")], state={"n": 2}))
    after = rows(db, "SELECT idx, data FROM messages ORDER BY idx")
    assert after[:2] == before and len(after) == 3
    snapshot = [rows(db, f"SELECT * FROM {t}") for t in ("sessions", "messages", "pending")]
    bytes_before = store.bytes_written

    pend = [interrupt("i", "approve", 1.0)]
    with pytest.raises(SessionConflictError, match=r"'s'.*version 2, not 1"):
        await store.save("s", update(1, 3, [msg("x")], pending=pend))
    with pytest.raises(SessionConflictError, match=r"'s' holds 3 messages.*appends at 2"):
        await store.save("s", update(2, 2, [msg("x")], pending=pend))
    with pytest.raises(SessionConflictError, match=r"'s'.*version 2, not 0"):
        await store.save("s", update(0, 0, [msg("x")]))
    assert [rows(db, f"SELECT * FROM {t}") for t in ("sessions", "messages", "pending")] == snapshot
    assert store.bytes_written == bytes_before
    # a new session must start at index 0, and a failed first save leaves no session behind
    with pytest.raises(SessionConflictError, match="'new' holds 0 messages"):
        await store.save("new", update(0, 1, [msg("x")]))
    assert await store.load("new") is None
    assert await store.list_sessions() == ["s"]


async def test_pending_index_filters_order_and_replacement(store: SQLiteStore) -> None:
    a1 = interrupt("a1", "approve", 100.0, tool="record")
    a2 = interrupt("a2", "confirm", 300.0)
    b1 = interrupt("b1", "approve", 200.0, tool="delete")
    c1 = interrupt("c1", "approve", 100.0, tool="record")  # same time as a1: session id decides
    await store.save("a", update(0, 0, [msg("x")], pause={"p": 1}, pending=[a1, a2]))
    await store.save("b", update(0, 0, [msg("x")], pause={"p": 1}, pending=[b1]))
    await store.save("c", update(0, 0, [msg("x")], pause={"p": 1}, pending=[c1]))

    def ids(found: list[PendingInterrupt]) -> list[tuple[str, str]]:
        return [(p.session_id, p.interrupt.id) for p in found]

    everything = await store.pending_interrupts()
    assert ids(everything) == [("a", "a1"), ("c", "c1"), ("b", "b1"), ("a", "a2")]
    assert everything[0] == PendingInterrupt("a", a1, 100.0)
    assert everything[0].tool_name == "record" and everything[-1].tool_name is None
    approve = await store.pending_interrupts(PendingQuery(name="approve"))
    assert ids(approve) == [("a", "a1"), ("c", "c1"), ("b", "b1")]
    assert ids(await store.pending_interrupts(PendingQuery(tool_name="delete"))) == [("b", "b1")]
    assert ids(await store.pending_interrupts(PendingQuery(older_than=200.0))) == [
        ("a", "a1"),
        ("c", "c1"),
    ]
    assert ids(
        await store.pending_interrupts(PendingQuery(newer_than=datetime.fromtimestamp(200.0)))
    ) == [("a", "a2")]
    assert ids(
        await store.pending_interrupts(PendingQuery(name="approve", older_than=150, limit=1))
    ) == [("a", "a1")]
    assert await store.pending_interrupts(PendingQuery(limit=0)) == []
    # a save replaces the session's entries; the index never reads the sessions' other rows
    await store.save("a", update(1, 1, [msg("y")], pending=[]))
    with sqlite3.connect(store.path) as conn:
        conn.execute("UPDATE sessions SET state = 'garbage' WHERE id = 'b'")
    assert ids(await store.pending_interrupts()) == [("c", "c1"), ("b", "b1")]
    plan = rows(Path(store.path), "EXPLAIN QUERY PLAN SELECT * FROM pending WHERE name = 'x'")
    assert "pending_by_name" in str(plan)


async def test_bad_pending_is_refused_before_writing(store: SQLiteStore) -> None:
    bad = update(0, 0, [msg("x")])
    object.__setattr__(bad, "pending", [{"id": "i", "name": "n"}])  # no source
    with pytest.raises(StateFormatError):
        await store.save("s", bad)
    twice = update(0, 0, [msg("x")], pending=[interrupt("i", "n", 1.0)] * 2)
    with pytest.raises(SessionError, match="'i' appears twice"):
        await store.save("s", twice)
    assert await store.list_sessions() == []


async def test_list_and_delete(store: SQLiteStore, db: Path) -> None:
    for sid in ["b", "a", "c:1"]:
        await store.save(sid, update(0, 0, [msg(sid)], pending=[interrupt(sid, "n", 1.0)]))
    assert await store.list_sessions() == ["a", "b", "c:1"]
    await store.delete("b")
    await store.delete("b")  # absent: no error
    assert await store.list_sessions() == ["a", "c:1"]
    assert await store.load("b") is None
    for table in ("messages", "pending"):
        assert rows(db, f"SELECT count(*) FROM {table} WHERE session_id = 'b'") == [(0,)]
    # a deleted session starts again from version 0
    assert await store.save("b", update(0, 0, [msg("again")])) == 1


@pytest.mark.parametrize("bad", ["", "../x", "/abs", "a/b", ".hidden", "..", "x" * 201, "a\x00b"])
async def test_bad_ids_are_refused(store: SQLiteStore, bad: str) -> None:
    with pytest.raises(InvalidSessionIdError):
        await store.load(bad)
    with pytest.raises(InvalidSessionIdError):
        await store.save(bad, update(0, 0, []))
    with pytest.raises(InvalidSessionIdError):
        await store.delete(bad)
    assert await store.list_sessions() == []


@pytest.mark.parametrize(
    ("sql", "detail"),
    [
        ("UPDATE messages SET data = X'FFFE00' WHERE idx = 1", "message 1"),
        ("UPDATE messages SET data = '{\"role\": ' WHERE idx = 0", "message 0"),
        ("UPDATE sessions SET state = '[1, 2]'", "state"),
        ("UPDATE sessions SET pause = '\"paused\"'", "pause"),
        ("UPDATE sessions SET tools = 'nope'", "tools"),
        ("UPDATE sessions SET claim = '[1]'", "claim is a list"),
        ("UPDATE sessions SET claim = '{\"owner\": '", "claim is not valid JSON"),
        ("UPDATE sessions SET claim = X'FFFE'", "claim is not valid JSON"),
        ("UPDATE sessions SET version = 'two'", "version"),
        ("DELETE FROM messages WHERE idx = 0", "2 messages expected"),
    ],
)
async def test_corrupt_rows_raise_naming_the_session(
    store: SQLiteStore, db: Path, sql: str, detail: str
) -> None:
    await store.save("hurt", update(0, 0, [msg("a"), msg("b")], pending=[interrupt("i", "n", 1)]))
    with sqlite3.connect(db) as conn:
        conn.execute(sql)
    with pytest.raises(SessionCorruptError, match=f"'hurt'.*{detail}"):
        await store.load("hurt")


@pytest.mark.parametrize(
    ("data", "detail"),
    [("X'00FF'", "not valid JSON"), ('\'{"id": "i"}\'', "pending interrupt")],
)
async def test_a_corrupt_pending_row_hides_no_other(
    store: SQLiteStore, db: Path, data: str, detail: str
) -> None:
    await store.save("hurt", update(0, 0, [], pending=[interrupt("i", "n", 1)]))
    await store.save("fine", update(0, 0, [], pending=[interrupt("f", "n", 2)]))
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE pending SET data = {data} WHERE session_id = 'hurt'")
    found = await store.pending_interrupts()
    assert [(p.session_id, p.interrupt.id) for p in found] == [("fine", "f")]
    assert [sid for sid, _ in store.skipped] == ["hurt"]
    assert "'hurt'" in store.skipped[0][1] and detail in store.skipped[0][1]
    # the corrupt row comes first: a limit still finds the readable one behind it
    assert [p.session_id for p in await store.pending_interrupts(PendingQuery(limit=1))] == ["fine"]
    assert [p.session_id for p in await store.pending_interrupts(PendingQuery(limit=-1))] == []
    assert [sid for sid, _ in store.skipped] == ["hurt"]
    assert await store.pending_interrupts(PendingQuery(name="other")) == [] and store.skipped == ()


async def test_memory_store_a_corrupt_pending_entry_hides_no_other() -> None:
    from interlude.sessions import MemoryStore

    memory = MemoryStore()  # the same rule as the SQL index above, for the dict store
    await memory.save("hurt", update(0, 0, [], pending=[interrupt("i", "n", 1)]))
    await memory.save("fine", update(0, 0, [], pending=[interrupt("f", "n", 2)]))
    memory._sessions["hurt"].pending[0] = '{"id": "i"}'
    found = await memory.pending_interrupts(PendingQuery(limit=1))
    assert [(p.session_id, p.interrupt.id) for p in found] == [("fine", "f")]
    assert [sid for sid, _ in memory.skipped] == ["hurt"] and "'hurt'" in memory.skipped[0][1]
    memory._sessions["hurt"].pending[0] = "{oops"
    assert [p.session_id for p in await memory.pending_interrupts()] == ["fine"]
    assert [sid for sid, _ in memory.skipped] == ["hurt"]


def test_wal_and_migrations_applied_once(db: Path) -> None:
    from interlude.sessions._sqlite import _MIGRATIONS

    SQLiteStore(db).close()
    assert db.exists()  # parent folders created
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("PRAGMA user_version").fetchone() == (len(_MIGRATIONS),)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert {"sessions", "messages", "pending", "pending_by_tool"} <= tables
    with SQLiteStore(db) as again:  # reopening applies nothing (CREATE TABLE would fail)
        assert again._conn is not None
        assert again._conn.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
    with sqlite3.connect(db) as conn:
        conn.execute(f"PRAGMA user_version = {len(_MIGRATIONS) + 1}")
    with pytest.raises(SessionError, match="schema version"):
        SQLiteStore(db)


async def test_claim_is_a_column_beside_the_pause(store: SQLiteStore, db: Path) -> None:
    claim = {"owner": "host:1", "token": "t", "since": 1.0, "expires_at": 2.0}
    await store.save("s", update(0, 0, [msg("a")], pause={"p": 1}, claim=claim))
    [(pause, stored)] = rows(db, "SELECT pause, claim FROM sessions")
    assert json.loads(str(pause)) == {"p": 1} and json.loads(str(stored)) == claim
    before = store.bytes_written
    await store.save("s", update(1, 1, [], claim=claim))
    unclaimed = store.bytes_written
    await store.save("s", update(2, 1, []))
    assert unclaimed - before - (store.bytes_written - unclaimed) == len(json.dumps(claim)) - 4
    assert rows(db, "SELECT claim FROM sessions") == [(None,)]  # None is stored as NULL


async def test_a_version_1_database_migrates_and_loads_without_a_claim(db: Path) -> None:
    from interlude.sessions._sqlite import _MIGRATIONS

    db.parent.mkdir(parents=True)
    with sqlite3.connect(db) as conn:
        for statement in _MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute("PRAGMA user_version = 1")
        conn.execute(
            "INSERT INTO sessions (id, version, format_version, state, pause, tools, "
            "message_count, updated_at) VALUES ('old', 1, 1, '{\"k\": 1}', '{\"p\": 1}', "
            "'[\"record\"]', 1, 0)"
        )
        conn.execute("INSERT INTO messages VALUES ('old', 0, ?)", (json.dumps(msg("a")),))
    conn.close()
    with SQLiteStore(db) as store:
        old = await store.load("old")
        assert old is not None
        assert (old.version, old.messages, old.state, old.pause) == (
            1,
            [msg("a")],
            {"k": 1},
            {"p": 1},
        )
        assert old.claim is None
        await store.save("old", update(1, 1, [msg("b")], claim={"owner": "me"}))
        again = await store.load("old")
        assert again is not None and again.claim == {"owner": "me"}
    assert rows(db, "PRAGMA user_version") == [(len(_MIGRATIONS),)]


async def test_closed_store_refuses_work(db: Path) -> None:
    store = SQLiteStore(db)
    store.close()
    store.close()
    with pytest.raises(SessionError, match="closed"):
        await store.load("s")


def test_a_locked_database_is_a_session_error_not_a_driver_error(tmp_path: Path) -> None:
    import asyncio
    import sqlite3

    from interlude.errors import SessionError
    from interlude.sessions import SessionUpdate, SQLiteStore

    store = SQLiteStore(tmp_path / "s.db", timeout=0.05)
    blocker = sqlite3.connect(tmp_path / "s.db")
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    update = SessionUpdate(
        expected_version=0,
        first_index=0,
        new_messages=[],
        pause=None,
        pending=[],
        tools=[],
        format_version=1,
    )
    try:
        with pytest.raises(SessionError, match="locked"):
            asyncio.run(store.save("s", update))
    finally:
        blocker.rollback()
        blocker.close()
    assert asyncio.run(store.save("s", update)) == 1


def test_synchronous_is_chosen_by_argument_or_url(tmp_path: Path) -> None:
    from interlude.errors import ConfigurationError
    from interlude.sessions import open_store

    for store, mode in (
        (SQLiteStore(tmp_path / "a.db"), 1),
        (SQLiteStore(tmp_path / "b.db", synchronous="full"), 2),
        (open_store(f"sqlite:///{tmp_path}/c.db?synchronous=full"), 2),
        (open_store(f"sqlite:///{tmp_path}/d.db"), 1),
    ):
        assert isinstance(store, SQLiteStore)
        assert store._conn is not None
        assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == mode  # 1 NORMAL, 2 FULL
        store.close()
    with pytest.raises(ConfigurationError, match="synchronous"):
        SQLiteStore(tmp_path / "e.db", synchronous="off")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="unknown option"):
        open_store(f"sqlite:///{tmp_path}/f.db?journal=off")


def test_a_pending_row_nested_too_deeply_is_skipped_not_raised(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "deep.db")
    question = Interrupt(id="v1:before_tool_call:t1:x", name="approve", source="before_tool_call")
    update = SessionUpdate(
        expected_version=0,
        first_index=0,
        new_messages=[],
        pause=None,
        pending=[question.to_dict()],
        tools=[],
        format_version=2,
    )
    asyncio.run(store.save("deep", update))
    asyncio.run(store.save("fine", update))
    assert store._conn is not None
    store._conn.execute(
        "UPDATE pending SET data = ? WHERE session_id = 'deep'", ("[" * 100_000 + "]" * 100_000,)
    )
    found = asyncio.run(store.pending_interrupts())
    assert [p.session_id for p in found] == ["fine"]
    assert [sid for sid, _ in store.skipped] == ["deep"]


def test_processes_opening_a_new_database_at_once_all_get_it(tmp_path: Path) -> None:
    """Switching a new file to WAL needs a moment alone with it and SQLite does not wait for
    that: before the retry, about 1 in 200 openers racing on a new file got 'locked'. Fifteen
    new files, four processes opening each at once (forks of one interpreter that imported the
    store, released together: no interpreter start-up between them)."""
    result = subprocess.run(
        [sys.executable, "-c", OPENERS, str(tmp_path), "15", "4"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", "60"], result.stderr  # no failure, of 60 openers


OPENERS = textwrap.dedent(
    """
    import os, sys, traceback
    from interlude.sessions import SQLiteStore

    folder, rounds, openers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    failed = opened = 0
    for i in range(rounds):
        db = os.path.join(folder, f"race{i}.db")
        go, release = os.pipe()
        pids = []
        for _ in range(openers):
            pid = os.fork()
            if pid == 0:
                os.close(release)
                os.read(go, 1)  # returns at the end of the pipe: when the parent lets go
                code = 0
                try:
                    SQLiteStore(db).close()
                except BaseException:
                    traceback.print_exc()
                    code = 1
                os._exit(code)
            pids.append(pid)
        os.close(go)
        os.close(release)  # every opener goes at once
        for pid in pids:
            _, status = os.waitpid(pid, 0)
            failed += status != 0
            opened += 1
    print(failed, opened)
    """
)


# --- agent name, audit trail, deadlines ----------------------------------------------------------


async def test_a_version_2_database_gains_agent_audit_and_deadlines(db: Path) -> None:
    from interlude.sessions._sqlite import _MIGRATIONS

    db.parent.mkdir(parents=True)
    with sqlite3.connect(db) as conn:  # as the release before agent names and audit trails
        for statements in _MIGRATIONS[:2]:
            for statement in statements:
                conn.execute(statement)
        conn.execute("PRAGMA user_version = 2")
        conn.execute(
            "INSERT INTO sessions (id, version, format_version, state, pause, tools, "
            "message_count, updated_at) VALUES ('old', 1, 1, '{}', null, '[]', 0, 0)"
        )
        conn.execute(
            "INSERT INTO pending VALUES ('old', 'q', 'n', null, 1.0, ?)",
            (json.dumps(deadline("q", None)),),
        )
    conn.close()
    with SQLiteStore(db) as store:
        old = await store.load("old")
        assert old is not None and (old.agent, old.audit) == (None, [])
        assert [p.interrupt.id for p in await store.pending_interrupts()] == ["q"]
        assert await store.expired_interrupts(1e12) == []
        await store.save("old", with_extras(1, [deadline("q", 5.0)], [{"n": 1}]))
        again = await store.load("old")
        assert again is not None and (again.agent, again.audit) == ("triage", [{"n": 1}])
        assert [p.interrupt.id for p in await store.expired_interrupts(5)] == ["q"]
    assert rows(db, "PRAGMA user_version") == [(len(_MIGRATIONS),)]
    assert rows(db, "SELECT session_id, seq, entry FROM audit") == [("old", 0, '{"n": 1}')]
    plan = rows(
        db,
        "EXPLAIN QUERY PLAN SELECT data FROM pending WHERE expires_at IS NOT NULL AND "
        "expires_at <= 1 ORDER BY expires_at, session_id, interrupt_id LIMIT 5",
    )
    assert "pending_by_deadline" in str(plan)


@pytest.mark.parametrize(
    ("sql", "detail"),
    [
        ("UPDATE audit SET entry = '{oops' WHERE seq = 1", "audit entry 1 is not valid JSON"),
        ("UPDATE audit SET entry = '[1]' WHERE seq = 0", "audit entry 0 is a list"),
        ("DELETE FROM audit WHERE seq = 0", "audit entry 0 is missing"),
    ],
)
async def test_a_corrupt_audit_row_is_reported(
    store: SQLiteStore, db: Path, sql: str, detail: str
) -> None:
    await store.save("hurt", with_extras(0, [], [{"n": 1}, {"n": 2}]))
    with sqlite3.connect(db) as conn:
        conn.execute(sql)
    conn.close()
    with pytest.raises(SessionCorruptError, match=f"'hurt'.*{detail}"):
        await store.load("hurt")
    with pytest.raises(SessionCorruptError, match=f"'hurt'.*{detail}"):
        await store.audit_trail("hurt")


async def test_expired_skips_a_corrupt_pending_row_even_with_a_limit(
    store: SQLiteStore, db: Path
) -> None:
    await store.save("hurt", with_extras(0, [deadline("i", 1.0)], []))
    await store.save("fine", with_extras(0, [deadline("f", 2.0)], []))
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE pending SET data = '{oops' WHERE session_id = 'hurt'")
    conn.close()
    found = await store.expired_interrupts(10.0, limit=1)  # the corrupt row comes first
    assert [p.session_id for p in found] == ["fine"]
    assert [sid for sid, _ in store.skipped] == ["hurt"] and "'hurt'" in store.skipped[0][1]
    await store.delete("hurt")
    assert await store.expired_interrupts(10.0) != [] and store.skipped == ()
