"""Whose session a stored session is: an agent's, a graph's or swarm's (its record), or a
node agent's inside a graph (``<graph>:node:<node>``). The one place that tells them apart;
the rest of the floor works on :class:`~interlude.operate.Resumable` values."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..sessions import SessionStore, StoredSession

__all__ = ["is_graph", "owner_of"]

NODE = ":node:"
"""What a node agent's session id holds between its graph's id and its node's name."""


def is_graph(stored: StoredSession) -> bool:
    """Whether a stored session is a graph's or swarm's own (its record, no messages)."""
    if not isinstance(stored.state, dict) or "interlude.orchestration" not in stored.state:
        return False  # the usual case: interlude.multiagent is not imported for it
    from ..multiagent import is_orchestration

    return is_orchestration(stored)


async def owner_of(store: SessionStore, session_id: str) -> str:
    """The session carried on for ``session_id``: its outermost graph's for a node agent's
    session (never carried on by itself), else the session itself."""
    if NODE not in session_id:
        return session_id
    from ..multiagent import graph_of

    return await graph_of(store, session_id) or session_id
