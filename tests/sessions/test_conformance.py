"""Every session store passes the shipped conformance suite."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from interlude.sessions import (
    AnswerQueue,
    FileStore,
    InboxStore,
    MemoryStore,
    PendingIndex,
    SessionStore,
    SessionUpdate,
    SQLiteStore,
    StoredSession,
    store_url,
)
from interlude.testing.conformance import OPTIONAL, SessionStoreConformance
from tests.support import postgres as pg


class TestMemoryStore(SessionStoreConformance):
    def make_store(self, tmp_path: Path) -> SessionStore:
        return MemoryStore()

    def corrupt(self, store: SessionStore, tmp_path: Path, session_id: str) -> None:
        assert isinstance(store, MemoryStore)
        store._sessions[session_id].messages[0] = json.dumps({"role": "robot", "content": []})

    def corrupt_answers(self, store: SessionStore, tmp_path: Path, session_id: str) -> None:
        assert isinstance(store, MemoryStore)
        store._sessions[session_id].answers[0] = (1, '{"interrupt_id": "q"')


class SessionsOnly:
    """A store of the required part alone (no answer queue, no pending index): a MemoryStore's
    sessions behind the five ``SessionStore`` methods."""

    def __init__(self) -> None:
        self.inner = MemoryStore()

    @property
    def bytes_written(self) -> int:
        return self.inner.bytes_written

    async def load(self, session_id: str) -> StoredSession | None:
        return await self.inner.load(session_id)

    async def save(self, session_id: str, update: SessionUpdate) -> int:
        return await self.inner.save(session_id, update)

    async def audit_trail(self, session_id: str) -> list[dict[str, Any]]:
        return await self.inner.audit_trail(session_id)

    async def list_sessions(self) -> list[str]:
        return await self.inner.list_sessions()

    async def delete(self, session_id: str) -> None:
        await self.inner.delete(session_id)


class TestSessionsOnlyStore(SessionStoreConformance):
    """The session checks run; the answer-queue and pending-index checks are skipped."""

    def make_store(self, tmp_path: Path) -> SessionStore:
        return SessionsOnly()

    def corrupt(self, store: SessionStore, tmp_path: Path, session_id: str) -> None:
        assert isinstance(store, SessionsOnly)
        store.inner._sessions[session_id].messages[0] = json.dumps({"role": "robot"})


def test_the_suite_runs_the_parts_a_store_provides(tmp_path: Path) -> None:
    only = TestSessionsOnlyStore()
    assert isinstance(only.store_for(SessionStore, tmp_path), SessionsOnly)
    for part in OPTIONAL:
        with pytest.raises(pytest.skip.Exception, match=part.__name__):
            only.store_for(part, tmp_path)

    class Claims(TestSessionsOnlyStore):  # says it has a pending index, which it lacks
        provides = (PendingIndex,)

    with pytest.raises(AssertionError, match="says it provides PendingIndex"):
        Claims().store_for(PendingIndex, tmp_path)

    class Declines(TestMemoryStore):  # has both optional parts, declares neither
        provides = ()

    with pytest.raises(pytest.skip.Exception, match="AnswerQueue"):
        Declines().store_for(AnswerQueue, tmp_path)
    assert isinstance(TestMemoryStore().store_for(AnswerQueue, tmp_path), InboxStore)


class TestSQLiteStore(SessionStoreConformance):
    def make_store(self, tmp_path: Path) -> SessionStore:
        return SQLiteStore(tmp_path / "s.db")

    def store_url(self, tmp_path: Path) -> str | None:
        return store_url("sqlite", str(tmp_path / "s.db"))

    def corrupt(self, store: SessionStore, tmp_path: Path, session_id: str) -> None:
        with sqlite3.connect(tmp_path / "s.db") as conn:
            conn.execute(
                "UPDATE messages SET data = ? WHERE session_id = ? AND idx = 0",
                ('{"role": "robot", "content": []', session_id),  # truncated JSON
            )

    def corrupt_answers(self, store: SessionStore, tmp_path: Path, session_id: str) -> None:
        with sqlite3.connect(tmp_path / "s.db") as conn:
            conn.execute("UPDATE answers SET data = '[1]' WHERE session_id = ?", (session_id,))


class TestFileStore(SessionStoreConformance):
    def make_store(self, tmp_path: Path) -> SessionStore:
        return FileStore(tmp_path / "fs")

    def store_url(self, tmp_path: Path) -> str | None:
        return store_url("file", str(tmp_path / "fs"))

    def corrupt(self, store: SessionStore, tmp_path: Path, session_id: str) -> None:
        path = tmp_path / "fs" / session_id / "messages.jsonl"
        data = path.read_bytes()
        path.write_bytes(b"\xff" + data[1:])

    def corrupt_answers(self, store: SessionStore, tmp_path: Path, session_id: str) -> None:
        path = tmp_path / "fs" / session_id / "answers.json"
        path.write_text('{"last_seq": 1, "answers": [{"seq": 1, "interrupt_id": "q"}]}')


class TestPostgresStore(SessionStoreConformance):
    """Each check gets its own schema on the test server, dropped afterwards."""

    @pytest.fixture(autouse=True)
    def _schema(self, request: pytest.FixtureRequest) -> None:
        pg.require_postgres()
        self.schema = pg.unique_schema()
        self.stores: list[SessionStore] = []

        def clean_up() -> None:
            for store in self.stores:
                store.close()  # type: ignore[attr-defined]
            pg.drop_schema(self.schema)

        request.addfinalizer(clean_up)

    def make_store(self, tmp_path: Path) -> SessionStore:
        from interlude.sessions import PostgresStore

        store = PostgresStore(pg.DSN, schema=self.schema)
        self.stores.append(store)
        return store

    def store_url(self, tmp_path: Path) -> str | None:
        return pg.schema_url(self.schema)

    def corrupt(self, store: SessionStore, tmp_path: Path, session_id: str) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(pg.DSN, autocommit=True) as conn:
            conn.execute(
                sql.SQL(
                    "UPDATE {}.messages SET data = %s WHERE session_id = %s AND idx = 0"
                ).format(sql.Identifier(self.schema)),
                ('{"role": "robot"', session_id),
            )

    def corrupt_answers(self, store: SessionStore, tmp_path: Path, session_id: str) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(pg.DSN, autocommit=True) as conn:
            conn.execute(
                sql.SQL("UPDATE {}.answers SET data = %s WHERE session_id = %s").format(
                    sql.Identifier(self.schema)
                ),
                ('{"interrupt_id": ', session_id),
            )
