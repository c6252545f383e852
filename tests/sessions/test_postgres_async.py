"""PostgresStore on psycopg's async API: one pool per event loop (sync calls, asyncio.run, a
loop in another thread, in turn), close() with pools on closed or running loops, a save in one
statement, the migration to the save function with data in place, and work reserved for a
worker by ``sessions_to_resume(reserve_for=...)``."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from interlude import Agent, ToolUse, tool
from interlude.errors import SessionConflictError
from interlude.hooks import BeforeToolCallEvent
from interlude.sessions import PostgresStore, SessionUpdate
from interlude.sessions._postgres import _MIGRATIONS
from interlude.testing import ScriptedModel
from tests.support import until, wait_for
from tests.support.postgres import DSN, make_store

from .old_schemas import schema_at_migration


@pytest.fixture
def store(request: pytest.FixtureRequest) -> PostgresStore:
    return make_store(request.addfinalizer)


def backends(store: PostgresStore) -> int:
    """How many server connections the store's pools hold (its application_name)."""
    import psycopg

    with psycopg.connect(DSN, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
            (f"interlude-{store.schema}",),
        ).fetchone()
    assert row is not None
    return int(row[0])


def settled_backends(store: PostgresStore, want: int) -> int:
    """backends(), once it is ``want`` (a backend leaves after its socket), or at the
    deadline."""
    with contextlib.suppress(AssertionError):
        wait_for(lambda: backends(store) == want, what=f"{want} backends", every=0.05)
    return backends(store)


def msg(i: int) -> dict[str, Any]:
    return {"role": "user", "content": [{"text": f"m{i}"}]}


def update(expected: int, first: int, messages: list[Any], **kw: Any) -> SessionUpdate:
    fields: dict[str, Any] = {
        "pause": None,
        "pending": [],
        "tools": [],
        "format_version": 1,
    } | kw
    return SessionUpdate(
        expected_version=expected, first_index=first, new_messages=messages, **fields
    )


def answer(iid: str, at: float) -> dict[str, Any]:
    return {"interrupt_id": iid, "answer": True, "by": "ann", "at": at, "shown": None}


@tool
async def act(item: str) -> str:
    """Act on an item.

    Args:
        item: The item.
    """
    return f"did {item}"


def _approve(event: BeforeToolCallEvent) -> None:
    event.interrupt("approve")


