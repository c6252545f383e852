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
from typing import Any, Literal

from .._interrupt import Interrupt
from .._messages import JsonValue
from ..errors import (
    ConfigurationError,
    SessionConflictError,
    SessionCorruptError,
    SessionError,
    StateFormatError,
)
from ._protocol import (
    PendingInterrupt,
    SessionUpdate,
    StoredSession,
    audit_json,
    check_session_id,
    epoch,
)

__all__ = ["SQLiteStore"]

# Forward-only: never edit an applied entry, append a new one. ``PRAGMA user_version`` holds how
# many are applied. Each entry is a list of statements (executescript would commit on its own).
_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            version INTEGER NOT NULL,
            format_version INTEGER NOT NULL,
            state TEXT NOT NULL,
            pause TEXT,
            tools TEXT NOT NULL,
            message_count INTEGER NOT NULL,
            updated_at REAL NOT NULL
        )""",
        """CREATE TABLE messages (
            session_id TEXT NOT NULL,
            idx INTEGER NOT NULL,
            data TEXT NOT NULL,
            PRIMARY KEY (session_id, idx)
        ) WITHOUT ROWID""",
        """CREATE TABLE pending (
            session_id TEXT NOT NULL,
            interrupt_id TEXT NOT NULL,
            name TEXT NOT NULL,
            tool_name TEXT,
            raised_at REAL NOT NULL,
            data TEXT NOT NULL,
            PRIMARY KEY (session_id, interrupt_id)
        )""",
        "CREATE INDEX pending_by_name ON pending (name, raised_at)",
        "CREATE INDEX pending_by_tool ON pending (tool_name, raised_at)",
        "CREATE INDEX pending_by_time ON pending (raised_at)",
    ),
    ("ALTER TABLE sessions ADD COLUMN claim TEXT",),  # the run claim, beside the pause
    (  # the agent's name, the audit trail, question deadlines (no stored row has one yet)
        "ALTER TABLE sessions ADD COLUMN agent TEXT",
        """CREATE TABLE audit (
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            entry TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        ) WITHOUT ROWID""",
        "ALTER TABLE pending ADD COLUMN expires_at REAL",
        "CREATE INDEX pending_by_deadline ON pending (expires_at, session_id, interrupt_id) "
        "WHERE expires_at IS NOT NULL",
    ),
)


def _corrupt(session_id: str, detail: str) -> SessionCorruptError:
    return SessionCorruptError(f"session {session_id!r} is corrupt in the database: {detail}")


def _json(session_id: str, what: str, raw: object) -> Any:
    """Parse one stored JSON column (selected as a BLOB, so bad UTF-8 is caught here too)."""
    if not isinstance(raw, bytes | str):
        raise _corrupt(session_id, f"{what} is not JSON text ({type(raw).__name__})")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # bad JSON, bad UTF-8, nested too deeply
        raise _corrupt(session_id, f"{what} is not valid JSON ({exc})") from None


def _use_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Put the database in WAL mode. Switching needs a moment alone with the file and SQLite
    does not wait for that (no busy handler): when two processes open a new database at once,
    one is told "database is locked" at once. Retry until ``timeout``, or until the other
    process has switched it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
                return
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() >= deadline:
                raise SessionError(f"the session database stays locked: {exc}") from exc
            time.sleep(0.005)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def pending_rows(
    session_id: str, pending: list[dict[str, JsonValue]]
) -> list[tuple[str, str, str, str | None, float, float | None, str]]:
    """The pending-index rows of a save: checked, keyed columns plus the interrupt's JSON."""
    rows = []
    seen: set[str] = set()
    for i, data in enumerate(pending):
        interrupt = Interrupt.from_dict(data, f"pending[{i}]")
        if interrupt.id in seen:
            raise SessionError(
                f"session {session_id!r}: pending interrupt id {interrupt.id!r} appears twice"
            )
        seen.add(interrupt.id)
        tool = None if interrupt.tool_use is None else interrupt.tool_use.name
        rows.append(
            (
                session_id,
                interrupt.id,
                interrupt.name,
                tool,
                interrupt.raised_at,
                interrupt.expires_at,
                json.dumps(data),
            )
        )
    return rows


