"""PostgresStore's schema (its forward-only migrations) and its statements, with ``{s}`` for
the schema name (filled in once, when the store opens)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, LiteralString

from ..errors import SessionError

if TYPE_CHECKING:
    import psycopg
    from psycopg import sql

__all__ = ["FILTERS", "MIGRATIONS", "PENDING_TAIL", "STATEMENTS", "migrate"]

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
    (  # recorded answers; the run claim's lease and the agent, indexed for the worker queries
        """CREATE TABLE {s}.answers (
            session_id text COLLATE "C" REFERENCES {s}.sessions (id) ON DELETE CASCADE,
            seq bigint,
            interrupt_id text COLLATE "C" NOT NULL,
            at double precision NOT NULL,
            data text NOT NULL,
            PRIMARY KEY (session_id, seq),
            UNIQUE (session_id, interrupt_id))""",
        # the highest answer seq ever given, so a cleared seq is never reused
        "ALTER TABLE {s}.sessions ADD COLUMN answer_seq bigint NOT NULL DEFAULT 0",
        "ALTER TABLE {s}.sessions ADD COLUMN claim_expires_at double precision",
        # Stored claims' leases; a claim jsonb cannot read (\u0000 in a string) is left out.
        """DO $$ DECLARE r record; BEGIN
            FOR r IN SELECT id, claim FROM {s}.sessions WHERE claim IS NOT NULL LOOP
                BEGIN
                    UPDATE {s}.sessions
                    SET claim_expires_at = (r.claim::jsonb ->> 'expires_at')::float8
                    WHERE id = r.id AND jsonb_typeof(r.claim::jsonb) = 'object'
                        AND jsonb_typeof(r.claim::jsonb -> 'expires_at') = 'number';
                EXCEPTION WHEN others THEN NULL;
                END;
            END LOOP;
        END $$""",
        "CREATE INDEX sessions_claim_expiry ON {s}.sessions (claim_expires_at) "
        "WHERE claim_expires_at IS NOT NULL",
        "CREATE INDEX sessions_agent ON {s}.sessions (agent)",
    ),
    (  # the notification outbox: due ones by time, a session's by question, open questions
        """CREATE TABLE {s}.notifications (
            id text COLLATE "C" PRIMARY KEY,
            session_id text COLLATE "C" NOT NULL
                REFERENCES {s}.sessions (id) ON DELETE CASCADE,
            interrupt_id text COLLATE "C" NOT NULL,
            event text NOT NULL,
            status text NOT NULL,
            attempts int NOT NULL,
            next_at double precision,
            created_at double precision NOT NULL,
            last_error text,
            open boolean NOT NULL,
            payload text NOT NULL)""",
        "CREATE INDEX notifications_due ON {s}.notifications (next_at, id) "
        "WHERE status = 'pending'",
        "CREATE INDEX notifications_question ON {s}.notifications (session_id, interrupt_id)",
        "CREATE INDEX notifications_open ON {s}.notifications (created_at, id) WHERE open",
    ),
    (  # work reserved for a worker by sessions_to_resume(reserve_for=...), until a deadline
        "ALTER TABLE {s}.sessions ADD COLUMN reserved_by text",
        "ALTER TABLE {s}.sessions ADD COLUMN reserved_until double precision",
    ),
    (  # a save in one round trip: the whole compare-and-swap in one function call
        """CREATE FUNCTION {s}.save_session(
            p_id text, p_expected bigint, p_first int, p_fv int, p_state text, p_pause text,
            p_claim text, p_lease double precision, p_tools text, p_agent text,
            p_keep_pending boolean, p_messages text[] DEFAULT '{{}}',
            p_ids text[] DEFAULT '{{}}', p_names text[] DEFAULT '{{}}',
            p_tool_names text[] DEFAULT '{{}}', p_raised double precision[] DEFAULT '{{}}',
            p_expires double precision[] DEFAULT '{{}}', p_data text[] DEFAULT '{{}}',
            p_audit text[] DEFAULT '{{}}', p_applied bigint[] DEFAULT '{{}}',
            OUT saved bigint, OUT at_version bigint, OUT at_count int)
        LANGUAGE plpgsql AS $$
        BEGIN
            -- saved: the new version; NULL on a conflict, with the session's version and
            -- message count (both NULL when there is no such session)
            IF p_expected = 0 THEN
                IF p_first = 0 THEN
                    INSERT INTO {s}.sessions AS s (id, version, format_version, state, pause,
                        claim, tools, message_count, agent, claim_expires_at)
                    VALUES (p_id, 1, p_fv, coalesce(p_state, '{{}}'), p_pause, p_claim,
                        p_tools, cardinality(p_messages), p_agent, p_lease)
                    ON CONFLICT (id) DO NOTHING RETURNING s.version INTO saved;
                END IF;
            ELSE
                UPDATE {s}.sessions AS s SET version = s.version + 1, format_version = p_fv,
                    state = coalesce(p_state, s.state), pause = p_pause, claim = p_claim,
                    tools = p_tools, message_count = s.message_count + cardinality(p_messages),
                    updated_at = now(), agent = coalesce(p_agent, s.agent),
                    claim_expires_at = p_lease,
                    -- a run claiming the session ends a worker's reservation of it
                    reserved_by = CASE WHEN p_claim IS NULL THEN s.reserved_by END,
                    reserved_until = CASE WHEN p_claim IS NULL THEN s.reserved_until END
                WHERE s.id = p_id AND s.version = p_expected AND s.message_count = p_first
                RETURNING s.version INTO saved;
                IF saved IS NOT NULL AND NOT p_keep_pending THEN
                    DELETE FROM {s}.pending WHERE session_id = p_id;
                END IF;
            END IF;
            IF saved IS NULL THEN
                SELECT s.version, s.message_count INTO at_version, at_count
                FROM {s}.sessions s WHERE s.id = p_id;
                RETURN;
            END IF;
            IF cardinality(p_messages) > 0 THEN
                INSERT INTO {s}.messages (session_id, idx, data)
                SELECT p_id, p_first + t.n - 1, t.data
                FROM unnest(p_messages) WITH ORDINALITY AS t(data, n);
            END IF;
            IF cardinality(p_ids) > 0 THEN
                INSERT INTO {s}.pending (session_id, interrupt_id, name, tool_name, raised_at,
                    expires_at, data)
                SELECT p_id, t.* FROM unnest(p_ids, p_names, p_tool_names, p_raised,
                    p_expires, p_data) AS t;
            END IF;
            IF cardinality(p_audit) > 0 THEN  -- the session row is locked: seq cannot race
                INSERT INTO {s}.audit (session_id, seq, entry)
                SELECT p_id, base.next + t.n - 1, t.entry
                FROM (SELECT coalesce(max(a.seq) + 1, 0) AS next FROM {s}.audit a
                        WHERE a.session_id = p_id) base,
                    unnest(p_audit) WITH ORDINALITY AS t(entry, n);
            END IF;
            IF cardinality(p_applied) > 0 THEN  -- recorded answers this save applies
                DELETE FROM {s}.answers WHERE session_id = p_id AND seq = ANY(p_applied);
            END IF;
        END $$""",
    ),
    (  # claims on tool calls that forked sessions share (CallClaims), by the session they were
        # asked in (origin; not a foreign key: a claim may name a session not stored)
        """CREATE TABLE IF NOT EXISTS {s}.call_claims (
            key text COLLATE "C" PRIMARY KEY,
            origin text COLLATE "C" NOT NULL,
            holder text COLLATE "C" NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS call_claims_origin ON {s}.call_claims (origin)",
    ),
    (  # a save that answers questions or starts calls in one round trip: the session row
        # locked, the waiting answers and the claims checked, then save_session, in one call
        """CREATE FUNCTION {s}.save_checked(
            p_id text, p_expected bigint, p_first int, p_fv int, p_state text, p_pause text,
            p_claim text, p_lease double precision, p_tools text, p_agent text,
            p_keep_pending boolean, p_messages text[] DEFAULT '{{}}',
            p_ids text[] DEFAULT '{{}}', p_names text[] DEFAULT '{{}}',
            p_tool_names text[] DEFAULT '{{}}', p_raised double precision[] DEFAULT '{{}}',
            p_expires double precision[] DEFAULT '{{}}', p_data text[] DEFAULT '{{}}',
            p_audit text[] DEFAULT '{{}}', p_applied bigint[] DEFAULT '{{}}',
            p_answered text[] DEFAULT '{{}}', p_starts text[] DEFAULT '{{}}',
            OUT saved bigint, OUT at_version bigint, OUT at_count int,
            OUT waiting_seqs bigint[], OUT waiting_ids text[], OUT waiting_data text[],
            OUT taken_keys text[], OUT taken_holders text[])
        LANGUAGE plpgsql AS $$
        DECLARE
            v bigint;
            c int;
        BEGIN
            -- The row locked first, as recording answers locks it (they take turns) and as a
            -- claim on its calls share-locks it. Each statement below takes a new snapshot
            -- (READ COMMITTED, a volatile function): it sees what committed before the lock.
            SELECT s.version, s.message_count INTO v, c FROM {s}.sessions s
            WHERE s.id = p_id FOR UPDATE;
            -- Refused (saved NULL, nothing written) when a recorded answer not applied by this
            -- save waits for a question it answers: all the answers to those questions come
            -- back, for the same error as the other stores.
            IF cardinality(p_answered) > 0 AND EXISTS (SELECT 1 FROM {s}.answers a
                    WHERE a.session_id = p_id AND a.interrupt_id = ANY(p_answered)
                    AND a.seq <> ALL(p_applied)) THEN
                SELECT array_agg(a.seq ORDER BY a.seq), array_agg(a.interrupt_id ORDER BY a.seq),
                    array_agg(a.data ORDER BY a.seq)
                INTO waiting_seqs, waiting_ids, waiting_data
                FROM {s}.answers a WHERE a.session_id = p_id AND a.interrupt_id = ANY(p_answered);
                RETURN;
            END IF;
            -- Refused when another session holds a call the save starts (checked only when
            -- the compare-and-swap can pass; otherwise the swap's conflict is the answer).
            IF cardinality(p_starts) > 0 AND coalesce(v, 0) = p_expected
                    AND coalesce(c, 0) = p_first THEN
                SELECT array_agg(k.key), array_agg(k.holder) INTO taken_keys, taken_holders
                FROM {s}.call_claims k WHERE k.key = ANY(p_starts) AND k.holder <> p_id;
                IF taken_keys IS NOT NULL THEN
                    RETURN;
                END IF;
            END IF;
            SELECT r.saved, r.at_version, r.at_count INTO saved, at_version, at_count
            FROM {s}.save_session(p_id, p_expected, p_first, p_fv, p_state, p_pause, p_claim,
                p_lease, p_tools, p_agent, p_keep_pending, p_messages, p_ids, p_names,
                p_tool_names, p_raised, p_expires, p_data, p_audit, p_applied) r;
        END $$""",
    ),
    (  # a rewind (a save that first cuts the conversation) in one round trip: the session row
        # locked and checked, its messages from p_first on deleted and its count set there,
        # then save_checked; a save it refuses takes the cut back with it (the inner block)
        """CREATE FUNCTION {s}.rewind_session(
            p_id text, p_expected bigint, p_first int, p_fv int, p_state text, p_pause text,
            p_claim text, p_lease double precision, p_tools text, p_agent text,
            p_keep_pending boolean, p_messages text[] DEFAULT '{{}}',
            p_ids text[] DEFAULT '{{}}', p_names text[] DEFAULT '{{}}',
            p_tool_names text[] DEFAULT '{{}}', p_raised double precision[] DEFAULT '{{}}',
            p_expires double precision[] DEFAULT '{{}}', p_data text[] DEFAULT '{{}}',
            p_audit text[] DEFAULT '{{}}', p_applied bigint[] DEFAULT '{{}}',
            p_answered text[] DEFAULT '{{}}', p_starts text[] DEFAULT '{{}}',
            OUT saved bigint, OUT at_version bigint, OUT at_count int,
            OUT waiting_seqs bigint[], OUT waiting_ids text[], OUT waiting_data text[],
            OUT taken_keys text[], OUT taken_holders text[])
        LANGUAGE plpgsql AS $$
        BEGIN
            -- saved NULL, nothing written, with where the session stands (NULL: no such
            -- session) when it is not at p_expected or holds fewer than p_first messages
            SELECT s.version, s.message_count INTO at_version, at_count FROM {s}.sessions s
            WHERE s.id = p_id FOR UPDATE;
            IF at_version IS NULL OR at_version <> p_expected OR at_count < p_first THEN
                RETURN;
            END IF;
            BEGIN
                DELETE FROM {s}.messages WHERE session_id = p_id AND idx >= p_first;
                UPDATE {s}.sessions SET message_count = p_first WHERE id = p_id;
                SELECT r.saved, r.at_version, r.at_count, r.waiting_seqs, r.waiting_ids,
                    r.waiting_data, r.taken_keys, r.taken_holders
                INTO saved, at_version, at_count, waiting_seqs, waiting_ids, waiting_data,
                    taken_keys, taken_holders
                FROM {s}.save_checked(p_id, p_expected, p_first, p_fv, p_state, p_pause,
                    p_claim, p_lease, p_tools, p_agent, p_keep_pending, p_messages, p_ids,
                    p_names, p_tool_names, p_raised, p_expires, p_data, p_audit, p_applied,
                    p_answered, p_starts) r;
                IF saved IS NULL THEN
                    RAISE EXCEPTION 'the save was refused';
                END IF;
            EXCEPTION WHEN raise_exception THEN
                NULL;  -- the block's writes undone; its outputs (why it was refused) kept
            END;
        END $$""",
    ),
)

