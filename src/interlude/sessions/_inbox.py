"""Inbox: the questions waiting in a store and its audit trails, from sync or async code."""

from __future__ import annotations

import time
from datetime import datetime
from types import TracebackType

from .._messages import JsonValue
from .._sync import run_sync
from ._protocol import PendingInterrupt, SessionStore
from ._url import open_store

__all__ = ["Inbox"]


class Inbox:
    """Pending, expired and audit queries on a session store (or a store URL).

    Each query has an async form (``pending_async``) and a sync one (``pending``); the sync
    ones work from plain sync code and from code running inside an event loop's thread (a
    notebook, an async app's sync helper) alike, without ``asyncio.run``. ``skipped`` is the
    store's ``(session_id, why)`` list of sessions the last query left out, unreadable.

    A store opened here from a URL is closed by :meth:`close` (or leaving a ``with`` block);
    a store passed in is left open.
    """

    def __init__(self, store: SessionStore | str) -> None:
        self._owned = isinstance(store, str)
        self.store: SessionStore = open_store(store) if isinstance(store, str) else store

    @property
    def skipped(self) -> tuple[tuple[str, str], ...]:
        return tuple(getattr(self.store, "skipped", ()))

    async def pending_async(
        self,
        *,
        name: str | None = None,
        tool_name: str | None = None,
        older_than: datetime | float | None = None,
        newer_than: datetime | float | None = None,
        limit: int | None = None,
    ) -> list[PendingInterrupt]:
        """Pending interrupts across sessions, oldest first (the store's filters)."""
        return await self.store.pending_interrupts(
            name=name,
            tool_name=tool_name,
            older_than=older_than,
            newer_than=newer_than,
            limit=limit,
        )

    def pending(
        self,
        *,
        name: str | None = None,
        tool_name: str | None = None,
        older_than: datetime | float | None = None,
        newer_than: datetime | float | None = None,
        limit: int | None = None,
    ) -> list[PendingInterrupt]:
        """:meth:`pending_async`, from sync code."""
        return run_sync(
            self.pending_async(
                name=name,
                tool_name=tool_name,
                older_than=older_than,
                newer_than=newer_than,
                limit=limit,
            )
        )

    async def expired_async(
        self, now: datetime | float | None = None, *, limit: int | None = None
    ) -> list[PendingInterrupt]:
        """Pending interrupts whose deadline is at or before ``now`` (default: this moment),
        earliest deadline first."""
        return await self.store.expired_interrupts(time.time() if now is None else now, limit=limit)

    def expired(
        self, now: datetime | float | None = None, *, limit: int | None = None
    ) -> list[PendingInterrupt]:
        """:meth:`expired_async`, from sync code."""
        return run_sync(self.expired_async(now, limit=limit))

    async def audit_async(self, session_id: str) -> list[dict[str, JsonValue]]:
        """The session's audit entries, oldest first (empty if there is no such session)."""
        return await self.store.audit_trail(session_id)

    def audit(self, session_id: str) -> list[dict[str, JsonValue]]:
        """:meth:`audit_async`, from sync code."""
        return run_sync(self.audit_async(session_id))

    def close(self) -> None:
        """Close the store if this inbox opened it from a URL (idempotent)."""
        close = getattr(self.store, "close", None)
        if self._owned and close is not None:
            self._owned = False
            close()

    def __enter__(self) -> Inbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
