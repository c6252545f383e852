"""PostgresStore's notification outbox: one row per notification beside the sessions (gone
with its session), due ones claimed with ``FOR UPDATE SKIP LOCKED`` so notifiers sharing the
database take different ones."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ._outbox import (
    CLOSING_EVENTS,
    check_notifications,
    notification_from_row,
    settled,
)
from ._protocol import Notification, check_session_id

if TYPE_CHECKING:
    from ._postgres_pools import LoopPools

__all__ = ["PostgresOutbox"]

T = TypeVar("T")


class PostgresOutbox:
    """The outbox methods of :class:`~interlude.sessions.PostgresStore` (a mixin: it uses the
    store's pool, statements and error mapping)."""

    _pools: LoopPools
    _sql: dict[str, bytes]

    async def _run(self, what: str, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        raise NotImplementedError

    async def add_notifications(self, notifications: list[Notification]) -> list[str]:
        checked = check_notifications(notifications)
        rows = []
        for n in checked:
            row: dict[str, Any] = n.to_dict() | {"payload": json.dumps(n.payload)}
            row["next_at"] = row.pop("next_attempt_at")
            rows.append(row)
        return await self._run("add notifications", self._add, rows)

    async def _add(self, rows: list[dict[str, Any]]) -> list[str]:
        added = []
        async with self._pools.connection() as conn, conn.transaction():
            for row in rows:
                cursor = await conn.execute(self._sql["add_note"], row)
                if await cursor.fetchone() is not None:
                    added.append(row["id"])
                    if row["event"] in CLOSING_EVENTS:
                        await conn.execute(self._sql["close_note"], row)
        return added

    async def claim_notifications(
        self, now: float, *, lease: float, limit: int | None = None
    ) -> list[Notification]:
        params = {
            "now": float(now),
            "until": float(now) + lease,
            "limit": None if limit is None else max(int(limit), 0),
        }
        rows = await self._run("claim notifications", self._rows, "claim_notes", params)
        return [notification_from_row(r) for r in rows]

    async def settle_notification(
        self,
        notification_id: str,
        outcome: Literal["sent", "retry", "failed"],
        *,
        retry_at: float | None = None,
        error: str | None = None,
    ) -> None:
        async def settle() -> None:
            async with self._pools.connection() as conn, conn.transaction():
                cursor = await conn.execute(self._sql["note"], {"id": notification_id})
                row = await cursor.fetchone()
                if row is None:
                    return
                n = settled(notification_from_row(row), outcome, retry_at, error)
                params = n.to_dict()
                params["next_at"] = params.pop("next_attempt_at")
                await conn.execute(self._sql["settle_note"], params)

        await self._run(f"settle notification {notification_id!r}", settle)

    async def open_questions(self, *, limit: int | None = None) -> list[Notification]:
        params = {"limit": None if limit is None else max(int(limit), 0)}
        rows = await self._run("list open questions", self._rows, "open_notes", params)
        return [notification_from_row(r) for r in rows]

    async def notifications(self, session_id: str) -> list[Notification]:
        check_session_id(session_id)
        rows = await self._run(
            f"list the notifications of {session_id!r}",
            self._rows,
            "session_notes",
            {"id": session_id},
        )
        return [notification_from_row(r) for r in rows]

    async def _rows(self, statement: str, params: dict[str, Any]) -> list[Any]:
        raise NotImplementedError
