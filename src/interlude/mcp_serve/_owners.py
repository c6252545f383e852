"""Who started a session through this door: only they may prompt it here.

A session this door starts records its caller's name in the session's agent state,
``agent.state["interlude.mcp"] = {"started_by": name}``, in the very save that creates the
session (:class:`Starting` adds it), so a run cut short before its first pause still names
its owner. No client writes agent state (this door, AG-UI and A2A never apply a client's), so
the mark is the server's word. A prompt to a session whose mark names someone else, or that has
none (started through another door), is refused; answering its questions is not a prompt and
stays the floor's to decide.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from .._messages import JsonValue
    from ..sessions import InboxStore, SessionUpdate, StoredSession

__all__ = ["OWNER_KEY", "Starting", "mark", "owner_of", "starting"]

OWNER_KEY = "interlude.mcp"
"""The key of the door's mark in a session's agent state (the agent's code leaves it be)."""


def mark(by: str) -> dict[str, JsonValue]:
    """What a session keeps under ``OWNER_KEY`` once ``by`` started it through this door."""
    return {"started_by": by}


def owner_of(state: Mapping[str, Any]) -> str | None:
    """Who started the session of agent state ``state`` through this door (None: no one)."""
    recorded = state.get(OWNER_KEY)
    who = recorded.get("started_by") if isinstance(recorded, Mapping) else None
    return who if isinstance(who, str) else None


class Starting:
    """``store`` as the agent of a session this door starts saves to it: the save that
    creates session ``session_id`` (version 0: a run's first saves keep no agent state
    otherwise), and each of its saves that sets the agent state, carry ``by``'s mark in it, in
    the same write. Every other save, and everything else, is ``store``'s own (a
    ``SessionStore``, an ``InboxStore`` when ``store`` is one)."""

    def __init__(self, store: InboxStore, session_id: str, by: str) -> None:
        self.store = store
        self.session_id = session_id
        self.mark = mark(by)

    def __getattr__(self, name: str) -> Any:  # what a run never changes (close, fork, ...)
        return getattr(self.store, name)

    async def save(self, session_id: str, update: SessionUpdate) -> int:
        if session_id == self.session_id and (
            update.state is not None or update.expected_version == 0
        ):
            state = {**(update.state or {}), OWNER_KEY: self.mark}
            update = dataclasses.replace(update, state=state)
        return await self.store.save(session_id, update)

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


class _StartingClaims(Starting):
    """:class:`Starting` of a store that keeps call claims (``CallClaims``)."""

    async def claim_call(self, key: str, session_id: str, *, origin: str) -> Any:
        return await cast(Any, self.store).claim_call(key, session_id, origin=origin)


def starting(store: InboxStore, session_id: str, by: str) -> Starting:
    """The :class:`Starting` view of ``store``, meeting the protocols ``store`` meets."""
    from ..sessions import CallClaims

    claims = isinstance(store, CallClaims)
    return (_StartingClaims if claims else Starting)(store, session_id, by)
