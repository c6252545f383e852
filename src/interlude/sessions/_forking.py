"""The ``fork`` operation of the stores: a new session that begins as a copy of part of
another (see ``Agent.fork``).

``fork(session_id, new_session_id, update)`` makes session ``new_session_id`` from the first
``update.first_index`` messages of session ``session_id`` followed by ``update.new_messages``,
with the rest of ``update`` (pause, state, tools, audit, agent) as its own; the source session
is not changed. SessionError if there is no source session or it holds fewer messages;
SessionConflictError if ``new_session_id`` exists. Every shipped store forks by reading the
source and writing the new session in one save (its messages are copied: no store shares
rows or files between sessions, so a later change to either never shows in the other).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..errors import SessionConflictError, SessionError
from ._protocol import SessionUpdate, check_session_id

if TYPE_CHECKING:
    from .._messages import JsonValue
    from ._protocol import SessionStore

__all__ = ["fork_by_copy", "fork_update"]


def fork_update(encoded: dict[str, JsonValue], kept: int) -> SessionUpdate:
    """The update that makes a fork from ``export_state()``-shaped data ``encoded`` whose
    first ``kept`` messages are the source session's."""
    pause = encoded.get("pause")
    questions = pause.get("interrupts") if isinstance(pause, dict) else None
    state = encoded.get("state")
    tools = encoded.get("tools")
    audit = encoded.get("audit")
    agent = encoded.get("agent")
    version = encoded.get("version")
    return SessionUpdate(
        expected_version=0,
        first_index=kept,
        new_messages=[],
        pause=pause if isinstance(pause, dict) else None,
        pending=[q for q in questions if isinstance(q, dict)]
        if isinstance(questions, list)
        else [],
        tools=[t for t in tools if isinstance(t, str)] if isinstance(tools, list) else [],
        format_version=version if isinstance(version, int) else 0,
        state=state if isinstance(state, dict) else {},
        agent=agent if isinstance(agent, str) else None,
        audit=[a for a in audit if isinstance(a, dict)] if isinstance(audit, list) else [],
    )


async def fork_by_copy(
    store: SessionStore, session_id: str, new_session_id: str, update: SessionUpdate
) -> int:
    """``fork`` by a load of the source and one save of the new session; its version."""
    check_session_id(new_session_id)
    source = await store.load(session_id)
    if source is None:
        raise SessionError(f"no session {session_id!r} to fork")
    if update.first_index > len(source.messages):
        raise SessionError(
            f"session {session_id!r} holds {len(source.messages)} messages; a fork cannot "
            f"keep {update.first_index}"
        )
    if await store.load(new_session_id) is not None:
        raise SessionConflictError(f"session {new_session_id!r} exists: fork under a new id")
    kept = list(source.messages[: update.first_index])
    made = replace(
        update, expected_version=0, first_index=0, new_messages=kept + update.new_messages
    )
    return await store.save(new_session_id, made)
