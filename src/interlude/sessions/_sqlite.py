"""SQLiteStore: the embedded default, one database file shared by the processes of one machine."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, NamedTuple

from .._interrupt import Interrupt
from .._json import loads_all
from .._messages import JsonValue
from ..errors import (
    ConfigurationError,
    SessionCorruptError,
    SessionError,
    StateFormatError,
)
from ._answers import claim_deadline, read_answer_rows
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
from ._sqlite_answers import SQLiteAnswers, _corrupt, _is_int, _json
from ._sqlite_outbox import SQLiteOutbox
from ._sqlite_sql import (
    ANSWERS,
    FILTERS,
    MIGRATIONS,
    PENDING_HEAD,
    check_queue,
    check_starts,
    cut_messages,
    migrate,
    pending_rows,
    save_conflict,
    use_wal,
)

__all__ = ["SQLiteStore"]

_MIGRATIONS = MIGRATIONS  # the name the tests (and earlier releases) use


# What _read reads of a session: its row, its message rows (idx, data), its audit entries.
_Read = tuple[Any, list[Any], list[dict[str, JsonValue]], list[Any]]
_dumps = json.JSONEncoder().encode  # json.dumps with its defaults, minus a call
_new_row = tuple.__new__


class _Row(NamedTuple):
    """A save's new values for the session's row (``added``: how many messages it appends)."""

    format_version: int
    state: str | None
    pause: str
    claim: str | None
    tools: str
    added: int
    agent: str | None
    lease: float | None


class SQLiteStore(SQLiteAnswers, SQLiteOutbox):
    """Sessions in one SQLite database file (WAL mode), safe for several processes on a machine.

    Each save is one ``BEGIN IMMEDIATE`` transaction: a compare-and-swap on the session's
    version, the new messages appended as rows, the pending-interrupt index rows replaced. The
    pending index is a table with indexes on name, tool name and time, so
    :meth:`pending_interrupts` is a query, not a scan of sessions.

    The async methods run their SQLite calls inline, on the event loop's thread, under a lock
    around this store's single connection: each call is a few indexed statements on a local file
    (tens of microseconds to a millisecond), cheaper than a hop to a worker thread. The price is
    that a save waiting for another process's write lock blocks the loop for up to ``timeout``
    seconds; use PostgresStore when many workers write at once.

    Durability: a committed save survives the process being killed at any moment. With
    ``synchronous="normal"`` (the default, SQLite's usual setting for WAL) the last commits
    before a power loss or an OS crash may be lost, never half-written; ``"full"`` syncs every
    commit to the disk, so they survive that too, at the cost of an fsync per save.

    ``bytes_written`` counts the JSON bytes saved (messages, pause, claim, pending, state when
    given). Close the store with :meth:`close`, or use it as a context manager.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        timeout: float = 5.0,
        synchronous: Literal["normal", "full"] = "normal",
    ) -> None:
        if synchronous not in ("normal", "full"):
            raise ConfigurationError(f"synchronous must be 'normal' or 'full', got {synchronous!r}")
        self.synchronous = synchronous
        self.path = os.fspath(path)
        if self.path != ":memory:":
            parent = os.path.dirname(os.path.abspath(self.path))
            os.makedirs(parent, exist_ok=True)
        self._lock = threading.Lock()
        self.bytes_written = 0
        self._tools_cache: tuple[tuple[str, ...] | None, str] = (None, "[]")
        self._checked_id: str | None = None  # the session id the last save checked
        conn = sqlite3.connect(
            self.path, timeout=timeout, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            use_wal(conn, timeout)
            conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            migrate(conn)
        except BaseException:
            conn.close()
            raise
        self._conn: sqlite3.Connection | None = conn

    def close(self) -> None:
        """Close the database connection (idempotent)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
        """The connection inside ``begin`` ... COMMIT, rolled back if anything fails."""
        with self._lock:
            conn = self._conn
            if conn is None:
                raise SessionError(f"the SQLiteStore of {self.path!r} is closed")
            try:
                conn.execute(begin)
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.IntegrityError:
                raise  # callers turn these into conflicts
            except sqlite3.Error as exc:  # locked past the timeout, disk full, I/O errors
                raise SessionError(f"SQLiteStore {str(self.path)!r}: {exc}") from exc

    async def load(self, session_id: str) -> StoredSession | None:
        check_session_id(session_id)
        # One read transaction, so the session row and its messages come from one snapshot.
        with self._transaction("BEGIN") as conn:
            read = self._read(conn, session_id)
        return None if read is None else self._stored(session_id, *read)

    def _read(self, conn: sqlite3.Connection, session_id: str) -> _Read | None:
        """The session's row, message rows, audit entries and recorded answers' rows, read in
        the caller's transaction (:meth:`load`'s, or :meth:`claim_call`'s); None: no session."""
        row = conn.execute(
            "SELECT version, format_version, message_count, CAST(state AS BLOB), "
            "CAST(pause AS BLOB), CAST(tools AS BLOB), CAST(claim AS BLOB), agent "
            "FROM sessions WHERE id = ?",
            (session_id,),
        ).fetchone()
        if row is None:
            return None
        for what, value in (
            ("version", row[0]),
            ("format_version", row[1]),
            ("message_count", row[2]),
        ):
            if not _is_int(value) or value < 0:
                raise _corrupt(session_id, f"{what} is {value!r}, not a count")
        rows = conn.execute(
            "SELECT idx, CAST(data AS BLOB) FROM messages "
            "WHERE session_id = ? AND idx < ? ORDER BY idx",
            (session_id, row[2]),
        ).fetchall()
        answers = conn.execute(ANSWERS, (session_id,)).fetchall()
        return row, rows, self._audit(conn, session_id), answers

    @staticmethod
    def _stored(
        session_id: str, row: Any, rows: list[Any], audit: list[Any], answers: list[Any]
    ) -> StoredSession:
        """The session :meth:`_read` read (outside its transaction); SessionCorruptError if it
        is unreadable."""
        version, format_version, count, state_raw, pause_raw, tools_raw, claim_raw = row[:7]
        agent = row[7]
        if not (agent is None or isinstance(agent, str)):
            raise _corrupt(session_id, f"agent is {agent!r}, not a name")
        if len(rows) != count or any(idx != i for i, (idx, _) in enumerate(rows)):
            raise _corrupt(session_id, f"{count} messages expected, {len(rows)} stored")
        messages: list[Any] | None = loads_all([raw for _, raw in rows])
        if messages is None:  # one of them is not JSON (or not plain JSON): which one
            messages = [_json(session_id, f"message {i}", raw) for i, (_, raw) in enumerate(rows)]
        state = _json(session_id, "state", state_raw)
        if not isinstance(state, dict):
            raise _corrupt(session_id, f"state is a {type(state).__name__}, not an object")
        pause = None if pause_raw is None else _json(session_id, "pause", pause_raw)
        if pause is not None and not isinstance(pause, dict):
            raise _corrupt(session_id, f"pause is a {type(pause).__name__}, not an object")
        claim = None if claim_raw is None else _json(session_id, "claim", claim_raw)
        if claim is not None and not isinstance(claim, dict):
            raise _corrupt(session_id, f"claim is a {type(claim).__name__}, not an object")
        tools = _json(session_id, "tools", tools_raw)
        if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
            raise _corrupt(session_id, f"tools is {tools!r}, not a list of names")
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
            answers=read_answer_rows(session_id, answers),
        )

    @staticmethod
    def _audit(conn: sqlite3.Connection, session_id: str) -> list[dict[str, JsonValue]]:
        """The session's audit entries, oldest first; SessionCorruptError if one is unreadable
        or one is missing."""
        rows = conn.execute(
            "SELECT seq, CAST(entry AS BLOB) FROM audit WHERE session_id = ? ORDER BY seq",
            (session_id,),
        ).fetchall()
        entries = []
        for i, (seq, raw) in enumerate(rows):
            if seq != i:
                raise _corrupt(session_id, f"audit entry {i} is missing (found {seq!r})")
            entry = _json(session_id, f"audit entry {i}", raw)
            if not isinstance(entry, dict):
                raise _corrupt(session_id, f"audit entry {i} is a {type(entry).__name__}")
            entries.append(entry)
        return entries

    async def audit_trail(self, session_id: str) -> list[dict[str, JsonValue]]:
        check_session_id(session_id)
        with self._transaction("BEGIN") as conn:
            return self._audit(conn, session_id)

    _saves_inline = True
    """Saves run to the end without suspending (no await inside): a cancel cannot cut one."""

    async def save(self, session_id: str, update: SessionUpdate) -> int:
        return self._save(session_id, update)

    async def rewind(self, session_id: str, update: SessionUpdate) -> int:
        """:meth:`save`, except that ``update.first_index`` may be below the number of messages
        stored (the optional ``rewind`` of ``interlude.sessions._protocol``): in the save's
        ``BEGIN IMMEDIATE`` transaction, the message rows from ``first_index`` on are deleted
        and the message count set there, then the save's own steps run."""
        if update.expected_version < 1:
            raise no_rewind(check_session_id(session_id))
        return self._save(session_id, update, rewind=True)

    def _save(self, session_id: str, update: SessionUpdate, *, rewind: bool = False) -> int:
        """A save (a rewind, with ``rewind``): one transaction, run without suspending."""
        if session_id is not self._checked_id:  # a run saves one session again and again
            self._checked_id = check_session_id(session_id)
        messages = [_dumps(m) for m in update.new_messages]
        pause = _dumps(update.pause)
        claim = None if update.claim is None else _dumps(update.claim)
        state = None if update.state is None else _dumps(update.state)
        row = _new_row(  # _Row(format_version, state, pause, claim, tools, added, agent, lease)
            _Row,
            (
                update.format_version,
                state,
                pause,
                claim,
                self._tools_json(update.tools),
                len(messages),
                update.agent,
                claim_deadline(update.claim),  # indexed, for sessions_to_resume
            ),
        )
        pending = None if update.pending is None else pending_rows(session_id, update.pending)
        audit = audit_json(session_id, update.audit) if update.audit else []
        # ``with self._transaction("BEGIN IMMEDIATE") as conn:``, written out (no generator
        # and its context manager on every save); the same steps and errors.
        with self._lock:
            conn = self._conn
            if conn is None:
                raise SessionError(f"the SQLiteStore of {self.path!r} is closed")
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    if rewind:  # the messages from first_index on go first
                        cut_messages(conn, session_id, update)
                    if not self._swap(conn, session_id, update, row):
                        raise save_conflict(conn, session_id, update)
                    if audit:  # may not answer what a recorded answer waits for
                        check_queue(conn, session_id, update)
                    if update.starts:  # may not start a call another session claimed
                        check_starts(conn, session_id, update.starts)
                    self._append(conn, session_id, update.first_index, messages, pending, audit)
                    if update.applied_answers:  # applied by this save: gone with it
                        conn.executemany(
                            "DELETE FROM answers WHERE session_id = ? AND seq = ?",
                            [(session_id, int(seq)) for seq in update.applied_answers],
                        )
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.IntegrityError:
                raise  # callers turn these into conflicts
            except sqlite3.Error as exc:  # locked past the timeout, disk full, I/O errors
                raise SessionError(f"SQLiteStore {str(self.path)!r}: {exc}") from exc
        written = len(pause) + (len(claim) if claim else 4)
        if messages:
            written += sum(map(len, messages))
        if pending:
            written += sum(len(p[-1]) for p in pending)
        if state is not None:
            written += len(state)
        if audit:
            written += sum(map(len, audit))
        self.bytes_written += written
        return update.expected_version + 1

    @staticmethod
    def _swap(conn: sqlite3.Connection, session_id: str, update: SessionUpdate, row: _Row) -> bool:
        """The compare-and-swap on the session's row: a new session's row inserted (it must
        start at message 0), or the stored one updated if it is at the expected version and
        message count. False when it is not."""
        expected, first = update.expected_version, update.first_index
        if expected == 0 and first == 0:
            state = "{}" if row.state is None else row.state
            inserted = conn.execute(
                "INSERT INTO sessions (id, version, format_version, state, pause, claim, "
                "tools, message_count, updated_at, agent, claim_expires_at) "
                "VALUES (?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (
                    session_id,
                    row.format_version,
                    state,
                    row.pause,
                    row.claim,
                    row.tools,
                    row.added,
                    time.time(),
                    row.agent,
                    row.lease,
                ),
            ).rowcount
            return bool(inserted == 1)
        if expected == 0:
            return False  # a new session starts with no messages
        updated = conn.execute(
            "UPDATE sessions SET version = version + 1, format_version = ?, "
            "state = coalesce(?, state), pause = ?, claim = ?, tools = ?, "
            "message_count = message_count + ?, updated_at = ?, "
            "agent = coalesce(?, agent), claim_expires_at = ?, "
            # a run's claim takes over from a worker's reservation
            "reserved_until = CASE WHEN ? THEN NULL ELSE reserved_until END "
            "WHERE id = ? AND version = ? AND message_count = ?",
            (
                row.format_version,
                row.state,
                row.pause,
                row.claim,
                row.tools,
                row.added,
                time.time(),
                row.agent,
                row.lease,
                row.claim is not None,
                session_id,
                expected,
                first,
            ),
        ).rowcount
        return bool(updated == 1)

    @staticmethod
    def _append(
        conn: sqlite3.Connection,
        session_id: str,
        first: int,
        messages: list[str],
        pending: list[tuple[str, str, str, str | None, float, float | None, str]] | None,
        audit: list[str],
    ) -> None:
        """A save's rows beside the session's: its new messages (from index ``first``), the
        pending index (replaced, unless ``pending`` is None) and its audit entries."""
        if messages:
            try:
                conn.executemany(
                    "INSERT INTO messages (session_id, idx, data) VALUES (?, ?, ?)",
                    [(session_id, first + i, m) for i, m in enumerate(messages)],
                )
            except sqlite3.IntegrityError:
                raise _corrupt(session_id, f"message rows beyond index {first} exist") from None
        if pending is not None:
            conn.execute("DELETE FROM pending WHERE session_id = ?", (session_id,))
        if pending:
            conn.executemany(
                "INSERT INTO pending (session_id, interrupt_id, name, tool_name, "
                "raised_at, expires_at, data) VALUES (?, ?, ?, ?, ?, ?, ?)",
                pending,
            )
        if audit:
            (start,) = conn.execute(
                "SELECT coalesce(max(seq) + 1, 0) FROM audit WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            conn.executemany(
                "INSERT INTO audit (session_id, seq, entry) VALUES (?, ?, ?)",
                [(session_id, start + i, entry) for i, entry in enumerate(audit)],
            )

    def _tools_json(self, tools: list[str]) -> str:
        """The tools' JSON (the same list at almost every save: encoded once)."""
        key = tuple(tools)
        if self._tools_cache[0] != key:
            self._tools_cache = (key, json.dumps(list(tools)))
        return self._tools_cache[1]

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
        where: list[str] = []
        params: list[str | float] = []
        for key, value in (
            ("name", q.name),
            ("tool_name", q.tool_name),
            ("older", epoch(q.older_than)),
            ("newer", epoch(q.newer_than)),
            ("agent", q.agent),
            ("expiring", epoch(q.expiring_before)),
        ):
            if value is not None:
                where.append(FILTERS[key])
                params.append(value)
        sql = PENDING_HEAD
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY p.raised_at, p.session_id, p.interrupt_id"
        return self._read_pending(sql, params, q.limit)

    async def expired_interrupts(
        self, now: datetime | float, *, limit: int | None = None
    ) -> list[PendingInterrupt]:
        """Pending interrupts whose deadline is at or before ``now``, earliest first (an indexed
        query on the ``expires_at`` column); unreadable rows are left out and named in
        ``self.skipped``, as above."""
        sql = (
            PENDING_HEAD + " WHERE p.expires_at IS NOT NULL AND p.expires_at <= ? "
            "ORDER BY p.expires_at, p.session_id, p.interrupt_id"
        )
        return self._read_pending(sql, [float(epoch(now) or 0.0)], limit)

    def _read_pending(
        self, sql: str, params: list[str | float], limit: int | None
    ) -> list[PendingInterrupt]:
        """The readable interrupts of a pending-index query, up to ``limit``; sets
        ``self.skipped``."""

        def read(query: str) -> tuple[list[PendingInterrupt], dict[str, str], int]:
            with self._transaction("BEGIN") as conn:
                rows = conn.execute(query, params).fetchall()
            found: list[PendingInterrupt] = []
            skipped: dict[str, str] = {}
            for sid, raw, agent in rows:
                try:
                    data = _json(sid, "a pending interrupt", raw)
                    interrupt = Interrupt.from_dict(data, "pending interrupt")
                    if not (agent is None or isinstance(agent, str)):
                        raise _corrupt(sid, f"agent is {agent!r}, not a name")
                except SessionCorruptError as exc:
                    skipped.setdefault(sid, str(exc))
                    continue
                except (StateFormatError, TypeError, ValueError) as exc:
                    skipped.setdefault(sid, str(_corrupt(sid, str(exc))))
                    continue
                found.append(PendingInterrupt(sid, interrupt, interrupt.raised_at, agent))
            return found, skipped, len(rows)

        if limit is not None and limit >= 0:  # a negative limit slices, as in MemoryStore
            found, skipped, count = read(sql + f" LIMIT {int(limit)}")
            if skipped and count >= limit:  # skipped rows took places: read past them
                found, skipped, _ = read(sql)
        else:
            found, skipped, _ = read(sql)
        self.skipped = tuple(sorted(skipped.items()))
        return found if limit is None else found[:limit]

    async def list_sessions(self) -> list[str]:
        with self._transaction("BEGIN") as conn:
            return [r[0] for r in conn.execute("SELECT id FROM sessions ORDER BY id")]

    async def fork(self, session_id: str, new_session_id: str, update: SessionUpdate) -> int:
        """Make session ``new_session_id`` from the start of ``session_id`` and ``update``
        (see ``interlude.sessions._forking``); the source is not changed."""
        from ._forking import fork_by_copy

        return await fork_by_copy(self, session_id, new_session_id, update)

    async def delete(self, session_id: str) -> None:
        check_session_id(session_id)
        with self._transaction("BEGIN IMMEDIATE") as conn:
            conn.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM pending WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM audit WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM answers WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM notifications WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM call_claims WHERE origin = ?", (session_id,))
            conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))

    async def claim_call(
        self, key: str, session_id: str, *, origin: str
    ) -> tuple[str, StoredSession | None]:
        """Claim tool call ``key`` for ``session_id`` (see :class:`CallClaims`), in one
        ``BEGIN IMMEDIATE`` transaction: the claim added unless the call has a holder, the
        holder read, and session ``origin`` read as :meth:`load` reads it. Writers take turns,
        so a save of ``origin`` lands wholly before it (and is read) or after (and sees it)."""
        check_session_id(session_id)
        check_session_id(origin)
        with self._transaction("BEGIN IMMEDIATE") as conn:
            conn.execute(
                "INSERT INTO call_claims (key, origin, holder) VALUES (?, ?, ?) "
                "ON CONFLICT (key) DO NOTHING",
                (key, origin, session_id),
            )
            (holder,) = conn.execute(
                "SELECT holder FROM call_claims WHERE key = ?", (key,)
            ).fetchone()
            read = self._read(conn, origin)
        return holder, None if read is None else self._stored(origin, *read)