# The session, its messages, its audit trail and its recorded answers (the answer queue, read
# with it: a resume right after the load needs no second round trip to check against it).
LOAD = """SELECT s.version, s.format_version, s.state, s.pause, s.tools, s.message_count,
    s.claim, s.agent, m.data, m.n, m.lo, m.hi, a.entries, a.seqs, q.seqs, q.ids, q.data
FROM {s}.sessions s LEFT JOIN LATERAL (
    SELECT array_agg(data ORDER BY idx) AS data, count(*) AS n, min(idx) AS lo, max(idx) AS hi
    FROM {s}.messages WHERE session_id = s.id) m ON true
LEFT JOIN LATERAL (
    SELECT array_agg(entry ORDER BY seq) AS entries, array_agg(seq ORDER BY seq) AS seqs
    FROM {s}.audit WHERE session_id = s.id) a ON true
LEFT JOIN LATERAL (
    SELECT array_agg(seq ORDER BY seq) AS seqs, array_agg(interrupt_id ORDER BY seq) AS ids,
        array_agg(data ORDER BY seq) AS data
    FROM {s}.answers WHERE session_id = s.id) q ON true
WHERE s.id = %(id)s"""
# The whole save in one statement (one round trip, one transaction): migration 6's function.
# Parameters go in binary (``%(x)b``: no escaping of the JSON texts), and the arrays a save
# leaves empty are left out (the function's defaults), so no time goes to dumping them.
SAVE_HEAD: LiteralString = """SELECT saved, at_version, at_count FROM {s}.save_session(
    %(id)b::text, %(expected)b::bigint, %(first)b::int, %(fv)b::int, %(state)b::text,
    %(pause)b::text, %(claim)b::text, %(lease)b::float8, %(tools)b::text, %(agent)b::text,
    %(keep_pending)b::boolean"""
