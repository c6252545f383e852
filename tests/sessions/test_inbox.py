"""Inbox: pending, expired and audit queries from sync code and from async code alike."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from interlude import Inbox
from interlude._interrupt import Interrupt
from interlude._messages import JsonValue
from interlude.sessions import (
    MemoryStore,
    PendingInterrupt,
    SessionStore,
    SessionUpdate,
    SQLiteStore,
    store_url,
)
from tests.support import postgres as pg

NOW = time.time()


def question(iid: str, name: str, raised_at: float, expires_at: float | None) -> Interrupt:
    return Interrupt(
        id=iid, name=name, source="before_model_call", raised_at=raised_at, expires_at=expires_at
    )


def update(pending: list[Interrupt], audit: list[dict[str, JsonValue]]) -> SessionUpdate:
    return SessionUpdate(
        expected_version=0,
        first_index=0,
        new_messages=[],
        pause={"p": 1},
        pending=[p.to_dict() for p in pending],
        tools=[],
        format_version=1,
        agent="support",
        audit=list(audit),
    )


async def fill(store: SessionStore) -> None:
    """Three questions: one overdue an hour ago, one due in an hour, one without a deadline."""
    overdue = question("late", "approve", NOW - 7200, NOW - 3600)
    await store.save("s1", update([overdue], [{"event": "asked", "id": "late"}]))
    upcoming = question("soon", "approve", NOW - 60, NOW + 3600)
    await store.save("s2", update([upcoming, question("open", "note", NOW - 30, None)], []))


def ids(found: Sequence[PendingInterrupt]) -> list[str]:
    return [p.interrupt.id for p in found]


def ask_everything(inbox: Inbox) -> tuple[list[str], ...]:
    """A plain sync helper, as code inside an async app might call."""
    return (
        ids(inbox.pending()),
        ids(inbox.pending(name="note")),
        ids(inbox.pending(older_than=NOW - 100, limit=5)),
        ids(inbox.expired()),
        ids(inbox.expired(NOW + 7200)),
        [str(e["id"]) for e in inbox.audit("s1")],
        [str(e) for e in inbox.audit("nobody")],
    )


EXPECTED: tuple[list[str], ...] = (
    ["late", "soon", "open"],
    ["open"],
    ["late"],
    ["late"],
    ["late", "soon"],
    ["late"],
    [],
)


def test_sync_queries_from_plain_sync_code() -> None:
    store = MemoryStore()
    asyncio.run(fill(store))
    assert ask_everything(Inbox(store)) == EXPECTED


async def test_sync_queries_from_inside_a_running_event_loop() -> None:
    store = MemoryStore()
    await fill(store)
    inbox = Inbox(store)
    loop_thread = threading.current_thread()
    assert asyncio.get_running_loop().is_running()
    assert ask_everything(inbox) == EXPECTED  # no "asyncio.run() cannot be called" error
    assert threading.current_thread() is loop_thread


async def test_async_queries() -> None:
    store = MemoryStore()
    await fill(store)
    inbox = Inbox(store)
    assert ids(await inbox.pending_async(tool_name=None, newer_than=NOW - 100)) == ["soon", "open"]
    assert ids(await inbox.expired_async()) == ["late"]
    assert ids(await inbox.expired_async(NOW + 7200, limit=1)) == ["late"]
    assert await inbox.audit_async("s1") == [{"event": "asked", "id": "late"}]
    assert inbox.skipped == ()


def test_skipped_is_the_stores() -> None:
    store = MemoryStore()
    asyncio.run(fill(store))
    store._sessions["s2"].pending[0] = "{oops"  # damage one entry of the index
    inbox = Inbox(store)
    assert ids(inbox.expired(NOW + 7200)) == ["late"]
    assert [sid for sid, _ in inbox.skipped] == ["s2"]


async def test_a_store_url_opens_the_store_and_close_closes_it(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SQLiteStore(db) as store:
        await fill(store)
    with Inbox(store_url("sqlite", str(db))) as inbox:
        assert isinstance(inbox.store, SQLiteStore)
        assert ids(inbox.expired()) == ["late"]  # sync, from inside this test's loop
        assert ids(await inbox.pending_async()) == ["late", "soon", "open"]
        assert inbox.audit("s1") == [{"event": "asked", "id": "late"}]
    assert inbox.store._conn is None  # closed with the inbox
    mine = MemoryStore()
    with Inbox(mine) as given:
        assert given.pending() == []
    assert given.store is mine  # a store passed in is the caller's to close


def test_postgres_from_sync_and_async_code(request: pytest.FixtureRequest) -> None:
    store = pg.make_store(request.addfinalizer)
    asyncio.run(fill(store))
    inbox = Inbox(store)

    async def inside_a_loop() -> tuple[list[str], ...]:
        return ask_everything(inbox)

    assert ask_everything(inbox) == EXPECTED
    assert asyncio.run(inside_a_loop()) == EXPECTED
