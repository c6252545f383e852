"""Moving a paused run to another store or engine (``interlude move``, :func:`move_async`).

A session paused on questions (or stopped between steps) leaves one place and carries on in
another under the same id, with nothing done twice: its conversation, journal (the pause),
state, audit trail and signatures travel as ``export_state()`` data. Four steps:

1. **take out**: the source freezes the session (a store saves a claim naming the target, with
   no lease: no run or answer applies meanwhile, and a mover that dies leaves it frozen, never
   open in two places, until the move is run again; a workflow leaves through its ``move_out``
   Update or message) and gives
   its state with a ``moved`` audit entry appended (``interlude._agent.MOVED``);
2. **put in**: the target creates the session from it (a store in one save; an identical
   session there already is success, and so is one the same session left earlier by a move,
   its trail a prefix of the one coming back: it is rewound to it in one save);
3. **close**: the source drops the pause and keeps the ``moved`` entry (one save,
   compare-and-swap on the frozen version): an answer sent there is refused with
   SessionMovedError naming the target;
4. on a failure in 2, the source is released as it was (a store), or the session is put back
   into it (a workflow, which left already: its trail keeps the entry of the move that
   failed).

A place is anything with ``name``, ``take_out`` and ``put_in`` (:class:`Place`): a store
(a URL or a :class:`~interlude.sessions.SessionStore`, as :class:`StorePlace`), or an engine's
adapter (``interlude.temporal.TemporalPlace``, ``interlude.dbos.DbosPlace``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._messages import JsonValue
from .._sync import run_sync
from ..errors import (
    AgentBusyError,
    ConfigurationError,
    NotPausedError,
    SessionConflictError,
    SessionError,
    SessionMovedError,
)

if TYPE_CHECKING:
    from ..sessions import SessionStore, StoredSession
    from ._app import App

__all__ = ["Moved", "Place", "StorePlace", "Taken", "move", "move_async"]


async def _nothing() -> None:
    return None


@dataclass(frozen=True, slots=True)
class Taken:
    """A session taken out of its place: its state (``export_state()`` data, the ``moved``
    entry last in its trail, its pause), ``close`` (the source keeps the run no more) and
    ``release`` (the move failed: the source as it was)."""

    state: dict[str, JsonValue]
    close: Callable[[], Awaitable[None]] = _nothing
    release: Callable[[], Awaitable[None]] = _nothing


@runtime_checkable
class Place(Protocol):
    """Where a session can be moved from and to."""

    name: str
    """How it is named where the session went (the ``moved`` entry, the refusals)."""

    async def take_out(self, session_id: str, *, to: str, by: str, app: App | None) -> Taken:
        """Freeze the session (paused or stopped, nothing in flight) and give its state with
        the ``moved`` entry appended (``interlude._agent.moved_entry``)."""
        ...

    async def put_in(self, session_id: str, state: dict[str, JsonValue]) -> None:
        """Create the session from ``state`` (idempotent: the same session there is success)."""
        ...


@dataclass(frozen=True, slots=True)
class Moved:
    """A move done: the session, where from, where to, the questions that wait there."""

    session_id: str
    source: str
    target: str
    interrupts: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "session": self.session_id,
            "from": self.source,
            "to": self.target,
            "interrupts": list(self.interrupts),
        }


async def move_async(
    session_id: str,
    *,
    source: Place | SessionStore | str,
    target: Place | SessionStore | str,
    app: App | None = None,
    by: str | None = None,
) -> Moved:
    """Move session ``session_id``, paused (or stopped between steps), from ``source`` to
    ``target``: each a store URL, a store, or a :class:`Place` (``TemporalPlace``,
    ``DbosPlace``). It is answered and carried on there from then on; the source refuses
    answers with SessionMovedError naming ``target``. ``app`` builds the session's agent for
    its signing key (needed for a signed session leaving a store); ``by`` is who moves it
    (audit trail).

    Refused, nothing changed: a session running now (AgentBusyError), with no pause
    (NotPausedError), moved away already (SessionMovedError), with answers recorded and not
    yet applied, or one the target holds already (SessionConflictError)."""
    from .._agent import check_by

    src, dst = place(source), place(target)
    if src.name == dst.name:
        raise ConfigurationError(f"the source and the target are the same place ({src.name})")
    who = check_by(by) if by is not None else "unknown"
    taken = await src.take_out(session_id, to=dst.name, by=who, app=app)
    try:
        await dst.put_in(session_id, taken.state)
    except BaseException:
        if taken.release is _nothing:  # a workflow that left already: back where it was
            await src.put_in(session_id, taken.state)
        else:
            await taken.release()
        raise
    await taken.close()
    pause = taken.state.get("pause")
    asked = pause.get("interrupts") if isinstance(pause, dict) else None
    ids = (
        [str(q.get("id")) for q in asked if isinstance(q, dict)] if isinstance(asked, list) else []
    )
    return Moved(session_id, src.name, dst.name, ids)


def move(
    session_id: str,
    *,
    source: Place | SessionStore | str,
    target: Place | SessionStore | str,
    app: App | None = None,
    by: str | None = None,
) -> Moved:
    """:func:`move_async`, from sync code."""
    return run_sync(move_async(session_id, source=source, target=target, app=app, by=by))


def place(where: Place | SessionStore | str) -> Place:
    """``where`` as a :class:`Place`: a store URL or a store as a :class:`StorePlace`."""
    if isinstance(where, Place):
        return where
    if isinstance(where, str):
        if where.startswith(("temporal", "dbos:")):
            raise ConfigurationError(
                f"{where!r} is an engine, not a store: give its place (e.g. "
                "interlude.temporal.TemporalPlace(client), interlude.dbos.DbosPlace(url)); the "
                "command line takes it as --to"
            )
        from ..sessions import open_store

        return StorePlace(open_store(where), name=where)
    return StorePlace(where)


class StorePlace:
    """A session store as a place to move sessions from and to (``name``: its URL, else the
    store's own ``url`` or its class)."""

    def __init__(self, store: SessionStore, *, name: str | None = None) -> None:
        self.store = store
        self.name = name or str(getattr(store, "url", None) or type(store).__name__)

    def __repr__(self) -> str:
        return f"StorePlace({self.name!r})"

    async def take_out(self, session_id: str, *, to: str, by: str, app: App | None) -> Taken:
        import time

        from .._agent import FORMAT, moved_claim, moved_entry, moving_claim

        stored = await self._movable(session_id, to)
        audit = list(stored.audit)
        again = stored.claim.get("entry") if isinstance(stored.claim, dict) else None
        if isinstance(again, dict):  # frozen by this move before, cut short: the same entry
            entry = again
        else:
            entry = moved_entry(  # (before the freeze: a refusal here leaves nothing to undo)
                audit,
                key=self._key(stored, app),
                session_id=session_id,
                source=self.name,
                target=to,
                by=by,
                at=time.time(),
                pause=stored.pause,
            )
        claim = moving_claim(to, time.time(), entry)
        frozen = await self._save(stored, stored.version, claim=claim)
        try:
            await self._check_queue(session_id)
        except BaseException:
            await self._save(stored, frozen)
            raise
        state: dict[str, JsonValue] = {
            "format": FORMAT,
            "version": stored.format_version,
            "messages": list(stored.messages),
            "state": dict(stored.state),
            "pause": _pause_of(stored),
            "tools": list(stored.tools),
            "agent": stored.agent,
            "audit": [*audit, entry],
        }

        async def close() -> None:
            await self._save(stored, frozen, claim=moved_claim(to, time.time()), closed=entry)

        async def release() -> None:
            await self._save(stored, frozen)

        return Taken(state, close, release)

    async def _movable(self, session_id: str, to: str) -> StoredSession:
        """The session as stored, if it can move now to ``to``; else the error saying why not.
        One frozen by a move to ``to`` that did not finish can: the move run again ends it."""
        from .._agent import moved_to, moving_error, moving_to
        from ..sessions import claim_is_live, describe_claim, split_marker
        from ._sessions import is_graph

        stored = await self.store.load(session_id)
        if stored is None:
            raise SessionError(f"there is no session {session_id!r} in {self.name}")
        went = moved_to(stored.claim)
        if went is not None:
            raise SessionMovedError(
                f"session {session_id!r} was moved to {went} already", target=went
            )
        going = moving_to(stored.claim)
        if going is not None and going != to:
            raise moving_error(session_id, going)
        pause, marker = split_marker(stored.pause)
        claim = stored.claim if marker is None else marker
        if going is None and claim is not None and claim_is_live(claim):
            raise AgentBusyError(
                f"session {session_id!r} is being run ({describe_claim(claim)}): move it once "
                "it pauses; nothing was changed"
            )
        if is_graph(stored):
            raise ConfigurationError(
                f"session {session_id!r} is a graph's or swarm's: moving those is not built yet"
            )
        if pause is None:
            raise NotPausedError(
                f"session {session_id!r} is neither paused nor stopped between steps: there is "
                "no run to move (start a new one where you want it)"
            )
        await self._check_queue(session_id)
        return stored

    async def _check_queue(self, session_id: str) -> None:
        recorded = getattr(self.store, "recorded_answers", None)
        if recorded is None:
            return
        waiting = await recorded(session_id)
        if waiting:
            raise SessionConflictError(
                f"session {session_id!r} has {len(waiting)} answer(s) recorded and not yet "
                "applied: let a worker apply them first (then move it if it pauses again)"
            )

    def _key(self, stored: StoredSession, app: App | None) -> bytes | None:
        """The agent's signing key, when ``app`` builds it (None: no app, or no key)."""
        if app is None or stored.agent is None or stored.agent not in app.names:
            return None
        agent = app._build(stored.agent, stored.session_id, self.store)
        key: bytes | None = agent.spec.signing_key
        return key

    async def _save(
        self,
        stored: StoredSession,
        version: int,
        *,
        claim: dict[str, Any] | None = None,
        closed: dict[str, JsonValue] | None = None,
    ) -> int:
        """Save ``stored`` again at ``version``: frozen (``claim``), released (neither) or
        closed (``closed``: the ``moved`` entry, the pause dropped; ``claim``: where it went)."""
        from ..sessions import SessionUpdate

        update = SessionUpdate(
            expected_version=version,
            first_index=len(stored.messages),
            new_messages=[],
            pause=None if closed is not None else stored.pause,
            pending=[] if closed is not None else None,
            tools=list(stored.tools),
            format_version=stored.format_version,
            claim=claim,
            agent=stored.agent,
            audit=[] if closed is None else [closed],
        )
        return await self.store.save(stored.session_id, update)

    async def put_in(self, session_id: str, state: dict[str, JsonValue]) -> None:
        from ..sessions import check_session_id, fork_update

        check_session_id(session_id)
        messages = state.get("messages")
        kept = list(messages) if isinstance(messages, list) else []
        update = replace(fork_update(state, 0), new_messages=kept)
        existing = await self.store.load(session_id)
        if existing is None:
            await self.store.save(session_id, update)
            return
        audit = update.audit
        if (
            list(existing.messages) == kept
            and list(existing.audit) == audit
            and _pause_of(existing) == update.pause
        ):
            return  # put in already (a move that stopped before closing its source)
        before = list(existing.audit)
        rewind = getattr(self.store, "rewind", None)
        if _left_by_move(existing) and audit[: len(before)] == before and rewind is not None:
            back = replace(update, expected_version=existing.version, audit=audit[len(before) :])
            await rewind(session_id, back)  # coming back where it was moved away from
            return
        raise SessionConflictError(
            f"{self.name} holds a session {session_id!r} already: move into another store, or "
            "delete that session first"
        )


def _pause_of(stored: StoredSession) -> dict[str, JsonValue] | None:
    from ..sessions import split_marker

    pause, _ = split_marker(stored.pause)
    return pause


def _left_by_move(stored: StoredSession) -> bool:
    """Whether ``stored`` is what a move away left (its claim names where it went)."""
    from .._agent import moved_to

    return moved_to(stored.claim) is not None