SAVE_ARRAYS: dict[str, LiteralString] = {
    "messages": ", p_messages => %(messages)b::text[]",
    "ids": """, p_ids => %(ids)b::text[], p_names => %(names)b::text[],
    p_tool_names => %(tool_names)b::text[], p_raised => %(raised)b::float8[],
    p_expires => %(expires)b::float8[], p_data => %(data)b::text[]""",
    "audit": ", p_audit => %(audit)b::text[]",
    "applied": ", p_applied => %(applied)b::bigint[]",
}


# A save that answers questions or starts calls: migration 8's function, which checks first.
CHECKED_HEAD: LiteralString = """SELECT saved, at_version, at_count, waiting_seqs, waiting_ids,
    waiting_data, taken_keys, taken_holders FROM {s}.save_checked(
    %(id)b::text, %(expected)b::bigint, %(first)b::int, %(fv)b::int, %(state)b::text,
    %(pause)b::text, %(claim)b::text, %(lease)b::float8, %(tools)b::text, %(agent)b::text,
    %(keep_pending)b::boolean, p_answered => %(answered)b::text[],
    p_starts => %(starts)b::text[]"""


# A rewind: migration 9's function, called as save_checked is, with every array.
REWIND: LiteralString = (
    CHECKED_HEAD.replace("{s}.save_checked(", "{s}.rewind_session(")
    + "".join(SAVE_ARRAYS.values())
    + ")"
)


