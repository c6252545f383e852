"""SQLiteStore's schema (its forward-only migrations), its longer statements, the checked
rows of the pending-interrupt index, the steps of a save's (and a rewind's) transaction that
read before writing; opening a database (WAL mode, migrations)."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import TYPE_CHECKING

from .._interrupt import Interrupt
from .._messages import JsonValue
from ..errors import SessionConflictError, SessionError
from ._answers import answered_ids, call_taken, queued_first, read_answer_rows

if TYPE_CHECKING:
    from ._protocol import SessionUpdate

__all__ = [
    "ANSWERS",
    "FILTERS",
    "MIGRATIONS",
    "PENDING_HEAD",
    "RESERVE",
    "TO_RESERVE",
    "TO_RESUME",
    "check_queue",
    "check_starts",
    "cut_messages",
    "migrate",
    "pending_rows",
    "save_conflict",
    "use_wal",
]

ANSWERS = (
    "SELECT seq, interrupt_id, CAST(data AS BLOB) FROM answers WHERE session_id = ? ORDER BY seq"
)
"""A session's recorded answers, oldest first (read with the session by ``load``, too)."""

# Forward-only: never edit an applied entry, append a new one. ``PRAGMA user_version`` holds how
# many are applied. Each entry is a list of statements (executescript would commit on its own).
MIGRATIONS: tuple[tuple[str, ...], ...] = (
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
    (  # recorded answers; the run claim's lease and the agent, indexed for the worker queries
        """CREATE TABLE answers (
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            interrupt_id TEXT NOT NULL,
            at REAL NOT NULL,
            data TEXT NOT NULL,
            PRIMARY KEY (session_id, seq),
            UNIQUE (session_id, interrupt_id)
        ) WITHOUT ROWID""",
        # the highest answer seq ever given, so a cleared seq is never reused
        "ALTER TABLE sessions ADD COLUMN answer_seq INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE sessions ADD COLUMN claim_expires_at REAL",  # the claim's expires_at
        "UPDATE sessions SET claim_expires_at = CASE WHEN json_valid(claim) THEN "
        "CASE WHEN json_type(claim) = 'object' AND json_type(claim, '$.expires_at') "
        "IN ('integer', 'real') THEN json_extract(claim, '$.expires_at') END END "
        "WHERE claim IS NOT NULL",
        "CREATE INDEX sessions_by_claim_expiry ON sessions (claim_expires_at) "
        "WHERE claim_expires_at IS NOT NULL",
        "CREATE INDEX sessions_by_agent ON sessions (agent)",
    ),
    (  # the notification outbox: due ones by time, a session's by question, open questions
        """CREATE TABLE notifications (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            interrupt_id TEXT NOT NULL,
            event TEXT NOT NULL,
            status TEXT NOT NULL,
            attempts INTEGER NOT NULL,
            next_at REAL,
            created_at REAL NOT NULL,
            last_error TEXT,
            open INTEGER NOT NULL,
            payload TEXT NOT NULL
        ) WITHOUT ROWID""",
        "CREATE INDEX notifications_due ON notifications (next_at, id) WHERE status = 'pending'",
        "CREATE INDEX notifications_by_question ON notifications (session_id, interrupt_id)",
        "CREATE INDEX notifications_open ON notifications (created_at, id) WHERE open = 1",
    ),
    (  # a worker's reservation of a session it selected (sessions_to_resume(reserve_for=))
        "ALTER TABLE sessions ADD COLUMN reserved_by TEXT",
        "ALTER TABLE sessions ADD COLUMN reserved_until REAL",
    ),
    (  # claims on tool calls that forked sessions share (CallClaims), by the session they
        # were asked in (origin): they go with it
        """CREATE TABLE call_claims (
            key TEXT PRIMARY KEY,
            origin TEXT NOT NULL,
            holder TEXT NOT NULL
        ) WITHOUT ROWID""",
        "CREATE INDEX call_claims_by_origin ON call_claims (origin)",
    ),
)

