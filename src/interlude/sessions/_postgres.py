"""PostgresStore: sessions in PostgreSQL, shared by many workers
(extra ``interlude-agents[postgres]``).

Every JSON piece is stored as ``text`` holding exactly the ``json.dumps`` output MemoryStore keeps,
not as ``jsonb``: jsonb rejects strings with ``\\u0000`` or lone surrogates and rewrites floats
from 1e16 up as integers (1e300 comes back as a different number). Cast to jsonb in ad hoc
queries (``state::jsonb``). The pending-interrupt index keeps its filter columns in their own,
indexed columns.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from .._interrupt import Interrupt
from .._json import loads as strict_json
from .._json import loads_all
from .._messages import JsonValue
from ..errors import (
    ConfigurationError,
    SessionConflictError,
    SessionCorruptError,
    SessionError,
    StateFormatError,
    StoreUnavailableError,
)
from . import _postgres_wire as wire
from ._answers import answered_ids, call_taken, claim_deadline, queued_first, read_answer_rows
from ._postgres_answers import PostgresAnswers, _corrupt
from ._postgres_options import options as _options
from ._postgres_options import redact as _redact
from ._postgres_outbox import PostgresOutbox
from ._postgres_pools import LoopPool, LoopPools
from ._postgres_sql import FILTERS, MIGRATIONS, PENDING_TAIL, STATEMENTS, migrate
from ._protocol import (
    PendingInterrupt,
    PendingQuery,
    SessionUpdate,
    StoredSession,
    audit_json,
    check_session_id,
    epoch,
    no_rewind,
)

if TYPE_CHECKING:
    import psycopg
    from psycopg import sql

__all__ = ["PostgresStore"]

T = TypeVar("T")

_MIGRATIONS = MIGRATIONS  # the name the tests (and earlier releases) use


def _load_json(text: str | None, what: str, session_id: str) -> Any:
    if text is None:
        return None
    try:
        return strict_json(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise SessionCorruptError(
            f"session {session_id!r}: stored {what} is not valid JSON ({exc})"
        ) from None


def _audit_entries(session_id: str, rows: list[tuple[int, str]]) -> list[dict[str, JsonValue]]:
    """The audit entries of ``(seq, entry)`` rows in seq order; SessionCorruptError if one is
    unreadable or missing."""
    entries = []
    for i, (seq, text) in enumerate(rows):
        if seq != i:
            raise _corrupt(session_id, f"audit entry {i} is missing (found {seq!r})")
        entry = _load_json(text, f"audit entry {i}", session_id)
        if not isinstance(entry, dict):
            raise _corrupt(session_id, f"audit entry {i} is a {type(entry).__name__}")
        entries.append(entry)
    return entries


class PostgresStore(PostgresOutbox, PostgresAnswers):
    """Sessions in PostgreSQL: one row per session, one per message (append-only), one per
    pending interrupt. Saves are compare-and-swap transactions, safe across processes.

    The tables live in ``schema`` (created, and migrated forward, when the store opens; a
    ``?schema=name`` parameter of a postgresql:// DSN names it too). The constructor and
    ``close()`` block: the constructor connects once (sync) to migrate.

    Calls run on psycopg's async API, on the caller's event loop (no worker-thread hop). An
    async connection belongs to one loop, so each loop the store is used from (the per-thread
    loop of sync calls, ``asyncio.run``, a helper thread's loop, a worker's) gets its own small
    pool, made at its first call, up to ``max_size`` connections (``min_size`` is accepted for
    compatibility: connections open on demand). A pool whose loop has closed is dropped without
    that loop; ``close()`` closes every pool's idle connections at once and the busy ones as
    their calls end, never waiting on a loop. psycopg_pool's ``AsyncConnectionPool`` is not
    used: it keeps tasks running on its loop until closed there (see ``_postgres_pools``).

    A save is one statement, so one round trip and one transaction: the ``save_session``
    function (migration 6) does the compare-and-swap and adds and removes the rows, and on a
    conflict returns the session's version and message count, for the same
    SessionConflictError messages; its parameters go in binary (no escaping of JSON texts) and
    the arrays a save leaves empty are left out. A save that answers questions or starts tool
    calls (``SessionUpdate.starts``) calls ``save_checked`` (migration 8) instead, which first
    locks the session row and checks the recorded answers and the call claims
    (``call_claims``, :meth:`claim_call`), then saves: one statement too. A load is one query,
    read in binary (a long conversation's ``text[]`` needs no unescaping). Saves, loads and
    :meth:`recorded_answers` go on libpq directly (``_postgres_wire``: the least client CPU per
    call); connections prepare each statement at its first use (``prepare_threshold=0``). A
    cancelled save may still commit; load the session to see where it stands.

    A pooled connection is checked before use without a round trip (its socket has nothing to
    read while idle) and pinged, then replaced, when it has: so those a server restart killed
    are replaced rather than failing a call. A call waits at most ``pool_timeout`` seconds for a
    connection. When the server cannot be reached (down, restarting, no connection within that
    time) calls raise StoreUnavailableError (a SessionError), never "no such session"; the next
    call after an outage connects again at once.

    ``sessions_to_resume(reserve_for=worker_id, lease=s)`` reserves what it returns for that
    worker (``reserves_work``), in one ``UPDATE`` over rows picked ``FOR UPDATE SKIP LOCKED``.

    ``bytes_written`` counts the JSON bytes saved, as in MemoryStore.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "interlude",
        min_size: int = 1,
        max_size: int = 4,
        pool_timeout: float = 3.0,
    ) -> None:
        dsn, schema = _options(dsn, schema, min_size, max_size)
        if not (isinstance(pool_timeout, int | float) and pool_timeout > 0):
            raise ConfigurationError(f"pool_timeout is seconds > 0, got {pool_timeout!r}")
        try:
            import psycopg
            import psycopg_pool  # noqa: F401 - its PoolTimeout: no connection in time
            from psycopg import conninfo, sql
        except ImportError as exc:
            raise ConfigurationError(
                f"PostgresStore needs psycopg 3 and psycopg-pool ({exc}): "
                "pip install 'interlude-agents[postgres]'"
            ) from None
        self._psycopg_error = psycopg.Error
        self._integrity_error = psycopg.IntegrityError
        self._down_errors = (psycopg.OperationalError, psycopg.InterfaceError)
        self.schema = schema
        self.bytes_written = 0
        self._lock = threading.Lock()
        self._closed = False
        shown = _redact(dsn)
        try:
            params = conninfo.conninfo_to_dict(dsn)
        except psycopg.Error as exc:
            raise ConfigurationError(
                f"invalid PostgreSQL DSN {shown!r}: {_redact(str(exc))}"
            ) from None
        timeout: dict[str, Any] = {} if "connect_timeout" in params else {"connect_timeout": 10}
        try:
            with psycopg.connect(dsn, **timeout) as conn:
                self._migrate(conn, sql.Identifier(schema))
                self._sql = self._statements(conn, sql.Identifier(schema))
                self._wire = {
                    k: wire.statement(k, v, wire.ENCODERS)
                    for k, v in self._sql.items()
                    if wire.hot(k) or k == "rewind"
                }
        except psycopg.Error as exc:
            # The server cannot be reached (down, restarting): an outage, which a caller may
            # wait out; anything else (a refused login, a failed migration) is not.
            down = isinstance(exc, psycopg.OperationalError) and "authentication" not in str(exc)
            kind = StoreUnavailableError if down else SessionError
            raise kind(
                f"cannot open PostgreSQL session store at {shown!r}, schema {schema!r}: "
                f"{_redact(str(exc)).strip()}"
            ) from None
        # Prepared at first use: the hot statements skip parsing and planning from the start.
        # UTF8: the encoding the hot statements' texts are sent and read in (_postgres_wire).
        kwargs: dict[str, Any] = {
            "autocommit": True,
            "prepare_threshold": 0,
            **timeout,
            "client_encoding": "UTF8",
        }
        if "application_name" not in params:  # to tell this store's connections apart
            kwargs["application_name"] = f"interlude-{schema}"

        async def connect() -> psycopg.AsyncConnection[Any]:
            return await psycopg.AsyncConnection.connect(dsn, **kwargs)

        self._pools = LoopPools(lambda: LoopPool(connect, max_size, pool_timeout))

    # -- setup ---------------------------------------------------------------------------------

    @staticmethod
    def _migrate(conn: psycopg.Connection[Any], s: sql.Identifier) -> None:
        migrate(conn, s)

    @staticmethod
    def _statements(conn: psycopg.Connection[Any], s: sql.Identifier) -> dict[str, bytes]:
        """Every query with the schema filled in, rendered once."""
        from psycopg import sql

        filters = {f"filter_{k}": v for k, v in FILTERS.items()}
        return {k: sql.SQL(v).format(s=s).as_bytes(conn) for k, v in (STATEMENTS | filters).items()}

    # -- plumbing ------------------------------------------------------------------------------

    async def _run(self, what: str, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        if self._closed:
            raise SessionError("this PostgresStore is closed")
        try:
            return await fn(*args)
        except SessionError:
            raise
        except self._down_errors as exc:  # unreachable, restarting, no connection in time
            raise StoreUnavailableError(
                f"PostgreSQL is unavailable, could not {what}: {_redact(str(exc)).strip()}"
            ) from exc
        except self._psycopg_error as exc:
            raise SessionError(f"PostgreSQL failed to {what}: {_redact(str(exc)).strip()}") from exc

    async def _rows(self, statement: str, params: dict[str, Any]) -> list[Any]:
        async with self._pools.connection() as conn:  # autocommit: one statement, one transaction
            cursor = await conn.execute(self._sql[statement], params)
            return await cursor.fetchall() if cursor.description else []

    def close(self) -> None:
        """Close the connections of every event loop's pool: idle ones now, those in use when
        their call ends. Never waits on a loop (one may be closed, busy or gone)."""
        if not self._closed:
            self._closed = True
            self._pools.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the protocol --------------------------------------------------------------------------

    async def load(self, session_id: str) -> StoredSession | None:
        check_session_id(session_id)
        return await self._run(f"load session {session_id!r}", self._load, session_id)

    async def _load(self, session_id: str) -> StoredSession | None:
        async with self._pools.connection() as conn:
            # Binary results: a long conversation's text[] needs no unescaping (twice as fast).
            result = await wire.run(conn, self._wire["load"], {"id": session_id})
        if not result.ntuples:
            return None
        cell = result.get_value
        row = [decode(cell(0, i)) for i, decode in enumerate(wire.LOAD_COLUMNS)]
        return self._stored(session_id, row)

    @staticmethod
    def _stored(session_id: str, row: Any) -> StoredSession:
        """The session of a row of the ``load`` query; SessionCorruptError if unreadable."""
        version, format_version, state_text, pause_text, tools_text, count, claim_text = row[:7]
        agent, texts, n, lo, hi, audit_texts, seqs, answer_seqs, answer_ids, answer_data = row[7:]
        texts = texts or []
        if version < 1:
            raise _corrupt(session_id, f"version {version!r} is not positive")
        if n != count or (n and (lo, hi) != (0, n - 1)):
            raise _corrupt(
                session_id,
                f"it should hold messages 0..{count - 1} but holds {n} (indexes {lo}..{hi})",
            )
        messages: list[Any] | None = loads_all(texts)  # in one pass (else: which one is bad)
        if messages is None:
            messages = [_load_json(t, f"message {i}", session_id) for i, t in enumerate(texts)]
        for i, message in enumerate(messages):
            if not isinstance(message, dict):
                kind = type(message).__name__
                raise _corrupt(session_id, f"message {i} is a {kind}, not an object")
        state = _load_json(state_text, "state", session_id)
        if not isinstance(state, dict):
            raise _corrupt(session_id, f"state is a {type(state).__name__}, not an object")
        pause = _load_json(pause_text, "pause", session_id)
        if pause is not None and not isinstance(pause, dict):
            raise _corrupt(session_id, f"pause is a {type(pause).__name__}, not an object")
        claim = _load_json(claim_text, "claim", session_id)
        if claim is not None and not isinstance(claim, dict):
            raise _corrupt(session_id, f"claim is a {type(claim).__name__}, not an object")
        tools = _load_json(tools_text, "tools", session_id)
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            raise _corrupt(session_id, f"tools is not a list of names: {tools!r:.200}")
        audit = _audit_entries(session_id, list(zip(seqs or [], audit_texts or [], strict=True)))
        return StoredSession(
            session_id=session_id,
            version=version,
            format_version=format_version,
            messages=messages,
            state=state,
            pause=pause,
            tools=tools,
            claim=claim,
            agent=agent,
            audit=audit,
            answers=read_answer_rows(
                session_id, zip(answer_seqs or [], answer_ids or [], answer_data or [], strict=True)
            ),
        )

    async def save(self, session_id: str, update: SessionUpdate) -> int:
        params, size = self._params(session_id, update)
        version = await self._run(f"save session {session_id!r}", self._save, params)
        with self._lock:
            self.bytes_written += size
        return version

    async def rewind(self, session_id: str, update: SessionUpdate) -> int:
        """:meth:`save`, except that ``update.first_index`` may be below the number of messages
        stored (the optional ``rewind`` of ``interlude.sessions._protocol``): one statement,
        migration 9's function, which locks and checks the session row, deletes the message
        rows from ``first_index`` on, sets the message count there and saves as
        ``save_checked`` does, in one transaction (a refused save takes the cut back)."""
        params, size = self._params(session_id, update)
        if update.expected_version < 1:
            raise no_rewind(session_id)
        params["statement"] = "rewind"
        version = await self._run(f"rewind session {session_id!r}", self._save, params)
        with self._lock:
            self.bytes_written += size
        return version

    def _params(self, session_id: str, update: SessionUpdate) -> tuple[dict[str, Any], int]:
        """A save's parameters, checked, and how many JSON bytes it writes."""
        check_session_id(session_id)
        for i, message in enumerate(update.new_messages):
            if not isinstance(message, dict):
                raise StateFormatError(
                    f"session {session_id!r}: new message {i} is a {type(message).__name__}, "
                    "not an object"
                )
        messages = [json.dumps(m) for m in update.new_messages]
        keep = update.pending is None
        pending = [json.dumps(p) for p in update.pending or ()]
        interrupts = [
            Interrupt.from_dict(p, f"session {session_id!r} pending[{i}]")
            for i, p in enumerate(update.pending or ())
        ]
        ids = [it.id for it in interrupts]
        if len(set(ids)) != len(ids):
            raise StateFormatError(f"session {session_id!r}: pending interrupt ids repeat: {ids}")
        state = None if update.state is None else json.dumps(update.state)
        audit = audit_json(session_id, update.audit)
        pause, claim = json.dumps(update.pause), json.dumps(update.claim)
        applied = [int(seq) for seq in update.applied_answers]
        filled = {"messages": messages, "ids": ids, "audit": audit, "applied": applied}
        answered = answered_ids(update.audit)
        params: dict[str, Any] = {
            "statement": "save:" + ",".join(k for k, v in filled.items() if v),
            "id": session_id,
            "expected": update.expected_version,
            "first": update.first_index,
            "fv": update.format_version,
            "state": state,
            "pause": None if update.pause is None else pause,
            "claim": None if update.claim is None else claim,
            "lease": claim_deadline(update.claim),  # indexed, for sessions_to_resume
            "tools": json.dumps(list(update.tools)),
            "messages": messages,
            "ids": ids,
            "names": [it.name for it in interrupts],
            "tool_names": [None if it.tool_use is None else it.tool_use.name for it in interrupts],
            "raised": [it.raised_at for it in interrupts],
            "expires": [it.expires_at for it in interrupts],
            "data": pending,
            "keep_pending": keep,
            "agent": update.agent,
            "audit": audit,
            "applied": applied,
            "answered": answered,
            "starts": update.starts,
        }
        size = sum(map(len, messages)) + len(pause) + sum(map(len, pending))
        size += len(claim) + (0 if state is None else len(state))
        return params, size + sum(map(len, audit))

    async def _save(self, p: dict[str, Any]) -> int:
        """One statement: migration 6's function (the compare-and-swap, the rows it adds and
        removes, and on a conflict where the session stands), or for a save that answers
        questions or starts calls migration 8's, which first locks the session row and checks
        the recorded answers and the call claims (or for a rewind migration 9's, which cuts
        the messages and then calls migration 8's); one round trip either way."""
        sid = p["id"]
        checked = bool(p["answered"] or p["starts"])
        statement = p["statement"].replace("save:", "checked:", 1) if checked else p["statement"]
        try:
            async with self._pools.connection() as conn:
                result = await wire.run(conn, self._wire[statement], p)
        except self._integrity_error as exc:
            raise _corrupt(sid, f"its stored rows clash with this save ({exc})") from exc
        saved = wire.int_of(result.get_value(0, 0))
        if saved is None:
            if checked:
                self._refused(p, result)
            at = wire.int_of(result.get_value(0, 1))
            count = wire.int_of(result.get_value(0, 2))
            raise self._conflict(sid, p, None if at is None else (at, count or 0))
        return saved

    @staticmethod
    def _refused(p: dict[str, Any], result: Any) -> None:
        """AlreadyAnsweredError if a recorded answer waits for a question the save answers;
        CallTakenError if another session holds a call it starts (the save was not made)."""
        cell = result.get_value
        waiting_seqs, waiting_ids = wire.ints_of(cell(0, 3)), wire.texts_of(cell(0, 4))
        waiting_data = wire.texts_of(cell(0, 5))
        keys, holders = wire.texts_of(cell(0, 6)), wire.texts_of(cell(0, 7))
        if waiting_seqs is not None:
            rows = zip(waiting_seqs, waiting_ids or [], waiting_data or [], strict=True)
            applied = set(p["applied"])
            for waiting in read_answer_rows(p["id"], rows):
                if waiting.seq not in applied:
                    raise queued_first(p["id"], waiting)
        held = dict(zip(keys or (), holders or (), strict=True))
        for key in p["starts"]:
            if key in held:
                raise call_taken(p["id"], key, str(held[key]))

    @staticmethod
    def _conflict(
        sid: str, p: dict[str, Any], current: tuple[int, int] | None
    ) -> SessionConflictError:
        version, count = current or (0, 0)
        if version != p["expected"]:
            return SessionConflictError(
                f"session {sid!r} is at version {version}, not {p['expected']}: another agent "
                "saved it first"
            )
        return SessionConflictError(
            f"session {sid!r} holds {count} messages, but the save appends at {p['first']}"
        )

    skipped: tuple[tuple[str, str], ...] = ()
    """``(session_id, why)`` of the sessions the last :meth:`pending_interrupts` (or
    :meth:`expired_interrupts`) call left out entries of, because they could not be read (empty
    when everything was read). :meth:`sessions_to_resume` reads typed columns only."""

    async def pending_interrupts(self, query: PendingQuery | None = None) -> list[PendingInterrupt]:
        """Pending interrupts across sessions, oldest first, that pass ``query`` (None: all).

        A corrupt row of the pending index does not hide the others: it is left out, and
        ``self.skipped`` is set to the ``(session_id, why)`` of each session with rows left
        out by this call, in session id order (empty when every row was read).
        """
        q = query or PendingQuery()
        filters = {
            "name": q.name,
            "tool_name": q.tool_name,
            "older": epoch(q.older_than),
            "newer": epoch(q.newer_than),
            "agent": q.agent,
            "expiring": epoch(q.expiring_before),
        }
        limit = q.limit
        rows = None if limit is None or limit < 0 else limit
        query_sql, params = self._pending_query(**filters, limit=rows)
        found, skipped, count = await self._run(
            "list pending interrupts", self._pending, query_sql, params
        )
        if skipped and rows is not None and count >= rows:  # skipped rows took places
            query_sql, params = self._pending_query(**filters, limit=None)
            found, skipped, count = await self._run(
                "list pending interrupts", self._pending, query_sql, params
            )
        self.skipped = tuple(sorted(skipped.items()))
        return found if limit is None else found[:limit]

    async def expired_interrupts(
        self, now: datetime | float, *, limit: int | None = None
    ) -> list[PendingInterrupt]:
        """Pending interrupts whose deadline is at or before ``now``, earliest first (an indexed
        query on the ``expires_at`` column); unreadable rows are left out and named in
        ``self.skipped``, as above."""
        rows = None if limit is None or limit < 0 else limit
        params: dict[str, Any] = {"now": float(epoch(now) or 0.0), "limit": rows}
        query = self._sql["expired"]
        found, skipped, count = await self._run(
            "list expired interrupts", self._pending, query, params
        )
        if skipped and rows is not None and count >= rows:  # skipped rows took places
            params["limit"] = None
            found, skipped, count = await self._run(
                "list expired interrupts", self._pending, query, params
            )
        self.skipped = tuple(sorted(skipped.items()))
        return found if limit is None else found[:limit]

    async def audit_trail(self, session_id: str) -> list[dict[str, JsonValue]]:
        check_session_id(session_id)
        return await self._run(f"read the audit of {session_id!r}", self._audit, session_id)

    async def _audit(self, session_id: str) -> list[dict[str, JsonValue]]:
        async with self._pools.connection() as conn:
            cursor = await conn.execute(self._sql["audit"], {"id": session_id})
            rows = await cursor.fetchall()
        return _audit_entries(session_id, rows)

    def _pending_query(self, **params: Any) -> tuple[bytes, dict[str, Any]]:
        """The pending-interrupt query for these filters (None: no filter), and its parameters."""
        where = [
            self._sql[f"filter_{k}"] for k, v in params.items() if k in FILTERS and v is not None
        ]
        tail = b" AND ".join(where or [b"true"]) + PENDING_TAIL.encode()
        return self._sql["pending_head"] + tail, params

    async def _pending(
        self, query: bytes, params: dict[str, Any]
    ) -> tuple[list[PendingInterrupt], dict[str, str], int]:
        """The readable pending interrupts, why each session's unreadable rows were left out,
        and how many rows there were."""
        async with self._pools.connection() as conn:
            cursor = await conn.execute(query, params)
            rows = await cursor.fetchall()
        found: list[PendingInterrupt] = []
        skipped: dict[str, str] = {}
        for sid, text, agent in rows:
            try:
                interrupt = Interrupt.from_dict(_load_json(text, "pending interrupt", sid))
            except SessionCorruptError as exc:
                skipped.setdefault(sid, str(exc))
                continue
            except (StateFormatError, TypeError, ValueError) as exc:
                skipped.setdefault(
                    sid, str(_corrupt(sid, f"a pending interrupt is malformed ({exc})"))
                )
                continue
            found.append(PendingInterrupt(sid, interrupt, interrupt.raised_at, agent))
        return found, skipped, len(rows)

    async def list_sessions(self) -> list[str]:
        return await self._run("list sessions", self._list)

    async def _list(self) -> list[str]:
        async with self._pools.connection() as conn:
            cursor = await conn.execute(self._sql["list"])
            return [row[0] for row in await cursor.fetchall()]

    async def fork(self, session_id: str, new_session_id: str, update: SessionUpdate) -> int:
        """Make session ``new_session_id`` from the start of ``session_id`` and ``update``
        (see ``interlude.sessions._forking``); the source is not changed."""
        from ._forking import fork_by_copy

        return await fork_by_copy(self, session_id, new_session_id, update)

    async def delete(self, session_id: str) -> None:
        check_session_id(session_id)
        await self._run(f"delete session {session_id!r}", self._delete, session_id)

    async def _delete(self, session_id: str) -> None:
        # Messages, pending and audit rows go with the session row (ON DELETE CASCADE), after
        # any save holding that row commits; then, in a later statement (which sees the claims
        # committed while the row was waited for), the claims on calls asked in the session.
        async with self._pools.connection() as conn, conn.transaction():
            await conn.execute(self._sql["delete"], {"id": session_id})
            await conn.execute(self._sql["delete_calls"], {"id": session_id})

    async def claim_call(
        self, key: str, session_id: str, *, origin: str
    ) -> tuple[str, StoredSession | None]:
        """Claim tool call ``key`` for ``session_id`` (see :class:`CallClaims`), in one
        transaction: session ``origin``'s row share-locked (a save of it locks the row for
        update: it committed before, or waits until this commits and then sees the claim), the
        claim added unless the call has a holder, the holder read, ``origin`` read as
        :meth:`load` reads it."""
        check_session_id(session_id)
        check_session_id(origin)
        params = {"id": origin, "key": key, "holder": session_id}
        holder, row = await self._run(
            f"claim a call of session {origin!r}", self._claim_call, params
        )
        return holder, None if row is None else self._stored(origin, row)

    async def _claim_call(self, p: dict[str, Any]) -> tuple[str, Any]:
        """The holder of the call and the origin's ``load`` row (None: no such session)."""
        q = self._sql
        async with self._pools.connection() as conn, conn.transaction():
            await conn.execute(q["share_session"], p)
            held = None
            while held is None:  # None only if a delete of the origin took the claim meanwhile
                await conn.execute(q["claim_call"], p)
                held = await (await conn.execute(q["call_holder"], p)).fetchone()
            row = await (await conn.execute(q["load"], p, binary=True)).fetchone()
        return str(held[0]), row