def save_statements() -> dict[str, LiteralString]:
    """The save call for each combination of non-empty arrays, named ``save:<arrays>``
    (e.g. ``save:messages,audit``), and the same calls checking answers and calls first,
    ``checked:<arrays>``."""
    out: dict[str, LiteralString] = {}
    names = list(SAVE_ARRAYS)
    for mask in range(1 << len(names)):
        chosen = [n for i, n in enumerate(names) if mask >> i & 1]
        arrays: LiteralString = ""
        for name in chosen:
            arrays += SAVE_ARRAYS[name]
        out["save:" + ",".join(chosen)] = SAVE_HEAD + arrays + ")"
        out["checked:" + ",".join(chosen)] = CHECKED_HEAD + arrays + ")"
    return out


AUDIT = "SELECT seq, entry FROM {s}.audit WHERE session_id = %(id)s ORDER BY seq"
# The agent comes from the session row (a scalar subquery keeps the plans on the pending index).
PENDING_COLUMNS = """SELECT p.session_id, p.data,
    (SELECT s.agent FROM {s}.sessions s WHERE s.id = p.session_id)
FROM {s}.pending p WHERE """
EXPIRED = (
    PENDING_COLUMNS
    + """p.expires_at <= %(now)s
ORDER BY p.expires_at, p.session_id, p.interrupt_id LIMIT %(limit)s"""
)
# Locks the session row: callers recording answers for one session take turns.
ANSWER_SEQ = """UPDATE {s}.sessions SET answer_seq = answer_seq + %(n)s WHERE id = %(id)s
RETURNING answer_seq, version"""
# A claim share-locks its origin's row: a save of the origin (which locks the row for update)
# either committed before (and the claim's read of the origin holds it) or waits for the claim
# to commit (and then sees it). Claims on calls of one origin do not wait for each other.
SHARE_SESSION = "SELECT 1 FROM {s}.sessions WHERE id = %(id)s FOR SHARE"
CLAIM_CALL = """INSERT INTO {s}.call_claims (key, origin, holder)
VALUES (%(key)s, %(id)s, %(holder)s) ON CONFLICT (key) DO NOTHING"""
CALL_HOLDER = "SELECT holder FROM {s}.call_claims WHERE key = %(key)s"
DELETE_CALLS = "DELETE FROM {s}.call_claims WHERE origin = %(id)s"
ANSWER_TAKEN = """SELECT interrupt_id FROM {s}.answers
WHERE session_id = %(id)s AND interrupt_id = ANY(%(ids)s::text[]) ORDER BY seq LIMIT 1"""
ADD_ANSWERS = """INSERT INTO {s}.answers (session_id, seq, interrupt_id, at, data)
SELECT %(id)s, %(first)s + t.k - 1, t.iid, t.at, t.data
FROM unnest(%(ids)s::text[], %(ats)s::float8[], %(data)s::text[])
    WITH ORDINALITY AS t(iid, at, data, k)"""
