"""PostgresStore specifics: exact JSON, append-only rows, CAS across processes, migrations,
the SQL pending index, corrupt rows and a missing server or driver."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import textwrap
from datetime import datetime
from typing import Any

import pytest

from interlude.errors import (
    ConfigurationError,
    InvalidSessionIdError,
    SessionConflictError,
    SessionCorruptError,
    SessionError,
)
from interlude.sessions import MemoryStore, PendingQuery, PostgresStore
from interlude.sessions._postgres import _MIGRATIONS
from tests.support.postgres import (
    DSN,
    drop_schema,
    make_store,
    require_postgres,
    schema_url,
    unique_schema,
)

from .old_schemas import schema_at_migration
from .records import deadline, interrupt, update, with_extras


@pytest.fixture
def store(request: pytest.FixtureRequest) -> PostgresStore:
    return make_store(request.addfinalizer)


def sql(store: PostgresStore, query: str, *params: Any) -> list[tuple[Any, ...]]:
    """Run ``query`` ({s} is the store's schema) on a connection of its own."""
    import psycopg

    with psycopg.connect(DSN, autocommit=True) as conn:
        cur = conn.execute(query.replace("{s}", store.schema), params or None)
        return cur.fetchall() if cur.description else []


def msg(i: int) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": f"message {i}"}]}


def snapshot(store: PostgresStore) -> list[Any]:
    return [
        sql(store, f"SELECT * FROM {{s}}.{table} ORDER BY 1, 2")
        for table in ("sessions", "messages", "pending")
    ]


# --- round trip, append-only, conflicts --------------------------------------------------------


async def test_round_trip_is_exact_where_jsonb_is_not(store: PostgresStore) -> None:
    tricky = {
        "role": "user",
        "nul": "a\x00b",
        "lone": "\ud800",
        "floats": [1e16, 1e300, -0.0, 5e-324, 0.1, math.nan, math.inf],
        "big": 2**70,
        "é": "😀",
        "order": {"b": 1, "a": 2},
    }
    pause = {"step": {"kind": "before_tool_call"}, "note": [1, 2.5, None]}
    pending = [interrupt("i1", "approve", 10.0, tool="record"), interrupt("i2", "check", 11.0)]
    assert await store.save("s1", update(0, 0, [msg(0), tricky], pause=pause, pending=pending)) == 1
    got = await store.load("s1")
    assert got is not None
    assert (got.version, got.format_version, got.tools) == (1, 1, ["record"])
    assert json.dumps(got.messages) == json.dumps([msg(0), tricky])  # same text: NaN, order, -0.0
    assert type(got.messages[1]["floats"][0]) is float
    assert (got.state, got.pause) == ({}, pause)
    assert [(p.session_id, p.interrupt, p.tool_name) for p in await store.pending_interrupts()] == [
        ("s1", pending[0], "record"),
        ("s1", pending[1], None),
    ]
    assert sql(store, "SELECT version, message_count, pause IS NULL FROM {s}.sessions") == [
        (1, 2, False)
    ]
    assert await store.load("nope") is None


async def test_saves_append_rows_and_leave_earlier_ones_untouched(store: PostgresStore) -> None:
    await store.save("s1", update(0, 0, [msg(i) for i in range(3)], state={"n": 1}))
    rows = "SELECT idx, xmin::text, ctid::text FROM {s}.messages ORDER BY idx"
    before, written = sql(store, rows), store.bytes_written
    pause = {"p": 1}
    pending = [interrupt("i1", "approve", 1.0, tool="record")]
    claim = {"owner": "host:1"}
    new = update(1, 3, [msg(3), msg(4)], pause=pause, pending=pending, claim=claim)
    assert await store.save("s1", new) == 2
    after = sql(store, rows)
    assert after[:3] == before and [r[0] for r in after] == [0, 1, 2, 3, 4]
    expected = len(json.dumps(msg(3))) * 2 + len(json.dumps(pause)) + len(json.dumps(claim))
    expected += len(json.dumps(pending[0].to_dict()))
    assert store.bytes_written - written == expected
    got = await store.load("s1")
    assert got is not None and got.messages == [msg(i) for i in range(5)]
    assert got.state == {"n": 1} and got.pause == pause  # state=None leaves it
    # the next save replaces the pending index and clears the pause
    assert await store.save("s1", update(2, 5, [], state={"n": 2})) == 3
    assert await store.pending_interrupts() == []
    assert sql(store, "SELECT pause, state FROM {s}.sessions") == [(None, '{"n": 2}')]


async def test_conflicts_raise_and_write_nothing(store: PostgresStore) -> None:
    await store.save("s1", update(0, 0, [msg(0)], pending=[interrupt("i", "n", 1.0)]))
    before = snapshot(store)
    for bad, words in (
        (update(0, 0, [msg(9)]), "at version 1, not 0"),
        (update(5, 1, [msg(9)]), "at version 1, not 5"),
        (update(1, 0, [msg(9)]), "holds 1 messages, but the save appends at 0"),
        (update(1, 2, [msg(9)]), "holds 1 messages, but the save appends at 2"),
    ):
        with pytest.raises(SessionConflictError, match=words) as info:
            await store.save("s1", bad)
        assert "'s1'" in str(info.value)
    with pytest.raises(SessionConflictError, match="'new' is at version 0, not 3"):
        await store.save("new", update(3, 0, [msg(0)]))
    with pytest.raises(SessionConflictError, match="'new' holds 0 messages"):
        await store.save("new", update(0, 1, [msg(0)]))
    assert snapshot(store) == before
    assert await store.list_sessions() == ["s1"]


async def test_list_delete_and_cascade(store: PostgresStore) -> None:
    for sid in ("b", "a", "B", "a.b", "a-b"):
        await store.save(sid, update(0, 0, [msg(0)], pending=[interrupt("i", "n", 1.0)]))
    assert await store.list_sessions() == sorted(["b", "a", "B", "a.b", "a-b"])  # code point order
    await store.delete("a")
    await store.delete("never-there")
    assert await store.load("a") is None
    counts = "SELECT count(*) FROM {s}.%s WHERE session_id = 'a'"
    assert sql(store, counts % "messages") == sql(store, counts % "pending") == [(0,)]
    assert await store.save("a", update(0, 0, [msg(1)])) == 1


async def test_concurrent_saves_from_one_loop_and_from_several_loops(store: PostgresStore) -> None:
    sids = [f"c{i}" for i in range(8)]
    assert await asyncio.gather(*(store.save(s, update(0, 0, [msg(0)])) for s in sids)) == [1] * 8
    results = await asyncio.gather(
        *(store.save("c0", update(1, 1, [msg(i)])) for i in range(4)), return_exceptions=True
    )
    assert [r for r in results if not isinstance(r, SessionConflictError)] == [2]
    # another event loop (in another thread) uses the same store
    loaded = await asyncio.to_thread(asyncio.run, store.load("c0"))
    assert loaded is not None and loaded.version == 2


def test_bad_ids_schemas_and_sizes(store: PostgresStore) -> None:
    for bad in ["", "../x", "/etc/passwd", "a/b", ".hidden", "x" * 201, "a\x00b", "-x"]:
        for call in (store.load(bad), store.save(bad, update(0, 0, [])), store.delete(bad)):
            with pytest.raises(InvalidSessionIdError):
                asyncio.run(call)
    assert asyncio.run(store.list_sessions()) == []
    for schema in ("", "a-b", "1abc", 'x"; drop', "x" * 64, "a.b"):
        with pytest.raises(ConfigurationError, match="schema"):
            PostgresStore(DSN, schema=schema)
    with pytest.raises(ConfigurationError, match="max_size"):
        PostgresStore(DSN, schema="x", min_size=3, max_size=2)


def test_a_closed_store_says_so(request: pytest.FixtureRequest) -> None:
    with make_store(request.addfinalizer) as store:
        assert asyncio.run(store.list_sessions()) == []
    with pytest.raises(SessionError, match="closed"):
        asyncio.run(store.list_sessions())


# --- processes ---------------------------------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from interlude.errors import SessionConflictError
    from interlude.sessions import PostgresStore, SessionUpdate, open_store

    mode, url, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    import psycopg, psycopg_pool  # loaded before the start signal
    if mode == "open":
        sys.stdin.readline()
        open_store(url).close()
        print("opened", flush=True)
        sys.exit()
    store = open_store(url)
    for r in range(rounds):
        print("ready", flush=True)
        sys.stdin.readline()
        msg = {"role": "user", "round": r, "by": mode}
        update = SessionUpdate(
            expected_version=r, first_index=r, new_messages=[msg], pause=None, pending=[],
            tools=["record"], format_version=1,
        )
        try:
            asyncio.run(store.save("race", update))
            print("won", flush=True)
        except SessionConflictError:
            print("lost", flush=True)
    """
)


def _children(mode: list[str], url: str, rounds: int) -> list[subprocess.Popen[str]]:
    return [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, m, url, str(rounds)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for m in mode
    ]


def _say_all(procs: list[subprocess.Popen[str]], line: str) -> None:
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(line)
        p.stdin.flush()


def _read_all(procs: list[subprocess.Popen[str]]) -> list[str]:
    lines = []
    for p in procs:
        assert p.stdout is not None
        line = p.stdout.readline().strip()
        if not line:
            raise AssertionError(f"child failed:\n{p.communicate(timeout=30)[1]}")
        lines.append(line)
    return lines


def test_four_processes_race_one_session_exactly_one_wins_each_round(
    store: PostgresStore,
) -> None:
    rounds = 12
    procs = _children(["p0", "p1", "p2", "p3"], schema_url(store.schema), rounds)
    winners = []
    try:
        for _ in range(rounds):
            assert _read_all(procs) == ["ready"] * 4
            _say_all(procs, "go\n")
            outcomes = _read_all(procs)
            assert sorted(outcomes) == ["lost", "lost", "lost", "won"], outcomes
            winners.append(f"p{outcomes.index('won')}")
    finally:
        for p in procs:
            p.communicate(timeout=30)
    got = asyncio.run(store.load("race"))
    assert got is not None and got.version == rounds
    assert [(m["round"], m["by"]) for m in got.messages] == list(enumerate(winners))


def test_three_processes_opening_a_new_schema_migrate_once() -> None:
    require_postgres()
    schema = unique_schema()
    procs = _children(["open"] * 3, schema_url(schema), 0)
    try:
        _say_all(procs, "go\n")
        assert _read_all(procs) == ["opened"] * 3
        with PostgresStore(DSN, schema=schema) as store:
            done = sql(store, "SELECT version FROM {s}.interlude_migrations ORDER BY version")
            assert done == [(v,) for v in range(1, len(_MIGRATIONS) + 1)]
            assert asyncio.run(store.list_sessions()) == []
    finally:
        for p in procs:
            p.communicate(timeout=30)
        drop_schema(schema)


async def test_claim_is_a_column_beside_the_pause(store: PostgresStore) -> None:
    claim = {"owner": "host:1", "token": "t", "since": 1.0, "expires_at": 2.0}
    await store.save("s", update(0, 0, [msg(0)], pause={"p": 1}, claim=claim))
    [(pause, stored)] = sql(store, "SELECT pause, claim FROM {s}.sessions")
    assert json.loads(pause) == {"p": 1} and json.loads(stored) == claim
    before = store.bytes_written
    await store.save("s", update(1, 1, [], claim=claim))
    unclaimed = store.bytes_written
    await store.save("s", update(2, 1, []))
    assert unclaimed - before - (store.bytes_written - unclaimed) == len(json.dumps(claim)) - 4
    assert sql(store, "SELECT claim FROM {s}.sessions") == [(None,)]  # None is stored as NULL


def test_a_schema_at_migration_1_migrates_and_loads_without_a_claim() -> None:
    with schema_at_migration(1) as (schema, execute):  # as the release before claims
        execute(
            "INSERT INTO {s}.sessions (id, version, format_version, state, pause, tools, "
            "message_count) VALUES ('old', 1, 1, '{{}}', '{{\"p\": 1}}', '[]', 1)"
        )
        execute("INSERT INTO {s}.messages VALUES ('old', 0, %s)", (json.dumps(msg(0)),))
        with PostgresStore(DSN, schema=schema) as store:
            done = sql(store, "SELECT version FROM {s}.interlude_migrations ORDER BY version")
            assert done == [(v,) for v in range(1, len(_MIGRATIONS) + 1)]
            got = asyncio.run(store.load("old"))
            assert got is not None and got.claim is None and got.pause == {"p": 1}
            assert got.messages == [msg(0)]
            asyncio.run(store.save("old", update(1, 1, [], claim={"owner": "me"})))
            again = asyncio.run(store.load("old"))
            assert again is not None and again.claim == {"owner": "me"}


def test_a_schema_from_a_newer_release_is_refused(store: PostgresStore) -> None:
    sql(store, "INSERT INTO {s}.interlude_migrations (version) VALUES (99)")
    with pytest.raises(SessionError, match=r"migration 99.*upgrade interlude"):
        PostgresStore(DSN, schema=store.schema)


# --- the pending index -------------------------------------------------------------------------


async def test_pending_queries_match_memory_store(store: PostgresStore) -> None:
    memory = MemoryStore()
    layout = {  # ties on raised_at are ordered by session id, then interrupt id
        "s2": [interrupt("b", "approve", 5.0, "record"), interrupt("a", "approve", 5.0, "record")],
        "s1": [interrupt("z", "approve", 5.0, "send"), interrupt("q", "check", 1.5)],
        "s3": [interrupt("c", "check", 9.0), interrupt("d", "approve", 2.0, "send")],
        "s4": [],
    }
    for sid, pending in layout.items():
        for s in (memory, store):
            await s.save(sid, update(0, 0, [msg(0)], pending=pending))
    queries: list[dict[str, Any]] = [
        {},
        {"name": "approve"},
        {"name": "check", "older_than": 9.0},
        {"tool_name": "send"},
        {"tool_name": "record", "newer_than": 4},
        {"newer_than": datetime.fromtimestamp(1.5), "older_than": 9.5, "limit": 3},
        {"name": "approve", "tool_name": "record", "limit": 1},
        {"limit": 0},
        {"limit": -2},
        {"name": "nobody"},
    ]
    for q in queries:
        assert await store.pending_interrupts(PendingQuery(**q)) == await memory.pending_interrupts(
            PendingQuery(**q)
        ), q


def test_pending_filters_use_the_indexes(store: PostgresStore) -> None:
    sql(
        store,
        """INSERT INTO {s}.sessions (id, version, format_version, state, tools, message_count)
        SELECT 'bulk' || g, 1, 1, '{}', '[]', 0 FROM generate_series(1, 2000) g;
        INSERT INTO {s}.pending
        SELECT 'bulk' || (g % 2000 + 1), 'i' || g, 'name' || (g % 100),
            CASE WHEN g % 3 = 0 THEN 'tool' || (g % 50) END, g, '{}'
        FROM generate_series(1, 20000) g;
        ANALYZE {s}.pending""",
    )
    import psycopg

    for filters, index in (
        ({"name": "name7", "limit": 10}, "pending_name"),
        ({"name": "name7", "newer_than": 100.0}, "pending_name"),
        ({"tool_name": "tool7"}, "pending_tool"),
        ({"older_than": 50.0}, "pending_raised"),
        ({"limit": 5}, "pending_raised"),
    ):
        query, params = store._pending_query(
            **{"name": None, "tool_name": None, "older": None, "newer": None, "limit": None}
            | {k.removesuffix("_than"): v for k, v in filters.items()}
        )
        with psycopg.connect(DSN, autocommit=True) as conn:
            plan = "\n".join(r[0] for r in conn.execute(b"EXPLAIN " + query, params))
        assert index in plan, (filters, plan)


# --- corrupt rows, missing server, missing driver ----------------------------------------------

M, S = "UPDATE {s}.messages SET data = ", "UPDATE {s}.sessions SET "
CORRUPTIONS = {  # each damages session 'bad' only
    "message not an object": M + "'\"text\"' WHERE session_id = 'bad' AND idx = 1",
    "message not JSON": M + "'{oops' WHERE session_id = 'bad' AND idx = 0",
    "message missing": "DELETE FROM {s}.messages WHERE session_id = 'bad' AND idx = 0",
    "message extra": "INSERT INTO {s}.messages VALUES ('bad', 7, '{}')",
    "tools not a list": S + "tools = '{\"a\": 1}' WHERE id = 'bad'",
    "tools not names": S + "tools = '[1]' WHERE id = 'bad'",
    "pause not an object": S + "pause = '[1]' WHERE id = 'bad'",
    "claim not an object": S + "claim = '\"host:1\"' WHERE id = 'bad'",
    "claim not JSON": S + "claim = '{oops' WHERE id = 'bad'",
    "state not an object": S + "state = 'null' WHERE id = 'bad'",
    "version not positive": S + "version = 0 WHERE id = 'bad'",
}


@pytest.mark.parametrize("damage", list(CORRUPTIONS), ids=list(CORRUPTIONS))
def test_corrupt_rows_are_reported_not_half_loaded(store: PostgresStore, damage: str) -> None:
    asyncio.run(store.save("bad", update(0, 0, [msg(0), msg(1)], pause={"p": 1})))
    asyncio.run(store.save("good", update(0, 0, [msg(0)])))
    sql(store, CORRUPTIONS[damage])
    with pytest.raises(SessionCorruptError, match="'bad'"):
        asyncio.run(store.load("bad"))
    assert asyncio.run(store.load("good")) is not None
    assert asyncio.run(store.list_sessions()) == ["bad", "good"]


@pytest.mark.parametrize(
    ("data", "detail"), [("'{\"id\": 5}'", "malformed"), ("'{oops'", "not valid JSON")]
)
def test_a_corrupt_pending_row_hides_no_other(store: PostgresStore, data: str, detail: str) -> None:
    asyncio.run(store.save("bad", update(0, 0, [msg(0)], pending=[interrupt("i", "n", 1.0)])))
    asyncio.run(store.save("good", update(0, 0, [msg(0)], pending=[interrupt("g", "n", 2.0)])))
    sql(store, "UPDATE {s}.pending SET data = " + data + " WHERE session_id = 'bad'")
    found = asyncio.run(store.pending_interrupts())
    assert [(p.session_id, p.interrupt.id) for p in found] == [("good", "g")]
    assert [sid for sid, _ in store.skipped] == ["bad"]
    assert "'bad'" in store.skipped[0][1] and detail in store.skipped[0][1]
    # the corrupt row comes first: a limit still finds the readable one behind it
    assert [p.session_id for p in asyncio.run(store.pending_interrupts(PendingQuery(limit=1)))] == [
        "good"
    ]
    assert [sid for sid, _ in store.skipped] == ["bad"]
    assert (
        asyncio.run(store.pending_interrupts(PendingQuery(name="other"))) == []
        and store.skipped == ()
    )


def test_a_missing_server_is_a_clear_error_without_the_password() -> None:
    require_postgres()  # psycopg must be there to get this far
    for dsn in (
        "postgresql://postgres:s3cret@127.0.0.1:1/test",
        "host=127.0.0.1 port=1 user=postgres password=s3cret dbname=test",
    ):
        with pytest.raises(SessionError, match="cannot open PostgreSQL") as info:
            PostgresStore(dsn)
        assert "127.0.0.1" in str(info.value) and "s3cret" not in str(info.value)


def test_a_missing_driver_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ConfigurationError, match=r"pip install 'interlude-agents\[postgres\]'"):
        PostgresStore(DSN)


def test_importing_the_sessions_package_does_not_import_psycopg() -> None:
    code = (
        "import sys, interlude.sessions as s; s.PostgresStore; "
        "assert 'psycopg' not in sys.modules, 'psycopg imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# --- agent name, audit trail, deadlines ----------------------------------------------------------


def test_a_schema_at_migration_2_gains_agent_audit_and_deadlines() -> None:
    with schema_at_migration(2) as (schema, execute):  # as the release before audits
        execute(
            "INSERT INTO {s}.sessions (id, version, format_version, state, tools, "
            "message_count) VALUES ('old', 1, 1, '{{}}', '[]', 0)"
        )
        execute(
            "INSERT INTO {s}.pending VALUES ('old', 'q', 'n', null, 1.0, %s)",
            (json.dumps(deadline("q", None)),),
        )
        with PostgresStore(DSN, schema=schema) as store:
            done = sql(store, "SELECT version FROM {s}.interlude_migrations ORDER BY version")
            assert done == [(v,) for v in range(1, len(_MIGRATIONS) + 1)]
            old = asyncio.run(store.load("old"))
            assert old is not None and (old.agent, old.audit) == (None, [])
            assert asyncio.run(store.expired_interrupts(1e12)) == []
            asyncio.run(store.save("old", with_extras(1, [deadline("q", 5.0)], [{"n": 1}])))
            again = asyncio.run(store.load("old"))
            assert again is not None and (again.agent, again.audit) == ("triage", [{"n": 1}])
            assert [p.interrupt.id for p in asyncio.run(store.expired_interrupts(5))] == ["q"]
            assert sql(store, "SELECT session_id, seq, entry FROM {s}.audit") == [
                ("old", 0, '{"n": 1}')
            ]


def test_expired_uses_the_deadline_index(store: PostgresStore) -> None:
    for i in range(200):
        pending = [deadline(f"q{i}", float(i)), deadline(f"free{i}", None)]
        asyncio.run(store.save(f"s{i:03}", with_extras(0, pending, [])))
    sql(store, "ANALYZE {s}.pending")
    plan = sql(
        store,
        "EXPLAIN SELECT session_id, data FROM {s}.pending WHERE expires_at <= 10 "
        "ORDER BY expires_at, session_id, interrupt_id LIMIT 5",
    )
    assert "pending_deadline" in str(plan)
    found = asyncio.run(store.expired_interrupts(2.5))
    assert [p.session_id for p in found] == ["s000", "s001", "s002"]


@pytest.mark.parametrize(
    ("query", "detail"),
    [
        ("UPDATE {s}.audit SET entry = '{oops' WHERE seq = 1", "audit entry 1 is not valid JSON"),
        ("UPDATE {s}.audit SET entry = '[1]' WHERE seq = 0", "audit entry 0 is a list"),
        ("DELETE FROM {s}.audit WHERE seq = 0", "audit entry 0 is missing"),
    ],
)
async def test_a_corrupt_audit_row_is_reported(
    store: PostgresStore, query: str, detail: str
) -> None:
    await store.save("hurt", with_extras(0, [], [{"n": 1}, {"n": 2}]))
    sql(store, query)
    with pytest.raises(SessionCorruptError, match=f"'hurt'.*{detail}"):
        await store.load("hurt")
    with pytest.raises(SessionCorruptError, match=f"'hurt'.*{detail}"):
        await store.audit_trail("hurt")


async def test_expired_skips_a_corrupt_pending_row_even_with_a_limit(
    store: PostgresStore,
) -> None:
    await store.save("hurt", with_extras(0, [deadline("i", 1.0)], []))
    await store.save("fine", with_extras(0, [deadline("f", 2.0)], []))
    sql(store, "UPDATE {s}.pending SET data = '{oops' WHERE session_id = 'hurt'")
    found = await store.expired_interrupts(10.0, limit=1)  # the corrupt row comes first
    assert [p.session_id for p in found] == ["fine"]
    assert [sid for sid, _ in store.skipped] == ["hurt"] and "'hurt'" in store.skipped[0][1]
    await store.delete("hurt")
    assert len(await store.expired_interrupts(10.0)) == 1 and store.skipped == ()
    assert sql(store, "SELECT count(*) FROM {s}.audit") == [(0,)]


# --- recorded answers --------------------------------------------------------------------------

_RECORDER = textwrap.dedent(
    """
    import asyncio, json, sys
    from interlude.errors import SessionConflictError
    from interlude.sessions import PostgresStore

    dsn, schema, name, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    store = PostgresStore(dsn, schema=schema, min_size=1, max_size=1)
    answers = [{"interrupt_id": "q", "answer": name, "by": name, "at": 1.0, "shown": None}]
    for _ in range(rounds):
        asyncio.run(store.load("s"))  # connected: now wait for the others
        print("ready", flush=True)
        sys.stdin.readline()
        try:
            got = asyncio.run(store.record_answers("s", answers))
            print(json.dumps({"won": [a.seq for a in got]}), flush=True)
        except SessionConflictError:
            print(json.dumps({"lost": name}), flush=True)
    store.close()
    """
)


def test_concurrent_recorders_from_several_processes_exactly_one_wins(
    store: PostgresStore,
) -> None:
    asyncio.run(store.save("s", update(0, 0, [msg(0)])))
    rounds = 3
    argv = [sys.executable, "-c", _RECORDER, DSN, store.schema]
    procs = [
        subprocess.Popen(
            [*argv, f"w{i}", str(rounds)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(5)
    ]
    try:
        for attempt in range(rounds):
            assert _read_all(procs) == ["ready"] * 5  # all connected
            _say_all(procs, "go\n")  # all record at once
            outcomes = [json.loads(line) for line in _read_all(procs)]
            won = [o for o in outcomes if "won" in o]
            assert len(won) == 1 and won[0]["won"] == [attempt + 1], outcomes
            recorded = asyncio.run(store.recorded_answers("s"))
            assert [a.interrupt_id for a in recorded] == ["q"]
            assert {"lost": recorded[0].by} not in outcomes
            asyncio.run(store.clear_answers("s", attempt + 1))
    finally:
        errors = [p.communicate(timeout=60)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 5, errors


async def test_concurrent_recorders_on_one_store_exactly_one_wins(store: PostgresStore) -> None:
    await store.save("s", update(0, 0, [msg(0)]))

    async def one(i: int) -> str:
        answer = {"interrupt_id": "q", "answer": i, "by": f"w{i}", "at": 1.0, "shown": None}
        try:
            await store.record_answers("s", [answer])
        except SessionConflictError:
            return "lost"
        return "won"

    outcomes = await asyncio.gather(*(one(i) for i in range(8)))
    assert sorted(outcomes) == ["lost"] * 7 + ["won"]
    assert [a.seq for a in await store.recorded_answers("s")] == [1]


def test_a_schema_at_migration_3_gains_answers_and_claim_leases() -> None:
    with schema_at_migration(3) as (schema, execute):
        for sid, claim in (
            ("dead", '{"owner": "h", "expires_at": 5}'),
            ("none", '{"owner": "h", "expires_at": null}'),
            ("nul", '{"owner": "h\\u0000", "expires_at": 1}'),  # jsonb cannot read it
            ("junk", "{oops"),
            ("free", None),
        ):
            execute(
                "INSERT INTO {s}.sessions (id, version, format_version, state, tools, "
                "message_count, claim) VALUES (%s, 1, 1, '{{}}', '[]', 0, %s)",
                (sid, claim),
            )
        store = PostgresStore(DSN, schema=schema)
        try:
            assert asyncio.run(store.sessions_to_resume(10.0)) == ["dead"]
        finally:
            store.close()
