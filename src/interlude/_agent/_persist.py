"""An agent's link to its session in a store: load once, then save as the run goes.

Every save is a compare-and-swap on the session's version. A run's first save is its *claim*
(its own field in the stored session: who runs it, until when), made before anything outside
the loop happens, so when two processes resume the same pause exactly one proceeds; the other
gets SessionConflictError with nothing run.

While a run goes, the stored pause slot holds its journal (where it stands: a pause with no
questions), and the claim is renewed every third of the lease, also during a long tool or model
call, so a live run is never taken over. A claim whose lease ran out, or whose process is gone
(known at once on the same machine), belongs to a run that stopped: ``recover`` carries it on.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from functools import partial
from typing import TYPE_CHECKING, Any

from ..errors import SessionConflictError, SessionCorruptError, SessionError, StateFormatError
from ..sessions import (
    Renewer,
    claim_is_live,
    describe_claim,
    journal_update,
    new_claim,
    split_marker,
)
from ._codec import VERSION, encode_pause
from ._signing import NO_MESSAGES, chain
from ._standing import Conversation, check_reserved

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._audit import AuditEntry
    from .._interrupt import Interrupt
    from .._messages import JsonValue, Message
    from ..sessions import RecordedAnswer, SessionStore, SessionUpdate, StoredSession
    from ._codec import Decoded
    from ._loop import Run
    from ._standing import AgentState, Identity
    from ._state import Position

__all__ = ["SessionLink"]


class SessionLink:
    """Where an agent's state lives, how much of it is stored, and the claim of a run."""

    __slots__ = (
        "_calls",
        "_chain",
        "_chained",
        "_held",
        "_holding",
        "_inline",
        "_last",
        "_lock",
        "_no_pending",
        "_pending_chain",
        "_renewer",
        "_store",
        "agent_name",
        "audit_saved",
        "claim",
        "lease",
        "legacy_resumed",
        "list_pending",
        "queued",
        "saved",
        "session_id",
        "version",
    )

    def __init__(
        self, store: SessionStore | str, session_id: str, lease: float, *, list_pending: bool = True
    ) -> None:
        from ..sessions import check_session_id

        self._store = store  # a store's URL is opened at first use (opening one is I/O)
        self.session_id = check_session_id(session_id)
        self.lease = lease
        self.list_pending = list_pending  # False: the questions stay out of the pending index
        self.version = 0
        self.saved = 0  # messages already stored
        self.claim: dict[str, Any] | None = None  # the stored claim, as last seen
        self.legacy_resumed: Position | None = None  # a pre-journal run marker's pause
        self.agent_name: str | None = None  # the agent name stored with the session
        self.queued: list[RecordedAnswer] | None = None  # the answer queue read with the load
        self.audit_saved = 0  # audit entries already stored
        self._last: object = None  # the pause slot as last saved
        self._chain = NO_MESSAGES  # the digest of the first _chained saved messages (signing)
        self._chained = 0
        self._pending_chain: str | None = None  # the digest once the save in progress lands
        self._held: dict[str, JsonValue] | None = None  # this process's claim, while it runs
        self._holding = False  # whether the stored claim is this run's
        self._inline: bool | None = None  # known once the store is open
        self._calls: bool | None = None  # whether the store keeps call claims (once open)
        self._no_pending = False  # whether this link's last save left the pending index empty
        self._lock: asyncio.Lock | None = None
        self._renewer: Renewer | None = None

    @property
    def store(self) -> SessionStore:
        """The store (opened from its URL at first use)."""
        store = self._store
        if isinstance(store, str):  # sqlite:///..., file:///..., postgresql://...
            from ..sessions import open_store

            store = self._store = open_store(store)
        return store

    @property
    def claims_calls(self) -> bool:
        """Whether the store keeps claims on the tool calls forks share (``CallClaims``)."""
        calls = self._calls
        if calls is None:
            from ..sessions import CallClaims

            calls = self._calls = isinstance(self.store, CallClaims)
        return calls

    async def read(self) -> StoredSession | None:
        """The stored session as the store holds it (None: there is none)."""
        try:
            return await self.store.load(self.session_id)
        except RecursionError:  # JSON nested deeper than any saved state is
            raise SessionCorruptError(
                f"session {self.session_id!r}: stored data is nested too deeply to read"
            ) from None

    def decode(
        self, stored: StoredSession | None, key: bytes | None = None, name: str | None = None
    ) -> Decoded | None:
        """The stored session, decoded (nothing is kept on error), or None if there is none.
        With a signing ``key``, its pause must be signed with it (StateIntegrityError)."""
        from ._codec import decode_pause, decode_stored

        if stored is None:
            return None
        pause, marker = split_marker(stored.pause)
        claim = getattr(stored, "claim", None)
        legacy = None
        if marker is not None:  # written before the journal: a run marker in the pause slot
            since = marker.get("since")
            since = since if isinstance(since, int | float) else 0.0
            claim = {"owner": marker.get("owner"), "since": since, "expires_at": since + 600.0}
            legacy = marker.get("resumed")
        loaded = decode_stored(stored, key, name)
        if key is not None and legacy is not None:  # a marker's pause is signed like any
            from ._signing import verify

            digest = chain(NO_MESSAGES, stored.messages)
            verify(legacy, key, name, digest, "the stopped run's pause (pause.running.resumed)")
        try:
            _check_conversation(loaded.state)
            if isinstance(legacy, dict):
                self.legacy_resumed = decode_pause(legacy, "pause.running.resumed")
        except StateFormatError as exc:
            raise SessionCorruptError(f"session {self.session_id!r}: {exc}") from None
        if claim is not None and not isinstance(claim, dict):
            raise SessionCorruptError(f"session {self.session_id!r}: claim is {claim!r}")
        self.claim = claim
        self.agent_name = getattr(stored, "agent", None)
        self.queued = getattr(stored, "answers", None)  # (None: the store did not read it)
        self.version = stored.version
        self.saved = len(loaded.messages)
        self.audit_saved = len(loaded.audit)
        self._last = pause
        return loaded

    def check_not_running(self) -> None:
        """SessionConflictError if another process's run holds the session (a live claim)."""
        claim = self.claim
        if claim is not None and claim_is_live(claim):
            expires = claim.get("expires_at")
            left = expires - time.time() if isinstance(expires, int | float) else self.lease
            raise SessionConflictError(
                f"session {self.session_id!r} is being run by {describe_claim(claim)}; wait for "
                f"it to finish, or if that process died, for its claim to run out (in "
                f"{max(left, 0):.0f} s)"
            )

    def claim_for(self, run: Run) -> None:
        """Ready the session's claim for ``run`` and keep it live while the run goes.

        The claim is stored by the run's first save, its first checkpoint: the loop saves one
        before anything outside it happens (a hook, a model call, a tool), so of two processes
        starting runs on one session, one's claim lands first and the other gets
        SessionConflictError before it has done anything."""
        self._lock = asyncio.Lock()
        self._held = None
        self._holding = False
        self._renewer = Renewer(self.lease, partial(self._renew, run))
        self._renewer.start()

    @property
    def lost(self) -> SessionConflictError | None:
        """Set when a renewal found that another process took the session over."""
        return None if self._renewer is None else self._renewer.lost

    async def _renew(self, run: Run) -> None:
        self._held = None  # a fresh claim: its lease counts from now
        run.commit()  # the journal's step with the conversation it is about
        await self.save(run.identity, run.agent._state, run.position(), hold=True)

    async def stop_renewing(self) -> None:
        if self._renewer is not None:
            await self._renewer.stop()

    async def save(
        self,
        who: Identity,
        state: AgentState,
        position: Position | None,
        *,
        data: bool = False,
        hold: bool = False,
        if_changed: bool = False,
        starts: list[str] | None = None,
    ) -> None:
        """Store ``state``'s messages appended since the last save, ``position`` (a pause, a
        run's journal or none), its data if asked, and the claim: kept and renewed when
        ``hold``, let go otherwise. With ``if_changed``, a save that would store nothing new
        is skipped. ``who`` names (and signs for) the agent saving.

        The store's save is shielded: if the run is cancelled meanwhile, the save still
        completes and is recorded here before the cancellation goes on, so the agent never
        loses track of what the store holds."""
        if not hold:
            await self.stop_renewing()
        lock = self._lock
        async with lock if lock is not None else contextlib.nullcontext():
            await self._save(who, state, position, data, hold, if_changed, starts)

    async def rewind(self, who: Identity, state: AgentState, position: Position | None) -> None:
        """Store ``state`` whose conversation an undo cut short of the stored one: one save
        that cuts the stored conversation to its messages (the store's ``rewind``), with the
        pause slot, agent.state, the audit entries since the last save, and the claim kept.
        ConfigurationError if the store cannot rewind."""
        from ..errors import ConfigurationError

        store = self.store
        rewind = getattr(store, "rewind", None)
        if rewind is None:
            raise ConfigurationError(
                f"{type(store).__name__} cannot cut a session's conversation back (it has no "
                "rewind()): undo needs a store that can (every shipped store can)"
            )
        lock = self._lock
        async with lock if lock is not None else contextlib.nullcontext():
            messages = list(state.messages)
            count = len(messages)
            digest = None
            if who.key is not None:
                digest = chain(NO_MESSAGES, [m.to_dict() for m in messages])
            encoded = (
                None if position is None else encode_pause(position, who.key, who.name, digest)
            )
            claim = self._next_claim(True)
            questions = [] if position is None or not self.list_pending else position.interrupts
            saved = self.saved
            self.saved = count  # the update appends nothing: it starts where the cut ends
            try:
                update = self._update(
                    who, [], encoded, questions, _json_state(state), claim, state.audit
                )
            finally:
                self.saved = saved
            self._pending_chain = digest
            saving = asyncio.ensure_future(rewind(self.session_id, update))
            noted = partial(
                self._saved,
                count=count,
                encoded=encoded,
                claim=claim,
                questions=bool(questions),
                agent_name=update.agent,
                audited=len(state.audit),
            )
            try:
                version = await asyncio.shield(saving)
            except asyncio.CancelledError:
                noted(await saving)  # it lands: note it, then let the cancel go on
                raise
            noted(version)

    async def _save(
        self,
        who: Identity,
        state: AgentState,
        pause: Position | None,
        data: bool,
        hold: bool,
        if_changed: bool,
        starts: list[str] | None = None,
    ) -> None:
        unsaveable: StateFormatError | None = None
        saved_state = None
        if data:
            try:
                saved_state = _json_state(state)
            except StateFormatError as exc:
                # The rest is saved and the claim let go (so the session is not left held by
                # a run that ends here), then the run fails saying why the state was not kept.
                unsaveable, hold = exc, False
                await self.stop_renewing()
        messages = state.messages
        items: Sequence[Message]
        if type(messages) is Conversation:  # a run's own list: read it directly
            items, count = messages._items, messages._n
        else:
            items, count = messages, len(messages)
        if count < self.saved:
            raise SessionError(
                f"session {self.session_id!r}: messages were removed from agent.messages; a "
                "session's conversation is append-only"
            )
        new_messages = [m.to_dict() for m in items[self.saved : count]]
        digest = None if who.key is None else self._digest(items, new_messages)
        encoded = None if pause is None else encode_pause(pause, who.key, who.name, digest)
        audit = state.audit
        unchanged = if_changed and not data and self._holding and count == self.saved
        if unchanged and encoded == self._last and len(audit) == self.audit_saved:
            return
        claim = self._next_claim(hold)
        questions = [] if pause is None or not self.list_pending else pause.interrupts
        update = self._update(
            who, new_messages, encoded, questions, saved_state, claim, audit, starts
        )
        audited = len(audit)
        self._pending_chain = digest
        if self._inline is None:
            self._inline = _saves_inline(self.store)
        if self._inline:  # runs to its end without suspending: nothing can cut it
            store = self._store  # opened by now (``_saves_inline`` asked for it)
            if isinstance(store, str):
                store = self.store
            version = await store.save(self.session_id, update)
            self._saved(version, count, encoded, claim, bool(questions), update.agent, audited)
        else:
            await self._shielded(update, count, encoded, claim, bool(questions), audited)
        if unsaveable is not None:
            raise unsaveable

    def _update(
        self,
        who: Identity,
        new_messages: list[dict[str, Any]],
        encoded: dict[str, Any] | None,
        questions: Sequence[Interrupt],
        saved_state: dict[str, object] | None,
        claim: dict[str, Any] | None,
        audit: Sequence[AuditEntry],
        starts: list[str] | None = None,
    ) -> SessionUpdate:
        """What a save sends the store: the new messages and audit entries, the pause slot,
        the pending index (when it changes), the agent state if saved, and the claim."""
        # No question then and none now: leave the index alone (a running agent's journal).
        pending = None if not questions and self._no_pending else [i.to_dict() for i in questions]
        return journal_update(  # SessionUpdate(expected_version=..., ...), made faster
            self.version,
            self.saved,
            new_messages,
            encoded,
            pending,
            list(who.tools),
            VERSION,
            saved_state,
            claim,
            who.name if who.name != self.agent_name else None,
            [e.to_dict() for e in audit[self.audit_saved :]],
            starts,
        )

    def _digest(self, items: Sequence[Message], new_messages: list[dict[str, Any]]) -> str:
        """The digest of the conversation a signed pause belongs to: the saved messages'
        chain (computed from the start at this link's first signed save), then the new ones."""
        if self._chained != self.saved:  # first signed save of this link: from the start
            saved = [m.to_dict() for m in items[: self.saved]]
            self._chain, self._chained = chain(NO_MESSAGES, saved), self.saved
        return chain(self._chain, new_messages)

    def _next_claim(self, hold: bool) -> dict[str, Any] | None:
        """The claim a save stores: while ``hold``, the run's own (made anew when the run
        starts and at each renewal); otherwise none, and the run's is let go."""
        if not hold:
            self._held = None
            return None
        if self._held is None:
            self._held = new_claim(self.claim, self.lease)
        return self._held

    async def _shielded(
        self,
        update: SessionUpdate,
        count: int,
        encoded: dict[str, Any] | None,
        claim: dict[str, Any] | None,
        asks: bool,
        audited: int,
    ) -> None:
        """The store's save, shielded from the run's cancellation (see :meth:`save`)."""
        saving = asyncio.ensure_future(self.store.save(self.session_id, update))
        try:
            version = await asyncio.shield(saving)
        except asyncio.CancelledError:
            version = await saving  # let it land, note it, then let the cancel go on
            self._saved(version, count, encoded, claim, asks, update.agent, audited)
            raise
        self._saved(version, count, encoded, claim, asks, update.agent, audited)

    def _saved(
        self,
        version: int,
        count: int,
        encoded: object,
        claim: dict[str, Any] | None,
        questions: bool,
        agent_name: str | None,
        audited: int,
    ) -> None:
        if self._pending_chain is not None:
            self._chain, self._chained = self._pending_chain, count
        self.version, self.saved, self._last, self.claim = version, count, encoded, claim
        self.audit_saved = audited
        if agent_name is not None:
            self.agent_name = agent_name
        self._holding = claim is not None
        self._no_pending = not questions  # the pending index now holds no question


def _saves_inline(store: object) -> bool:
    """Whether the store's ``save`` never suspends (so no cancel can cut it): said by the class
    that defines ``save`` (a subclass that overrides ``save`` must say so again)."""
    for klass in type(store).__mro__:
        if "save" in klass.__dict__:
            return "_saves_inline" in klass.__dict__ and bool(
                object.__getattribute__(store, "_saves_inline")
            )
    return False


# --- claims -----------------------------------------------------------------------------------


def _check_conversation(state: dict[str, JsonValue]) -> None:
    """StateFormatError if the conversation manager's saved state is malformed."""
    from ..conversation import STATE_KEY, ConversationState

    if STATE_KEY in state:
        ConversationState.from_dict(state[STATE_KEY])


def _json_state(state: AgentState) -> dict[str, object]:
    import json

    check_reserved(state.data, StateFormatError)
    try:
        return dict(json.loads(json.dumps(state.saved_data())))
    except (TypeError, ValueError) as exc:
        raise StateFormatError(f"agent.state is not JSON-compatible: {exc}") from None
