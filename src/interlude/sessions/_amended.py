"""A store whose saves are amended on their way: ``amended(store, amend)``.

A door that must write something of its own in the very save a run makes (the A2A door's
cancel mark, the MCP door's owner of a session it starts) gives the run this view of the
store: each save passes through ``amend(session_id, update)`` first, so the door's mark and
the run's state land in one write; everything else is ``store``'s own. The view meets the
protocols ``store`` meets (``SessionStore``, ``InboxStore``, ``CallClaims``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from .._messages import JsonValue
    from ._protocol import InboxStore, SessionUpdate, StoredSession

__all__ = ["AmendedStore", "amended"]

Amend = Callable[[str, "SessionUpdate"], "SessionUpdate"]


class AmendedStore:
    """``store`` with each save's update passed through ``amend`` first (see the module)."""

    def __init__(self, store: InboxStore, amend: Amend) -> None:
        self.store = store
        self.amend = amend

    def __getattr__(self, name: str) -> Any:  # what a run never changes (close, fork, ...)
        return getattr(self.store, name)

    async def save(self, session_id: str, update: SessionUpdate) -> int:
        return await self.store.save(session_id, self.amend(session_id, update))

    # The rest of the protocols, stated (a protocol check does not see ``__getattr__``).

    async def load(self, session_id: str) -> StoredSession | None:
        return await self.store.load(session_id)

    async def audit_trail(self, session_id: str) -> list[dict[str, JsonValue]]:
        return await self.store.audit_trail(session_id)

    async def list_sessions(self) -> list[str]:
        return await self.store.list_sessions()

    async def delete(self, session_id: str) -> None:
        await self.store.delete(session_id)

    async def record_answers(self, session_id: str, answers: Any, **options: Any) -> Any:
        return await self.store.record_answers(session_id, answers, **options)

    async def recorded_answers(self, session_id: str) -> Any:
        return await self.store.recorded_answers(session_id)

    async def clear_answers(self, session_id: str, upto_seq: int) -> None:
        await self.store.clear_answers(session_id, upto_seq)

    async def sessions_to_resume(self, now: Any, **options: Any) -> list[str]:
        return await self.store.sessions_to_resume(now, **options)

    async def pending_interrupts(self, query: Any = None) -> Any:
        return await self.store.pending_interrupts(query)

    async def expired_interrupts(self, now: Any, **options: Any) -> Any:
        return await self.store.expired_interrupts(now, **options)


class _AmendedClaims(AmendedStore):
    """:class:`AmendedStore` of a store that keeps call claims (``CallClaims``)."""

    async def claim_call(self, key: str, session_id: str, *, origin: str) -> Any:
        return await cast(Any, self.store).claim_call(key, session_id, origin=origin)


def amended(store: InboxStore, amend: Amend) -> AmendedStore:
    """The :class:`AmendedStore` of ``store``, meeting the protocols ``store`` meets."""
    from ._protocol import CallClaims

    return (_AmendedClaims if isinstance(store, CallClaims) else AmendedStore)(store, amend)
