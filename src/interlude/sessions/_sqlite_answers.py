"""SQLiteStore's answer queue: answers recorded ahead of a resume (first wins, per question)
and the work a worker has to do (``sessions_to_resume``, reserving it for one worker when
asked). A mixin: it uses the store's transactions. Also the small readers the store shares."""

from __future__ import annotations

import json
import sqlite3
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from .._json import loads as strict_json
from .._messages import JsonValue
from ..errors import SessionCorruptError
from ._answers import (
    answer_entries,
    check_version,
    conflict,
    no_session,
    read_answer,
    read_answer_rows,
)
from ._protocol import RecordedAnswer, check_session_id, epoch
from ._sqlite_sql import ANSWERS, RESERVE, TO_RESERVE, TO_RESUME

__all__ = ["SQLiteAnswers"]


def _corrupt(session_id: str, detail: str) -> SessionCorruptError:
    return SessionCorruptError(f"session {session_id!r} is corrupt in the database: {detail}")


def _json(session_id: str, what: str, raw: object) -> Any:
    """Parse one stored JSON column (selected as a BLOB, so bad UTF-8 is caught here too)."""
    if not isinstance(raw, bytes | str):
        raise _corrupt(session_id, f"{what} is not JSON text ({type(raw).__name__})")
    try:
        return strict_json(raw)
    except (ValueError, RecursionError) as exc:  # bad JSON, bad UTF-8, nested too deeply
        raise _corrupt(session_id, f"{what} is not valid JSON ({exc})") from None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class SQLiteAnswers:
    """The answer-queue methods of :class:`~interlude.sessions.SQLiteStore`."""

    bytes_written: int

    def _transaction(self, begin: str) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    async def record_answers(
        self,
        session_id: str,
        answers: list[dict[str, JsonValue]],
        *,
        expected_version: int | None = None,
    ) -> list[RecordedAnswer]:
        """Record the answers in one ``BEGIN IMMEDIATE`` transaction (writers take turns), after
        the session's last seq; the unique (session, interrupt) key backs the first-wins check."""
        check_session_id(session_id)
        entries = answer_entries(session_id, answers)
        texts = [json.dumps(e) for e in entries]
        ids = [str(e["interrupt_id"]) for e in entries]
        with self._transaction("BEGIN IMMEDIATE") as conn:
            row = conn.execute(
                "SELECT answer_seq, version FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if row is None:
                raise no_session(session_id)
            check_version(session_id, row[1], expected_version)
            if not _is_int(row[0]) or row[0] < 0:
                raise _corrupt(session_id, f"answer_seq is {row[0]!r}, not a count")
            first = row[0] + 1
            taken = conn.execute(
                "SELECT interrupt_id FROM answers WHERE session_id = ? AND interrupt_id IN "
                f"({', '.join('?' * len(ids))}) ORDER BY seq LIMIT 1",
                (session_id, *ids),
            ).fetchone()
            if taken is not None:
                raise conflict(session_id, str(taken[0]))
            if not entries:
                return []
            conn.execute(
                "UPDATE sessions SET answer_seq = ? WHERE id = ?",
                (first + len(ids) - 1, session_id),
            )
            try:
                conn.executemany(
                    "INSERT INTO answers (session_id, seq, interrupt_id, at, data) "
                    "VALUES (?, ?, ?, ?, ?)",
                    [
                        (session_id, first + i, ids[i], e["at"], texts[i])
                        for i, e in enumerate(entries)
                    ],
                )
            except sqlite3.IntegrityError as exc:  # answer rows past answer_seq
                raise _corrupt(
                    session_id, f"its answer rows clash with this call ({exc})"
                ) from None
        self.bytes_written += sum(map(len, texts))
        return [read_answer(session_id, first + i, e) for i, e in enumerate(entries)]

    async def recorded_answers(self, session_id: str) -> list[RecordedAnswer]:
        check_session_id(session_id)
        with self._transaction("BEGIN") as conn:
            rows = conn.execute(ANSWERS, (session_id,)).fetchall()
        return read_answer_rows(session_id, rows)

    async def clear_answers(self, session_id: str, upto_seq: int) -> None:
        check_session_id(session_id)
        with self._transaction("BEGIN IMMEDIATE") as conn:
            conn.execute(
                "DELETE FROM answers WHERE session_id = ? AND seq <= ?", (session_id, upto_seq)
            )

    reserves_work = True
    """:meth:`sessions_to_resume` reserves what it returns when given ``reserve_for``."""

    async def sessions_to_resume(
        self,
        now: datetime | float,
        *,
        limit: int | None = None,
        reserve_for: str | None = None,
        lease: float = 30.0,
    ) -> list[str]:
        """Sessions with recorded answers, an overdue question or a lapsed run claim, oldest
        work first: one query over the answers table and the indexed deadline and lease
        columns. With ``reserve_for``, the selection (less other owners' live reservations)
        and the reservation of what it found are one ``BEGIN IMMEDIATE`` transaction, so
        processes sharing the file never reserve the same session at once."""
        rows = None if limit is None or limit < 0 else int(limit)
        when = float(epoch(now) or 0.0)
        params = {"now": when, "limit": -1 if rows is None else rows}
        if reserve_for is None:
            with self._transaction("BEGIN") as conn:
                found = [r[0] for r in conn.execute(TO_RESUME, params)]
            return found if limit is None else found[:limit]
        if limit is not None and limit <= 0:
            return []
        with self._transaction("BEGIN IMMEDIATE") as conn:
            found = [r[0] for r in conn.execute(TO_RESERVE, params | {"owner": reserve_for})]
            if found:
                until = when + float(lease)
                conn.execute(RESERVE, (reserve_for, until, json.dumps(found)))
        return found
