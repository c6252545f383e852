"""A session moved to another store or engine (``interlude move``): the audit entry that says
so, and the refusal the place it left gives to an answer or a prompt.

A move appends one entry named ``moved`` (``{"from", "to"}``) to the session's trail, chained
as every entry is (signed with the agent's key where the trail is signed), and the same entry
travels with the session: the place it went to holds the trail and the pause, the store it
left holds the trail up to it with no pause and, in the run-claim slot, a claim that never
holds a run (``{"moved_to"}``, no lease): that claim is what refuses answers and prompts
there, with where the run went."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._audit import AuditEntry, chained
from ..errors import SessionMovedError, StateFormatError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._messages import JsonValue
    from ._agent import Agent

__all__ = [
    "MOVED",
    "check_not_moved",
    "mark_moved",
    "moved_claim",
    "moved_entry",
    "moved_error",
    "moved_to",
    "moving_claim",
    "moving_error",
    "moving_to",
]

MOVED = "moved"
"""The name of the audit entry a move appends."""


def moved_entry(
    trail: Sequence[dict[str, JsonValue]],
    *,
    key: bytes | None,
    session_id: str,
    source: str,
    target: str,
    by: str,
    at: float,
    pause: object = None,
) -> dict[str, JsonValue]:
    """The ``moved`` entry to append to ``trail`` (``export_state()["audit"]``), linked to its
    last entry (signed with ``key`` if given). StateFormatError for a signed trail or a signed
    ``pause`` and no key: an unsigned link would break the trail, or leave it unsigned."""
    from ._signing import SIGNATURE  # (its imports are not light: on first use)

    last = AuditEntry.from_dict(trail[-1], "audit[-1]") if trail else None
    signed = last is not None and (last.chain or "").startswith("hmac-")
    if key is None and (signed or (isinstance(pause, dict) and SIGNATURE in pause)):
        raise StateFormatError(
            f"session {session_id!r} has a signed audit trail: the move needs the agent's "
            "signing key to sign its entry (give the App that builds it: app=, --app)"
        )
    answer: dict[str, JsonValue] = {"from": source, "to": target}
    entry = AuditEntry(interrupt_id="", name=MOVED, answer=answer, by=by, at=at, shown="")
    return chained([] if last is None else [last], [entry], key, session_id)[0].to_dict()


def moved_claim(target: str, at: float) -> dict[str, JsonValue]:
    """The run claim a store's session keeps once moved away: it names where the run went
    and never holds a run (it has no lease: no worker takes it for a dead run's)."""
    return {"moved_to": target, "at": at}


def moving_claim(target: str, at: float, entry: JsonValue) -> dict[str, JsonValue]:
    """The run claim that freezes a store's session while a move takes it out: it names where
    the session is going and the ``moved`` entry the move gave it (the move run again gives
    the same), holds no run and has no lease (it never lapses: a mover that dies leaves the
    session frozen, not open in two places; the move run again finishes it)."""
    return {"moving_to": target, "at": at, "entry": entry}


def moving_to(claim: object) -> str | None:
    """Where the session is being moved, when its stored run claim freezes it for a move."""
    if isinstance(claim, dict):
        target = claim.get("moving_to")
        if isinstance(target, str):
            return target
    return None


def moved_to(claim: object) -> str | None:
    """Where the session went, when its stored run claim says it was moved away."""
    if isinstance(claim, dict):
        target = claim.get("moved_to")
        if isinstance(target, str):
            return target
    return None


def moved_error(session_id: str | None, target: str) -> SessionMovedError:
    return SessionMovedError(
        f"session {session_id!r} was moved to {target}: answer it there; nothing was changed here",
        target=target,
    )


def check_not_moved(agent: Agent) -> None:
    """SessionMovedError when ``agent``'s session was moved away (its stored claim says so)."""
    link = agent._session
    target = None if link is None else moved_to(link.claim)
    if target is not None:
        raise moved_error(agent.session_id, target)
    going = None if link is None else moving_to(link.claim)
    if going is not None:
        raise moving_error(agent.session_id, going)


def moving_error(session_id: str | None, target: str) -> SessionMovedError:
    return SessionMovedError(
        f"session {session_id!r} is being moved to {target}: answer it there once the move "
        "ends (a move cut short is finished by running it again); nothing was changed here",
        target=target,
    )


def mark_moved(
    agent: Agent, *, session_id: str, source: str, target: str, by: str
) -> dict[str, JsonValue]:
    """Close ``agent`` (a workflow's, its run paused or stopped) as moved to ``target``: the
    ``moved`` entry appended to its trail, its pause dropped (kept in what is returned).
    Returns its ``export_state()`` with the entry and the pause, for the new place."""
    exported = agent.export_state()
    audit = exported.get("audit")
    trail = [e for e in audit if isinstance(e, dict)] if isinstance(audit, list) else []
    entry = moved_entry(
        trail,
        key=agent._key,
        session_id=session_id,
        source=source,
        target=target,
        by=by,
        at=agent.clock(),
    )
    exported["audit"] = [*trail, entry]
    state = agent._state
    linked = AuditEntry.from_dict(entry)
    agent._commit(state.but(audit=(*state.audit, linked)).at(None))
    return exported