@pytest.fixture
def thread_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running in a thread of its own (as an async app's would)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def on(loop: asyncio.AbstractEventLoop, coro: Any) -> Any:
    return asyncio.run_coroutine_threadsafe(coro, loop).result(10)


# --- pools per event loop ------------------------------------------------------------------------


def test_sync_calls_asyncio_run_and_another_thread_s_loop_in_turn(
    store: PostgresStore, thread_loop: asyncio.AbstractEventLoop
) -> None:
    paused = Agent(
        ScriptedModel([[ToolUse("t1", "act", {"item": "x"})]]),
        tools=[act],
        session=store,
        session_id="s",
    )
    paused.hooks.add_callback(BeforeToolCallEvent, _approve)
    result = paused("go")  # sync: the thread's own loop
    assert result.stop_reason == "interrupt"
    loaded = asyncio.run(store.load("s"))  # a loop of its own, closed afterwards
    assert loaded is not None and loaded.pause is not None
    version = loaded.version
    loaded = on(thread_loop, store.load("s"))  # a loop running in another thread
    assert loaded is not None and loaded.version == version
    fresh = Agent(ScriptedModel(["done"]), tools=[act], session=store, session_id="s")
    fresh.hooks.add_callback(BeforeToolCallEvent, _approve)
    assert fresh.resume({result.interrupts[0].id: True}).stop_reason == "end_turn"  # sync again
    for _ in range(3):  # each loop in turn, on its own connections
        after = on(thread_loop, store.load("s"))
        assert after is not None and after.pause is None and after.version > version
        assert asyncio.run(store.load("s")) == after
    assert 1 <= backends(store) <= 3  # the sync loop's, the thread loop's, the last run's


def test_close_drops_pools_of_closed_loops_and_of_running_ones(
    store: PostgresStore, thread_loop: asyncio.AbstractEventLoop
) -> None:
    on(thread_loop, store.load("a"))  # a pool on a loop still running
    closed = asyncio.new_event_loop()  # and one on a loop closed since (kept: not collected)
    closed.run_until_complete(store.save("a", update(0, 0, [msg(0)])))
    closed.close()
    assert settled_backends(store, 2) == 2
    started = time.monotonic()
    store.close()
    assert time.monotonic() - started < 10  # awaits no loop (one closed would never answer)
    assert settled_backends(store, 0) == 0
    with pytest.raises(Exception, match="closed"):
        on(thread_loop, store.load("a"))


def test_loops_that_are_gone_do_not_keep_their_connections(store: PostgresStore) -> None:
    for i in range(12):  # a loop per call, as scripts and tests do
        assert asyncio.run(store.save(f"s{i}", update(0, 0, [msg(i)]))) == 1
    assert backends(store) <= 2  # each new loop's pool closes those of closed loops


async def test_concurrent_calls_share_at_most_max_size_connections(
    request: pytest.FixtureRequest,
) -> None:
    small = make_store(request.addfinalizer, max_size=2, pool_timeout=5)
    saved = await asyncio.gather(*(small.save(f"c{i}", update(0, 0, [msg(i)])) for i in range(20)))
    assert saved == [1] * 20
    assert await asyncio.to_thread(backends, small) == 2


async def test_a_pool_timeout_is_store_unavailable(request: pytest.FixtureRequest) -> None:
    from interlude.errors import StoreUnavailableError

    tiny = make_store(request.addfinalizer, max_size=1, pool_timeout=0.3)
    await tiny.save("s", update(0, 0, [msg(0)]))
    import psycopg

    # Hold the only connection with a save on a locked session row, then ask for another.
    async with await psycopg.AsyncConnection.connect(DSN) as holder:
        await holder.execute(f"SELECT 1 FROM {tiny.schema}.sessions WHERE id = 's' FOR UPDATE")
        waiting = asyncio.create_task(tiny.save("s", update(1, 1, [msg(1)])))

        async def blocked() -> bool:  # the save holds the connection, waiting for the lock
            query = (
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE application_name = %s AND wait_event_type = 'Lock'"
            )
            async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as watcher:
                cur = await watcher.execute(query, (f"interlude-{tiny.schema}",))
                row = await cur.fetchone()
            return row is not None and row[0] == 1

        await until(blocked, "the save to wait on the locked row")
        with pytest.raises(StoreUnavailableError, match="couldn't get a connection"):
            await tiny.load("s")
        await holder.rollback()
        assert await waiting == 2


# --- a save is one statement ---------------------------------------------------------------------


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    """Every statement the store's connections send, in order, read from libpq's trace of each
    connection opened meanwhile: the name of a prepared statement a Bind runs, or the text of
    a simple Query. Call ``statements.clear()`` to start counting anew."""
    import tempfile

    import psycopg
    from psycopg import pq

    trace = tempfile.TemporaryFile("w+")  # noqa: SIM115  # read by Sent, closed after the test
    connect = psycopg.AsyncConnection.connect.__func__  # type: ignore[attr-defined]

    async def traced(cls: Any, *args: Any, **kwargs: Any) -> Any:
        conn = await connect(cls, *args, **kwargs)
        conn.pgconn.trace(trace.fileno())
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        return conn

    class Sent(list[bytes]):
        def _read(self) -> None:
            trace.seek(0)
            for line in trace.read().splitlines():
                parts = line.split("\t")
                if len(parts) > 3 and parts[0] == "F" and parts[2] in ("Bind", "Query"):
                    words = parts[3].split()
                    word = words[1 if parts[2] == "Bind" else 0]
                    list.append(self, word.strip('"').encode())
            trace.seek(0)
            trace.truncate()

        def __len__(self) -> int:
            self._read()
            return list.__len__(self)

        def __getitem__(self, i: Any) -> Any:
            self._read()
            return list.__getitem__(self, i)

        def __delitem__(self, i: Any) -> None:
            self._read()
            list.__delitem__(self, i)

        def clear(self) -> None:
            self._read()
            list.clear(self)

    monkeypatch.setattr(psycopg.AsyncConnection, "connect", classmethod(traced))
    yield Sent()
    trace.close()


async def test_each_save_and_load_is_one_statement(
    store: PostgresStore, statements: list[bytes]
) -> None:
    from interlude._interrupt import Interrupt

    asked = Interrupt(
        id="i1", name="approve", source="before_model_call", raised_at=1.0, expires_at=5.0
    )
    await store.load("s")  # a connection, ready
    statements.clear()
    assert (
        await store.save(
            "s",
            update(0, 0, [msg(0), msg(1)], pending=[asked.to_dict()], audit=[{"event": "asked"}]),
        )
        == 1
    )
    await store.record_answers("s", [answer("i1", 2.0)])
    recorded = await store.recorded_answers("s")
    del statements[1:]
    assert (
        await store.save(
            "s",
            update(1, 2, [msg(2)], pending=[], state={"k": 1}, applied_answers=[recorded[0].seq]),
        )
        == 2
    )
    with pytest.raises(SessionConflictError, match="at version 2, not 1"):
        await store.save("s", update(1, 2, [msg(9)]))
    with pytest.raises(SessionConflictError, match="holds 3 messages, but the save appends at 4"):
        await store.save("s", update(2, 4, [msg(9)]))
    loaded = await store.load("s")
    assert len(statements) == 5 and all(b"save" in q for q in statements[:4])
    assert loaded is not None and loaded.version == 2 and len(loaded.messages) == 3
    assert loaded.state == {"k": 1} and loaded.audit == [{"event": "asked"}]
    assert await store.recorded_answers("s") == [] and await store.pending_interrupts() == []


async def test_the_save_is_prepared_on_the_pooled_connection(store: PostgresStore) -> None:
    import psycopg

    for i in range(3):
        await store.save("p", update(i, i, [msg(i)]))
    async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
            (f"interlude-{store.schema}",),
        )
        assert await cur.fetchone() == (1,)  # one loop, one connection: the save's
    # The store's connection holds the save prepared (psycopg prepares at first use).
    from interlude.sessions import _postgres_pools

    pool = store._pools.pool()  # the test's loop
    async with _postgres_pools._Lease(pool) as conn:
        cur = await conn.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [r[0] for r in await cur.fetchall()]
    assert any("save_session" in p for p in prepared)


