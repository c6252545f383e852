"""SQLiteStore's notification outbox: one row per notification, in the store's database, with
the due ones (by next attempt), a question's, and the open questions indexed."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, Literal

from ._outbox import (
    CLOSING_EVENTS,
    check_notifications,
    notification_from_row,
    settled,
)
from ._protocol import Notification, check_session_id

__all__ = ["SQLiteOutbox"]

_COLUMNS = (
    "id, session_id, interrupt_id, event, status, attempts, next_at, created_at, last_error, "
    "CAST(payload AS BLOB)"
)
_CLOSING = ", ".join(f"'{e}'" for e in CLOSING_EVENTS)
_ADD = f"""INSERT INTO notifications ({_COLUMNS.replace("CAST(payload AS BLOB)", "payload")},
    open)
SELECT :id, :session_id, :interrupt_id, :event, :status, :attempts, :next_at, :created_at,
    :last_error, :payload, :event = 'asked' AND NOT EXISTS (SELECT 1 FROM notifications
        WHERE session_id = :session_id AND interrupt_id = :interrupt_id
        AND event IN ({_CLOSING}))
WHERE EXISTS (SELECT 1 FROM sessions WHERE id = :session_id)
ON CONFLICT (id) DO NOTHING"""
_CLOSE = """UPDATE notifications SET open = 0
WHERE session_id = :session_id AND interrupt_id = :interrupt_id AND event = 'asked' AND open = 1"""


class SQLiteOutbox:
    """The outbox methods of :class:`~interlude.sessions.SQLiteStore` (a mixin: it uses the
    store's transactions)."""

    def _transaction(self, begin: str) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    async def add_notifications(self, notifications: list[Notification]) -> list[str]:
        checked = check_notifications(notifications)
        rows = [n.to_dict() | {"payload": json.dumps(n.payload)} for n in checked]
        for row in rows:
            row["next_at"] = row.pop("next_attempt_at")
        added = []
        with self._transaction("BEGIN IMMEDIATE") as conn:
            for n, row in zip(checked, rows, strict=True):
                if conn.execute(_ADD, row).rowcount == 1:
                    added.append(n.id)
                    if n.event in CLOSING_EVENTS:
                        conn.execute(_CLOSE, row)
        return added

    async def claim_notifications(
        self, now: float, *, lease: float, limit: int | None = None
    ) -> list[Notification]:
        with self._transaction("BEGIN IMMEDIATE") as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM notifications WHERE status = 'pending' "
                "AND next_at <= ? ORDER BY next_at, id LIMIT ?",
                (float(now), -1 if limit is None else max(int(limit), 0)),
            ).fetchall()
            conn.executemany(
                "UPDATE notifications SET next_at = ? WHERE id = ?",
                [(float(now) + lease, r[0]) for r in rows],
            )
        return [replace(notification_from_row(r), next_attempt_at=float(now) + lease) for r in rows]

    async def settle_notification(
        self,
        notification_id: str,
        outcome: Literal["sent", "retry", "failed"],
        *,
        retry_at: float | None = None,
        error: str | None = None,
    ) -> None:
        with self._transaction("BEGIN IMMEDIATE") as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM notifications WHERE id = ?", (notification_id,)
            ).fetchone()
            if row is None:
                return
            n = settled(notification_from_row(row), outcome, retry_at, error)
            conn.execute(
                "UPDATE notifications SET status = ?, attempts = ?, next_at = ?, last_error = ? "
                "WHERE id = ?",
                (n.status, n.attempts, n.next_attempt_at, n.last_error, n.id),
            )

    async def open_questions(self, *, limit: int | None = None) -> list[Notification]:
        return list(
            self._select(
                "WHERE open = 1 ORDER BY created_at, id LIMIT ?",
                (-1 if limit is None else max(int(limit), 0),),
            )
        )

    async def notifications(self, session_id: str) -> list[Notification]:
        check_session_id(session_id)
        return list(self._select("WHERE session_id = ? ORDER BY created_at, id", (session_id,)))

    def _select(self, where: str, params: tuple[Any, ...]) -> Iterator[Notification]:
        with self._transaction("BEGIN") as conn:
            rows = conn.execute(f"SELECT {_COLUMNS} FROM notifications {where}", params).fetchall()
        return (notification_from_row(r) for r in rows)
