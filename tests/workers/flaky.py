"""A session store whose saves (or queries) fail on demand, as a database that went away does:
a real SQLiteStore behind the protocol, with ``SessionError`` raised while a fault is armed."""

from __future__ import annotations

from typing import Any

from interlude.errors import SessionError
from interlude.sessions import SessionUpdate, SQLiteStore


class FlakyStore:
    """``saves_fail`` saves in a row fail (before anything is written); ``queries_fail``
    calls of ``sessions_to_resume`` in a row fail (with ``error``). Everything else is the
    SQLite store's."""

    def __init__(self, inner: SQLiteStore) -> None:
        self.inner = inner
        self.saves_fail = 0
        self.queries_fail = 0
        self.error: type[Exception] = SessionError

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def save(self, session_id: str, update: SessionUpdate) -> int:
        if self.saves_fail:
            self.saves_fail -= 1
            raise SessionError("PostgreSQL failed to save: the connection was closed")
        return await self.inner.save(session_id, update)

    async def sessions_to_resume(
        self,
        now: Any,
        *,
        limit: int | None = None,
        reserve_for: str | None = None,
        lease: float = 30.0,
    ) -> list[str]:
        if self.queries_fail:
            self.queries_fail -= 1
            raise self.error("PostgreSQL failed to list sessions to resume: server closed")
        return await self.inner.sessions_to_resume(
            now, limit=limit, reserve_for=reserve_for, lease=lease
        )