ANSWERS = "SELECT seq, interrupt_id, data FROM {s}.answers WHERE session_id = %(id)s ORDER BY seq"
CLEAR_ANSWERS = "DELETE FROM {s}.answers WHERE session_id = %(id)s AND seq <= %(upto)s"
# Each session with work, by when its oldest work became due: its first recorded answer, its
# earliest overdue question (the partial deadline index), a lapsed run claim (the partial
# lease index). The answers table holds only answers not yet applied, so it stays small.
WORK = """SELECT id, min(due) AS due FROM (
    (SELECT DISTINCT ON (session_id) session_id AS id, at AS due FROM {s}.answers
        ORDER BY session_id, seq)
    UNION ALL
    (SELECT session_id, min(expires_at) FROM {s}.pending WHERE expires_at <= %(now)s
        GROUP BY session_id)
    UNION ALL
    (SELECT id, claim_expires_at FROM {s}.sessions WHERE claim_expires_at <= %(now)s)
) work GROUP BY id"""
TO_RESUME = WORK + " ORDER BY due, id LIMIT %(limit)s"
# The same, reserving what it returns for %(owner)s until %(until)s, in one statement: the
# session rows are locked as they are picked (oldest work first) and rows another call holds
# are skipped; a row another call reserved meanwhile is checked again once locked (READ
# COMMITTED re-reads it), so it is left out if that reservation has not lapsed.
TO_RESUME_RESERVING = (
    "WITH work AS ("
    + WORK
    + """),
picked AS (
    SELECT s.id, work.due FROM {s}.sessions s JOIN work ON work.id = s.id
    WHERE s.reserved_until IS NULL OR s.reserved_until <= %(now)s OR s.reserved_by = %(owner)s
    ORDER BY work.due, s.id LIMIT %(limit)s
    FOR UPDATE OF s SKIP LOCKED),
taken AS (
    UPDATE {s}.sessions s SET reserved_by = %(owner)s, reserved_until = %(until)s
    FROM picked WHERE s.id = picked.id RETURNING s.id, picked.due)
SELECT id FROM taken ORDER BY due, id"""
)
NOTE_COLUMNS = """id, session_id, interrupt_id, event, status, attempts, next_at, created_at,
    last_error, payload"""