class SQLiteStore:
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
        conn = sqlite3.connect(
            self.path, timeout=timeout, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            _use_wal(conn, timeout)
            conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            self._migrate(conn)
        except BaseException:
            conn.close()
            raise
        self._conn: sqlite3.Connection | None = conn

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> None:
        """Apply the migrations this database lacks, in one transaction (one process does it)."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            applied = conn.execute("PRAGMA user_version").fetchone()[0]
            if applied > len(_MIGRATIONS):
                raise SessionError(
                    f"the session database has schema version {applied}; this Interlude knows "
                    f"only up to {len(_MIGRATIONS)}: upgrade Interlude to use it"
                )
            for statements in _MIGRATIONS[applied:]:
                for statement in statements:
                    conn.execute(statement)
            if applied < len(_MIGRATIONS):
                conn.execute(f"PRAGMA user_version = {len(_MIGRATIONS)}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

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
            row = conn.execute(
                "SELECT version, format_version, message_count, CAST(state AS BLOB), "
                "CAST(pause AS BLOB), CAST(tools AS BLOB), CAST(claim AS BLOB), agent "
                "FROM sessions WHERE id = ?",
                (session_id,),
            ).fetchone()
            if row is None:
                return None
            version, format_version, count, state_raw, pause_raw, tools_raw, claim_raw = row[:7]
            agent = row[7]
            for what, value in (
                ("version", version),
                ("format_version", format_version),
                ("message_count", count),
            ):
                if not _is_int(value) or value < 0:
                    raise _corrupt(session_id, f"{what} is {value!r}, not a count")
            rows = conn.execute(
                "SELECT idx, CAST(data AS BLOB) FROM messages "
                "WHERE session_id = ? AND idx < ? ORDER BY idx",
                (session_id, count),
            ).fetchall()
            audit = self._audit(conn, session_id)
        if not (agent is None or isinstance(agent, str)):
            raise _corrupt(session_id, f"agent is {agent!r}, not a name")
        if len(rows) != count or any(idx != i for i, (idx, _) in enumerate(rows)):
            raise _corrupt(session_id, f"{count} messages expected, {len(rows)} stored")
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
            session_id, version, format_version, messages, state, pause, tools, claim, agent, audit
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
        check_session_id(session_id)
        messages = [json.dumps(m) for m in update.new_messages]
        pause = json.dumps(update.pause)
        claim = None if update.claim is None else json.dumps(update.claim)
        state = None if update.state is None else json.dumps(update.state)
        tools = self._tools_json(update.tools)
        pending = None if update.pending is None else pending_rows(session_id, update.pending)
        audit = audit_json(session_id, update.audit)
        first, expected = update.first_index, update.expected_version
        with self._transaction("BEGIN IMMEDIATE") as conn:
            if expected == 0 and first == 0:
                inserted = conn.execute(
                    "INSERT INTO sessions (id, version, format_version, state, pause, claim, "
                    "tools, message_count, updated_at, agent) "
                    "VALUES (?, 1, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                    (
                        session_id,
                        update.format_version,
                        "{}" if state is None else state,
                        pause,
                        claim,
                        tools,
                        len(messages),
                        time.time(),
                        update.agent,
                    ),
                ).rowcount
                ok = inserted == 1
            elif expected == 0:
                ok = False  # a new session starts with no messages
            else:
                ok = (
                    conn.execute(
                        "UPDATE sessions SET version = version + 1, format_version = ?, "
                        "state = coalesce(?, state), pause = ?, claim = ?, tools = ?, "
                        "message_count = message_count + ?, updated_at = ?, "
                        "agent = coalesce(?, agent) "
                        "WHERE id = ? AND version = ? AND message_count = ?",
                        (
                            update.format_version,
                            state,
                            pause,
                            claim,
                            tools,
                            len(messages),
                            time.time(),
                            update.agent,
                            session_id,
                            expected,
                            first,
                        ),
                    ).rowcount
                    == 1
                )
            if not ok:
                raise self._conflict(conn, session_id, update)
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
        self.bytes_written += sum(map(len, messages)) + len(pause) + (len(claim) if claim else 4)
        self.bytes_written += sum(len(p[-1]) for p in pending or ())
        self.bytes_written += (0 if state is None else len(state)) + sum(map(len, audit))
        return expected + 1

    def _tools_json(self, tools: list[str]) -> str:
        """The tools' JSON (the same list at almost every save: encoded once)."""
        key = tuple(tools)
        if self._tools_cache[0] != key:
            self._tools_cache = (key, json.dumps(list(tools)))
        return self._tools_cache[1]

    @staticmethod
    def _conflict(
        conn: sqlite3.Connection, session_id: str, update: SessionUpdate
    ) -> SessionConflictError:
        """Why the compare-and-swap failed, worded as MemoryStore words it."""
        row = conn.execute(
            "SELECT version, message_count FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        current, count = (0, 0) if row is None else row
        if current != update.expected_version:
            return SessionConflictError(
                f"session {session_id!r} is at version {current}, not "
                f"{update.expected_version}: another agent saved it first"
            )
        return SessionConflictError(
            f"session {session_id!r} holds {count} messages, but the save appends at "
            f"{update.first_index}"
        )

    skipped: tuple[tuple[str, str], ...] = ()
    """``(session_id, why)`` of the sessions the last :meth:`pending_interrupts` (or
    :meth:`expired_interrupts`) call left out entries of, because they could not be read (empty
    when everything was read)."""

    async def pending_interrupts(
        self,
        *,
        name: str | None = None,
        tool_name: str | None = None,
        older_than: datetime | float | None = None,
        newer_than: datetime | float | None = None,
        limit: int | None = None,
    ) -> list[PendingInterrupt]:
        """Pending interrupts across sessions, oldest first, filtered as the protocol says.

        A corrupt row of the pending index does not hide the others: it is left out, and
        ``self.skipped`` is set to the ``(session_id, why)`` of each session with rows left
        out by this call, in session id order (empty when every row was read).
        """
        where: list[str] = []
        params: list[str | float] = []
        for clause, value in (
            ("name = ?", name),
            ("tool_name = ?", tool_name),
            ("raised_at < ?", epoch(older_than)),
            ("raised_at > ?", epoch(newer_than)),
        ):
            if value is not None:
                where.append(clause)
                params.append(value)
        sql = "SELECT session_id, CAST(data AS BLOB) FROM pending"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY raised_at, session_id, interrupt_id"
        return self._read_pending(sql, params, limit)

    async def expired_interrupts(
        self, now: datetime | float, *, limit: int | None = None
    ) -> list[PendingInterrupt]:
        """Pending interrupts whose deadline is at or before ``now``, earliest first (an indexed
        query on the ``expires_at`` column); unreadable rows are left out and named in
        ``self.skipped``, as above."""
        sql = (
            "SELECT session_id, CAST(data AS BLOB) FROM pending "
            "WHERE expires_at IS NOT NULL AND expires_at <= ? "
            "ORDER BY expires_at, session_id, interrupt_id"
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
            for sid, raw in rows:
                try:
                    data = _json(sid, "a pending interrupt", raw)
                    interrupt = Interrupt.from_dict(data, "pending interrupt")
                except SessionCorruptError as exc:
                    skipped.setdefault(sid, str(exc))
                    continue
                except (StateFormatError, TypeError, ValueError) as exc:
                    skipped.setdefault(sid, str(_corrupt(sid, str(exc))))
                    continue
                found.append(PendingInterrupt(sid, interrupt, interrupt.raised_at))
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

    async def delete(self, session_id: str) -> None:
        check_session_id(session_id)
        with self._transaction("BEGIN IMMEDIATE") as conn:
            conn.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM pending WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM audit WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