# --- migration 5 -> 7 with data in place -----------------------------------------------------


def test_a_schema_at_migration_5_gains_the_save_function_and_reservations() -> None:
    import psycopg
    from psycopg import sql as psql

    with schema_at_migration(5) as (schema, execute):
        execute(
            "INSERT INTO {s}.sessions (id, version, format_version, state, tools, "
            "message_count, claim, claim_expires_at) VALUES "
            "('old', 3, 1, '{{\"n\": 1}}', '[]', 1, '{{\"expires_at\": 5}}', 5)"
        )
        execute(
            "INSERT INTO {s}.messages VALUES ('old', 0, %s)", ('{"role": "user", "content": []}',)
        )
        store = PostgresStore(DSN, schema=schema)
        try:
            before = asyncio.run(store.load("old"))
            assert before is not None and before.version == 3 and before.state == {"n": 1}
            assert asyncio.run(store.save("old", update(3, 1, [msg(1)]))) == 4
            after = asyncio.run(store.load("old"))
            assert after is not None and len(after.messages) == 2 and after.state == {"n": 1}
            assert asyncio.run(store.sessions_to_resume(10.0, reserve_for="w")) == []
            with psycopg.connect(DSN) as conn:
                done = conn.execute(
                    psql.SQL("SELECT version FROM {s}.interlude_migrations ORDER BY 1").format(
                        s=psql.Identifier(schema)
                    )
                ).fetchall()
            assert done == [(v,) for v in range(1, len(_MIGRATIONS) + 1)]
        finally:
            store.close()


# --- work reserved for a worker --------------------------------------------------------------


async def with_answers(store: PostgresStore, n: int) -> list[str]:
    """``n`` sessions, each with a recorded answer at time i (so the oldest work is s000)."""
    sids = [f"s{i:03}" for i in range(n)]
    for i, sid in enumerate(sids):
        await store.save(sid, update(0, 0, [msg(0)]))
        await store.record_answers(sid, [answer("q", float(i))])
    return sids


async def test_reserved_work_goes_to_its_owner_until_the_lease_lapses(
    store: PostgresStore,
) -> None:
    assert PostgresStore.reserves_work is True
    sids = await with_answers(store, 5)
    now = 100.0
    first = await store.sessions_to_resume(now, limit=2, reserve_for="w1", lease=30)
    assert first == sids[:2]  # oldest work first
    assert await store.sessions_to_resume(now, reserve_for="w2", lease=30) == sids[2:]
    assert await store.sessions_to_resume(now + 1, reserve_for="w3") == []  # all reserved
    assert await store.sessions_to_resume(now + 1, reserve_for="w1", limit=5) == sids[:2]
    assert await store.sessions_to_resume(now + 1) == sids  # without reserve_for: everything
    assert await store.sessions_to_resume(now + 1, limit=3) == sids[:3]
    lapsed = await store.sessions_to_resume(now + 31, reserve_for="w3", limit=3)
    assert lapsed == sids[:3]  # w1's lapsed at 130, w2's too
    assert await store.sessions_to_resume(now + 32, reserve_for="w2") == sids[3:]


async def test_two_concurrent_reserving_calls_never_return_the_same_session(
    request: pytest.FixtureRequest,
) -> None:
    a = make_store(request.addfinalizer)
    b = PostgresStore(DSN, schema=a.schema)  # another pool: other connections
    request.addfinalizer(b.close)
    sids = await with_answers(a, 120)
    for round_ in range(8):
        now = 1000.0 + 100 * round_  # every earlier reservation has lapsed
        limit = None if round_ % 2 else 50
        got_a, got_b = await asyncio.gather(
            a.sessions_to_resume(now, limit=limit, reserve_for="a", lease=10),
            b.sessions_to_resume(now, limit=limit, reserve_for="b", lease=10),
        )
        assert not set(got_a) & set(got_b), round_
        assert got_a == sorted(got_a) and got_b == sorted(got_b)  # oldest work first
        if limit is None:
            assert sorted(got_a + got_b) == sids  # each session went to one of them
        else:
            assert len(got_a) == len(got_b) == 50
