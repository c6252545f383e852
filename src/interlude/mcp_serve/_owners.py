"""Who started a session through this door: only they may prompt it here.

A session this door starts records its caller's name in the session's agent state,
``agent.state["interlude.mcp"] = {"started_by": name}``, in the very save that creates the
session (:func:`starting` adds it), so a run cut short before its first pause still names
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
    from ..sessions import InboxStore, SessionUpdate

__all__ = ["OWNER_KEY", "mark", "owner_of", "starting"]

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


def starting(store: InboxStore, session_id: str, by: str) -> InboxStore:
    """``store`` as the agent of a session this door starts saves to it: the save that
    creates session ``session_id`` (version 0: a run's first saves keep no agent state
    otherwise), and each of its saves that sets the agent state, carry ``by``'s mark in it, in
    the same write (``sessions.amended``); every other save is ``store``'s own."""
    from ..sessions import amended

    owner = mark(by)

    def amend(saved: str, update: SessionUpdate) -> SessionUpdate:
        if saved == session_id and (update.state is not None or update.expected_version == 0):
            update = dataclasses.replace(update, state={**(update.state or {}), OWNER_KEY: owner})
        return update

    return cast("InboxStore", amended(store, amend))