# Closing events: interlude.sessions._protocol.CLOSING_EVENTS.
ADD_NOTE = (
    "INSERT INTO {s}.notifications ("
    + NOTE_COLUMNS
    + """, open)
SELECT %(id)s, %(session_id)s, %(interrupt_id)s, %(event)s, %(status)s, %(attempts)s,
    %(next_at)s, %(created_at)s, %(last_error)s, %(payload)s,
    %(event)s = 'asked' AND NOT EXISTS (SELECT 1 FROM {s}.notifications
        WHERE session_id = %(session_id)s AND interrupt_id = %(interrupt_id)s
        AND event IN ('answered', 'expired', 'withdrawn'))
WHERE EXISTS (SELECT 1 FROM {s}.sessions WHERE id = %(session_id)s)
ON CONFLICT (id) DO NOTHING RETURNING id"""
)
CLOSE_NOTE = """UPDATE {s}.notifications SET open = false
WHERE session_id = %(session_id)s AND interrupt_id = %(interrupt_id)s AND event = 'asked'
    AND open"""
# Locks the due rows it takes; other notifiers skip them rather than wait.
CLAIM_NOTES = (
    """WITH due AS (
    SELECT id, next_at AS was FROM {s}.notifications
    WHERE status = 'pending' AND next_at <= %(now)s
    ORDER BY next_at, id LIMIT %(limit)s FOR UPDATE SKIP LOCKED),
taken AS (
    UPDATE {s}.notifications n SET next_at = %(until)s FROM due WHERE n.id = due.id
    RETURNING n.*, due.was)
SELECT """
    + NOTE_COLUMNS
    + " FROM taken ORDER BY was, id"
)
NOTE = "SELECT " + NOTE_COLUMNS + " FROM {s}.notifications WHERE id = %(id)s FOR UPDATE"
SETTLE_NOTE = """UPDATE {s}.notifications SET status = %(status)s, attempts = %(attempts)s,
    next_at = %(next_at)s, last_error = %(last_error)s WHERE id = %(id)s"""
