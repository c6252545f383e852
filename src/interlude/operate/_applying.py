"""The store as the agent a worker resumes sees it: the save that applies a recorded answer
removes it from the store's answer queue in the same commit.

A worker reads a session's recorded answers, then resumes the agent with them. The resume's
first save records each answer in the audit trail; that save, and only that one, carries the
answers' seqs (``SessionUpdate.applied_answers``), so a store error, a crash or a lost race
before it leaves the answers recorded for the next try, and once it lands they are gone.

A graph or swarm (``interlude.multiagent``) records no audit entries of its own: its answers
are given to its node agents (under the node agents' own ids) or to its node hooks. For one,
the worker sets :attr:`ApplyingStore.graph` to its session id, and an answer counts as applied
by the first save of the graph's record that no longer lists its question as pending.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._messages import JsonValue
    from ..sessions import InboxStore, RecordedAnswer, SessionUpdate, StoredSession

__all__ = ["ApplyingStore"]


class ApplyingStore:
    """``store`` for one session's resume with ``recorded`` answers (a ``SessionStore``).
    ``applied`` holds the seqs removed by a save that landed."""

    def __init__(self, store: InboxStore, recorded: list[RecordedAnswer]) -> None:
        self.store = store
        self.waiting = list(recorded)
        self.applied: set[int] = set()
        self.graph: str | None = None
        """The session id of the graph being resumed (None: an agent's session)."""

    async def load(self, session_id: str) -> StoredSession | None:
        return await self.store.load(session_id)

    async def save(self, session_id: str, update: SessionUpdate) -> int:
        seqs = self._applied_by(update.audit)
        if session_id == self.graph and update.pending is not None:
            seqs += self._settled_by(update.pending, seqs)
        if seqs:
            update = dataclasses.replace(update, applied_answers=[*update.applied_answers, *seqs])
        version = await self.store.save(session_id, update)
        self.applied.update(seqs)
        self.waiting = [r for r in self.waiting if r.seq not in self.applied]
        return version

    def _applied_by(self, audit: list[dict[str, JsonValue]]) -> list[int]:
        """The seqs of the waiting answers that these audit entries record as given."""
        given = {
            (e.get("interrupt_id"), e.get("by"))
            for e in audit
            if isinstance(e, dict) and not e.get("expired")
        }
        return [r.seq for r in self.waiting if (r.interrupt_id, r.by) in given]

    def _settled_by(self, pending: list[dict[str, JsonValue]], taken: list[int]) -> list[int]:
        """The seqs of the waiting answers whose question the graph no longer waits on."""
        still = {p.get("id") for p in pending if isinstance(p, dict)}
        return [r.seq for r in self.waiting if r.interrupt_id not in still and r.seq not in taken]

    async def audit_trail(self, session_id: str) -> list[dict[str, JsonValue]]:
        return await self.store.audit_trail(session_id)

    async def list_sessions(self) -> list[str]:
        return await self.store.list_sessions()

    async def delete(self, session_id: str) -> None:
        await self.store.delete(session_id)