# Sessions a worker has work for, each with when its oldest work became due: its first recorded
# answer (SQLite takes a bare column from the row min() picks), its earliest overdue question, a
# lapsed run claim.
_DUE = """SELECT id, min(due) AS due FROM (
    SELECT session_id AS id, at AS due, min(seq) FROM answers GROUP BY session_id
    UNION ALL
    SELECT session_id, min(expires_at), NULL FROM pending
    WHERE expires_at IS NOT NULL AND expires_at <= :now GROUP BY session_id
    UNION ALL
    SELECT id, claim_expires_at, NULL FROM sessions
    WHERE claim_expires_at IS NOT NULL AND claim_expires_at <= :now
) GROUP BY id"""
TO_RESUME = f"{_DUE} ORDER BY due, id LIMIT :limit"
# The same, less the sessions another owner holds a live reservation on (for :owner to reserve
# in the same transaction).
TO_RESERVE = f"""SELECT d.id FROM ({_DUE}) AS d JOIN sessions s ON s.id = d.id
WHERE s.reserved_by IS NULL OR s.reserved_by = :owner OR s.reserved_until IS NULL
    OR s.reserved_until <= :now
ORDER BY d.due, d.id LIMIT :limit"""
RESERVE = """UPDATE sessions SET reserved_by = ?, reserved_until = ?
WHERE id IN (SELECT value FROM json_each(?))"""
PENDING_HEAD = (
    "SELECT p.session_id, CAST(p.data AS BLOB), s.agent FROM pending p "
    "LEFT JOIN sessions s ON s.id = p.session_id"
)
FILTERS = {
    "name": "p.name = ?",
    "tool_name": "p.tool_name = ?",
    "older": "p.raised_at < ?",
    "newer": "p.raised_at > ?",
    "agent": "s.agent = ?",
    "expiring": "p.expires_at < ?",
}


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


def check_queue(conn: sqlite3.Connection, session_id: str, update: SessionUpdate) -> None:
    """AlreadyAnsweredError if ``update`` answers a question a recorded answer waits for
    (read in the save's transaction: no answer can be recorded in between)."""
    answered = answered_ids(update.audit)
    if not answered:
        return
    rows = conn.execute(
        "SELECT seq, interrupt_id, CAST(data AS BLOB) FROM answers WHERE session_id = ? "
        f"AND interrupt_id IN ({', '.join('?' * len(answered))}) ORDER BY seq",
        (session_id, *answered),
    ).fetchall()
    applied = set(update.applied_answers)
    for waiting in read_answer_rows(session_id, rows):
        if waiting.seq not in applied:
            raise queued_first(session_id, waiting)


def check_starts(conn: sqlite3.Connection, session_id: str, starts: list[str]) -> None:
    """CallTakenError if another session holds a call the save starts (read in the save's
    ``BEGIN IMMEDIATE`` transaction: no claim can land in between)."""
    held = dict(
        conn.execute(
            "SELECT key, holder FROM call_claims WHERE holder <> ? "
            f"AND key IN ({', '.join('?' * len(starts))})",
            (session_id, *starts),
        ).fetchall()
    )
    for key in starts:
        if key in held:
            raise call_taken(session_id, key, held[key])


def cut_messages(conn: sqlite3.Connection, session_id: str, update: SessionUpdate) -> None:
    """A rewind's first step, in the save's transaction: the session's message rows from
    ``update.first_index`` on deleted and its message count set there, so the save's steps
    then append there. SessionConflictError (the transaction rolled back) if the session is
    not stored at ``update.expected_version`` with at least that many messages."""
    row = conn.execute(
        "SELECT version, message_count FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()
    if row is None or row[0] != update.expected_version or row[1] < update.first_index:
        raise save_conflict(conn, session_id, update)
    first = update.first_index
    conn.execute("DELETE FROM messages WHERE session_id = ? AND idx >= ?", (session_id, first))
    conn.execute("UPDATE sessions SET message_count = ? WHERE id = ?", (first, session_id))


def save_conflict(
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


def use_wal(conn: sqlite3.Connection, timeout: float) -> None:
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


def migrate(conn: sqlite3.Connection) -> None:
    """Apply the migrations this database lacks, in one transaction (one process does it)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        applied = conn.execute("PRAGMA user_version").fetchone()[0]
        if applied > len(MIGRATIONS):
            raise SessionError(
                f"the session database has schema version {applied}; this Interlude knows "
                f"only up to {len(MIGRATIONS)}: upgrade Interlude to use it"
            )
        for statements in MIGRATIONS[applied:]:
            for statement in statements:
                conn.execute(statement)
        if applied < len(MIGRATIONS):
            conn.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # not after COMMIT (a Ctrl-C just after it lands here too)
            conn.execute("ROLLBACK")
        raise