OPEN_NOTES = (
    "SELECT " + NOTE_COLUMNS + " FROM {s}.notifications WHERE open "
    "ORDER BY created_at, id LIMIT %(limit)s"
)
SESSION_NOTES = (
    "SELECT " + NOTE_COLUMNS + " FROM {s}.notifications WHERE session_id = %(id)s "
    "ORDER BY created_at, id"
)
LIST = "SELECT id FROM {s}.sessions ORDER BY id"
DELETE = "DELETE FROM {s}.sessions WHERE id = %(id)s"
PENDING_HEAD = PENDING_COLUMNS
PENDING_TAIL = " ORDER BY p.raised_at, p.session_id, p.interrupt_id LIMIT %(limit)s"
FILTERS: dict[str, LiteralString] = {
    "name": "p.name = %(name)s",
    "tool_name": "p.tool_name = %(tool_name)s",
    "older": "p.raised_at < %(older)s",
    "newer": "p.raised_at > %(newer)s",
    "agent": "p.session_id IN (SELECT id FROM {s}.sessions WHERE agent = %(agent)s)",
    "expiring": "p.expires_at < %(expiring)s",
}

STATEMENTS: dict[str, LiteralString] = {
    "load": LOAD,
    "list": LIST,
    "delete": DELETE,
    "pending_head": PENDING_HEAD,
    "audit": AUDIT,
    "expired": EXPIRED,
    "answer_seq": ANSWER_SEQ,
    "answer_taken": ANSWER_TAKEN,
    "share_session": SHARE_SESSION,
    "claim_call": CLAIM_CALL,
    "call_holder": CALL_HOLDER,
    "delete_calls": DELETE_CALLS,
    "add_answers": ADD_ANSWERS,
    "answers": ANSWERS,
    "clear_answers": CLEAR_ANSWERS,
    "to_resume": TO_RESUME,
    "to_resume_reserving": TO_RESUME_RESERVING,
    "add_note": ADD_NOTE,
    "close_note": CLOSE_NOTE,
    "claim_notes": CLAIM_NOTES,
    "note": NOTE,
    "settle_note": SETTLE_NOTE,
    "open_notes": OPEN_NOTES,
    "session_notes": SESSION_NOTES,
    "rewind": REWIND,
} | save_statements()


def migrate(conn: psycopg.Connection[Any], s: sql.Identifier) -> None:
    """Apply the migrations this schema lacks, in one transaction, under an advisory lock
    so that workers starting together migrate once."""
    from psycopg import sql

    with conn.transaction():
        conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            (f"interlude.migrate:{s.as_string(conn)}",),  # same key for the same schema
        )
        # No DDL when up to date, so workers need no CREATE privilege once migrated.
        name = s.as_string(conn)
        table = f"{name}.interlude_migrations"
        if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone() == (None,):
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {s}").format(s=s))
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {s}.interlude_migrations (version int PRIMARY KEY, "
                    "applied_at timestamptz NOT NULL DEFAULT now())"
                ).format(s=s)
            )
        done = {
            row[0]
            for row in conn.execute(
                sql.SQL("SELECT version FROM {s}.interlude_migrations").format(s=s)
            )
        }
        newest = max(done, default=0)
        if newest > len(MIGRATIONS):
            raise SessionError(
                f"schema {name} is at migration {newest}, newer than this "
                f"interlude knows ({len(MIGRATIONS)}); upgrade interlude"
            )
        for version, statements in enumerate(MIGRATIONS, start=1):
            if version in done:
                continue
            for statement in statements:
                conn.execute(sql.SQL(statement).format(s=s))
            conn.execute(
                sql.SQL("INSERT INTO {s}.interlude_migrations (version) VALUES (%s)").format(s=s),
                (version,),
            )
