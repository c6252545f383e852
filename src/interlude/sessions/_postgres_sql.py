"""PostgresStore's schema (its forward-only migrations) and its statements, with ``{s}`` for
the schema name (filled in once, when the store opens)."""

from __future__ import annotations

from typing import LiteralString

__all__ = ["FILTERS", "MIGRATIONS", "PENDING_TAIL", "STATEMENTS"]

# Forward-only: append a new tuple of statements to change the schema; never edit a shipped one.
MIGRATIONS: tuple[tuple[LiteralString, ...], ...] = (
    (
        """CREATE TABLE {s}.sessions (
            id text COLLATE "C" PRIMARY KEY,
            version bigint NOT NULL,
            format_version int NOT NULL,
            state text NOT NULL,
            pause text,
            tools text NOT NULL,
            message_count int NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT now())""",
        """CREATE TABLE {s}.messages (
            session_id text COLLATE "C" REFERENCES {s}.sessions (id) ON DELETE CASCADE,
            idx int,
            data text NOT NULL,
            PRIMARY KEY (session_id, idx))""",
        """CREATE TABLE {s}.pending (
            session_id text COLLATE "C" REFERENCES {s}.sessions (id) ON DELETE CASCADE,
            interrupt_id text COLLATE "C",
            name text NOT NULL,
            tool_name text,
            raised_at double precision NOT NULL,
            data text NOT NULL,
            PRIMARY KEY (session_id, interrupt_id))""",
        # Trailing columns match the ORDER BY, so a LIMIT stops early without a sort.
        "CREATE INDEX pending_name ON {s}.pending (name, raised_at, session_id, interrupt_id)",
        "CREATE INDEX pending_tool ON {s}.pending (tool_name, raised_at, session_id, interrupt_id)",
        "CREATE INDEX pending_raised ON {s}.pending (raised_at, session_id, interrupt_id)",
    ),
    ("ALTER TABLE {s}.sessions ADD COLUMN claim text",),  # the run claim, beside the pause
    (  # the agent's name, the audit trail, question deadlines (no stored row has one yet)
        "ALTER TABLE {s}.sessions ADD COLUMN agent text",
        """CREATE TABLE {s}.audit (
            session_id text COLLATE "C" REFERENCES {s}.sessions (id) ON DELETE CASCADE,
            seq int,
            entry text NOT NULL,
            PRIMARY KEY (session_id, seq))""",
        "ALTER TABLE {s}.pending ADD COLUMN expires_at double precision",
        # Only questions with a deadline, in the order expired_interrupts reads them.
        "CREATE INDEX pending_deadline ON {s}.pending (expires_at, session_id, interrupt_id) "
        "WHERE expires_at IS NOT NULL",
    ),
)

LOAD = """SELECT s.version, s.format_version, s.state, s.pause, s.tools, s.message_count,
    s.claim, s.agent, m.data, m.n, m.lo, m.hi, a.entries, a.seqs
FROM {s}.sessions s LEFT JOIN LATERAL (
    SELECT array_agg(data ORDER BY idx) AS data, count(*) AS n, min(idx) AS lo, max(idx) AS hi
    FROM {s}.messages WHERE session_id = s.id) m ON true
LEFT JOIN LATERAL (
    SELECT array_agg(entry ORDER BY seq) AS entries, array_agg(seq ORDER BY seq) AS seqs
    FROM {s}.audit WHERE session_id = s.id) a ON true
WHERE s.id = %(id)s"""
CREATE = """INSERT INTO {s}.sessions (id, version, format_version, state, pause, claim, tools,
    message_count, agent)
VALUES (%(id)s, 1, %(fv)s, %(state)s, %(pause)s, %(claim)s, %(tools)s, %(added)s, %(agent)s)
ON CONFLICT (id) DO NOTHING RETURNING version"""
UPDATE = """UPDATE {s}.sessions SET version = version + 1, format_version = %(fv)s,
    state = coalesce(%(state)s, state), pause = %(pause)s, claim = %(claim)s, tools = %(tools)s,
    message_count = message_count + %(added)s, updated_at = now(),
    agent = coalesce(%(agent)s, agent)
WHERE id = %(id)s AND version = %(expected)s AND message_count = %(first)s
RETURNING version"""
CURRENT = "SELECT version, message_count FROM {s}.sessions WHERE id = %(id)s"
APPEND = """INSERT INTO {s}.messages (session_id, idx, data)
SELECT %(id)s, %(first)s + t.n - 1, t.data
FROM unnest(%(messages)s::text[]) WITH ORDINALITY AS t(data, n)"""
CLEAR_PENDING = "DELETE FROM {s}.pending WHERE session_id = %(id)s"
ADD_PENDING = """INSERT INTO {s}.pending (session_id, interrupt_id, name, tool_name, raised_at,
    expires_at, data)
SELECT %(id)s, * FROM unnest(%(ids)s::text[], %(names)s::text[], %(tool_names)s::text[],
    %(raised)s::float8[], %(expires)s::float8[], %(data)s::text[])"""
# The session row is locked by the save's UPDATE (or INSERT), so seq cannot race.
ADD_AUDIT = """INSERT INTO {s}.audit (session_id, seq, entry)
SELECT %(id)s, base.next + t.n - 1, t.entry
FROM (SELECT coalesce(max(seq) + 1, 0) AS next FROM {s}.audit WHERE session_id = %(id)s) base,
    unnest(%(audit)s::text[]) WITH ORDINALITY AS t(entry, n)"""
AUDIT = "SELECT seq, entry FROM {s}.audit WHERE session_id = %(id)s ORDER BY seq"
EXPIRED = """SELECT session_id, data FROM {s}.pending WHERE expires_at <= %(now)s
ORDER BY expires_at, session_id, interrupt_id LIMIT %(limit)s"""
LIST = "SELECT id FROM {s}.sessions ORDER BY id"
DELETE = "DELETE FROM {s}.sessions WHERE id = %(id)s"
PENDING_HEAD = "SELECT session_id, data FROM {s}.pending WHERE "
PENDING_TAIL = " ORDER BY raised_at, session_id, interrupt_id LIMIT %(limit)s"
FILTERS = {
    "name": "name = %(name)s",
    "tool_name": "tool_name = %(tool_name)s",
    "older": "raised_at < %(older)s",
    "newer": "raised_at > %(newer)s",
}

STATEMENTS: dict[str, LiteralString] = {
    "load": LOAD,
    "create": CREATE,
    "update": UPDATE,
    "current": CURRENT,
    "append": APPEND,
    "clear_pending": CLEAR_PENDING,
    "add_pending": ADD_PENDING,
    "list": LIST,
    "delete": DELETE,
    "pending_head": PENDING_HEAD,
    "add_audit": ADD_AUDIT,
    "audit": AUDIT,
    "expired": EXPIRED,
}
