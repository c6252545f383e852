"""The session store protocols: what an agent saves, and the small interfaces stores meet.

A store keeps, per session id: the conversation (append-only), the agent state, the pause (or
none), the run claim (or none), the names of the agent's tools, the agent's name (which an
:class:`~interlude.App` maps to the code that builds it), the audit trail of answers
(append-only), an index of pending interrupts, and a version number.
Every save is a compare-and-swap on that version. The JSON pieces are those of
``Agent.export_state()``; stores never interpret them beyond the pending-interrupt index.

The interface comes in three parts. :class:`SessionStore` (the session itself: load, save,
list, delete) is all an agent needs. :class:`AnswerQueue` (answers recorded for workers to
apply) and :class:`PendingIndex` (the questions waiting, across sessions) are what an
:class:`~interlude.Inbox` and a :class:`~interlude.Worker` use besides.
:class:`InboxStore` is all three, as every shipped store provides them.
:class:`NotificationOutbox` (the notifications about a session's questions, waiting to be
delivered or delivered) is a fourth optional part, which every shipped store provides too.

Two operations go beyond the protocols: ``fork`` (a new session from the start of another, see
``interlude.sessions._forking``) and ``rewind``. A store may have them; they are not part of
:class:`SessionStore`, so a third-party store meets it without them (a fork then copies, by
a load and a save, and an undo, which needs ``rewind``, says the store cannot). Every shipped
store has both.

``async rewind(session_id, update) -> int`` is :meth:`SessionStore.save` except that
``update.first_index`` may be below the number of messages stored: the stored conversation is
first cut to its first ``update.first_index`` messages (the rest are deleted), in the same
transaction as the save, which then appends ``update.new_messages`` there. Everything else is
the save's: the compare-and-swap on ``update.expected_version`` (SessionConflictError, nothing
written), the pause, pending index, claim, state, tools and agent, the audit entries appended
(the audit trail is never cut), the applied answers removed, the call claims checked. A
``first_index`` above the number stored is a conflict, as in a save; one equal to it makes the
rewind a save. The session must exist (``expected_version`` at least 1: SessionConflictError,
nothing written). A crash in the middle leaves the session as it was or as rewound.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from .._interrupt import Interrupt
from .._messages import JsonValue
from ..errors import InvalidSessionIdError, SessionConflictError, StateFormatError

__all__ = [
    "AnswerQueue",
    "CallClaims",
    "InboxStore",
    "Notification",
    "NotificationOutbox",
    "NotificationStatus",
    "PendingIndex",
    "PendingInterrupt",
    "PendingQuery",
    "RecordedAnswer",
    "SessionStore",
    "SessionUpdate",
    "StoredSession",
    "audit_json",
    "check_session_id",
    "epoch",
    "no_rewind",
]

_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@:=+-]{0,199}")


def check_session_id(session_id: object) -> str:
    """Return ``session_id`` if it is safe as a file name and a key, else InvalidSessionIdError.

    Allowed: 1-200 characters of letters, digits and ``_ . @ : = + -``, not starting with a dot
    or a dash, so no ``..``, path separators, absolute paths or hidden files.
    """
    if not isinstance(session_id, str) or not _ID.fullmatch(session_id) or ".." in session_id:
        raise InvalidSessionIdError(
            f"invalid session id {session_id!r}: use 1-200 letters, digits or _ . @ : = + - "
            "(not starting with '.' or '-', no '..', no path separators)"
        )
    return session_id


def epoch(when: datetime | float | None) -> float | None:
    """A filter time as epoch seconds (naive datetimes are taken as local time)."""
    if when is None or isinstance(when, int | float):
        return when
    return when.timestamp()


def no_rewind(session_id: str) -> SessionConflictError:
    """What ``rewind`` raises for a session that is not stored (it cuts a stored session)."""
    return SessionConflictError(f"there is no session {session_id!r} to rewind")


def audit_json(session_id: str, entries: list[dict[str, JsonValue]]) -> list[str]:
    """The JSON text of a save's audit entries; StateFormatError if one is not an object."""
    import json  # only when saving: importing interlude stays light

    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise StateFormatError(
                f"session {session_id!r}: audit entry {i} is a {type(entry).__name__}, "
                "not an object"
            )
    return [json.dumps(entry) for entry in entries]


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredSession:
    """A session as loaded from a store: the parts of ``export_state()``, the version and the
    run claim (None when there is none)."""

    session_id: str
    version: int
    format_version: int
    messages: list[JsonValue]
    state: dict[str, JsonValue]
    pause: dict[str, JsonValue] | None
    tools: list[str]
    claim: dict[str, JsonValue] | None = None
    agent: str | None = None
    """The name of the agent that saved it (None: saved without one)."""
    audit: list[dict[str, JsonValue]] = field(default_factory=list)
    """Every audit entry, oldest first."""
    answers: list[RecordedAnswer] | None = None
    """The answers recorded and not yet applied (:class:`AnswerQueue`), as they stood when the
    session was read, for a store that reads them with it (in the same read); None when it did
    not. A resume right after the load checks its answers against these, with no second call;
    the save that applies answers checks the queue again, atomically, as always."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionUpdate:
    """One save: append ``new_messages`` and set the rest, if the stored version is ``expected``.

    ``first_index`` is the position of the first new message (the number already stored);
    ``pending`` is the pause's interrupts (``Interrupt.to_dict()``) for the pending index, or
    None to leave the index as it is (a running agent's journal saves, which change no question).
    ``state`` is left unchanged when None. ``claim`` is the run claim to store beside the pause
    (an object the store does not interpret), replacing the stored one; None clears it.
    ``agent`` is the agent's name, stored when not None (None leaves the stored name).
    ``audit`` entries are appended to the session's audit trail, in order, in the same
    transaction; stored entries are never changed or removed (but with the session).
    ``applied_answers`` are the seqs of recorded answers (:class:`AnswerQueue`) this save
    applies (a worker's resume with them): a store with an answer queue removes them in the
    same transaction, so a recorded answer is gone only once a commit holds it; a store without
    one ignores them.
    ``starts`` are the keys of tool calls this save starts in the session they were asked in
    (:class:`CallClaims`): a store that keeps call claims refuses the whole save with
    CallTakenError when another session holds one of them; a store without them ignores them.
    """

    expected_version: int
    first_index: int
    new_messages: list[JsonValue]
    pause: dict[str, JsonValue] | None
    pending: list[dict[str, JsonValue]] | None
    tools: list[str]
    format_version: int
    state: dict[str, JsonValue] | None = None
    claim: dict[str, JsonValue] | None = None
    agent: str | None = None
    audit: list[dict[str, JsonValue]] = field(default_factory=list)
    applied_answers: list[int] = field(default_factory=list)
    starts: list[str] = field(default_factory=list)


# A run's journal makes a SessionUpdate at every save; the dataclass's generated __init__ sets
# each of its twelve fields through ``object.__setattr__`` (it is frozen), which is most of the
# save's Python-side cost. ``journal_update`` sets the slots directly instead: the same value.
_UPDATE_FIELDS = (
    "expected_version",
    "first_index",
    "new_messages",
    "pause",
    "pending",
    "tools",
    "format_version",
    "state",
    "claim",
    "agent",
    "audit",
    "applied_answers",
    "starts",
)
if tuple(f.name for f in fields(SessionUpdate)) != _UPDATE_FIELDS:  # pragma: no cover
    raise AssertionError("journal_update must set every field of SessionUpdate")
(
    _set_expected_version,
    _set_first_index,
    _set_new_messages,
    _set_pause,
    _set_pending,
    _set_tools,
    _set_format_version,
    _set_state,
    _set_claim,
    _set_agent,
    _set_audit,
    _set_applied_answers,
    _set_starts,
) = (SessionUpdate.__dict__[name].__set__ for name in _UPDATE_FIELDS)
_new_update = object.__new__


def journal_update(
    expected_version: int,
    first_index: int,
    new_messages: list[JsonValue],
    pause: dict[str, JsonValue] | None,
    pending: list[dict[str, JsonValue]] | None,
    tools: list[str],
    format_version: int,
    state: dict[str, JsonValue] | None,
    claim: dict[str, JsonValue] | None,
    agent: str | None,
    audit: list[dict[str, JsonValue]],
    starts: list[str] | None = None,
) -> SessionUpdate:
    """``SessionUpdate`` of these fields and no applied answers, made three times faster than
    by its constructor (which is for everyone else: this one is positional)."""
    update: SessionUpdate = _new_update(SessionUpdate)
    _set_expected_version(update, expected_version)
    _set_first_index(update, first_index)
    _set_new_messages(update, new_messages)
    _set_pause(update, pause)
    _set_pending(update, pending)
    _set_tools(update, tools)
    _set_format_version(update, format_version)
    _set_state(update, state)
    _set_claim(update, claim)
    _set_agent(update, agent)
    _set_audit(update, audit)
    _set_applied_answers(update, [])
    _set_starts(update, [] if starts is None else starts)
    return update


@dataclass(frozen=True, slots=True)
class PendingInterrupt:
    """A question waiting for an answer in some session.

    For tool interrupts, ``interrupt.tool_use`` is what was shown (tool name and input).
    """

    session_id: str
    interrupt: Interrupt
    raised_at: float = field(default=0.0)
    agent: str | None = None
    """The name of the session's agent (None: it records none)."""

    @property
    def tool_name(self) -> str | None:
        return None if self.interrupt.tool_use is None else self.interrupt.tool_use.name

    @property
    def raised(self) -> datetime:
        return datetime.fromtimestamp(self.raised_at).astimezone()

    @property
    def expires_at(self) -> float | None:
        """When the question's deadline passes (epoch seconds), or None if it has none."""
        return self.interrupt.expires_at


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingQuery:
    """Which pending interrupts to list: each filter given must hold (None: no filter).

    ``name`` and ``tool_name`` match the interrupt's name and its tool's name;
    ``older_than`` and ``newer_than`` bound when it was raised (epoch seconds or a datetime;
    naive datetimes are local time); ``agent`` is the session's agent name;
    ``expiring_before`` keeps questions whose deadline is before it (questions without a
    deadline never match it); ``limit`` caps how many are listed.
    """

    name: str | None = None
    tool_name: str | None = None
    older_than: datetime | float | None = None
    newer_than: datetime | float | None = None
    agent: str | None = None
    expiring_before: datetime | float | None = None
    limit: int | None = None

    def matches(self, entry: PendingInterrupt) -> bool:
        """Whether ``entry`` passes every filter (``limit`` aside)."""
        older, newer = epoch(self.older_than), epoch(self.newer_than)
        expiring, deadline = epoch(self.expiring_before), entry.expires_at
        return (
            (self.name is None or entry.interrupt.name == self.name)
            and (self.tool_name is None or entry.tool_name == self.tool_name)
            and (older is None or entry.raised_at < older)
            and (newer is None or entry.raised_at > newer)
            and (self.agent is None or entry.agent == self.agent)
            and (expiring is None or (deadline is not None and deadline < expiring))
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedAnswer:
    """An answer recorded for a session's pending question, not yet applied: a worker applies
    it (``agent.resume``) and then clears it. ``seq`` orders a session's recorded answers;
    ``shown`` is the digest of the question as the person saw it (``Interrupt.digest``)."""

    seq: int
    interrupt_id: str
    answer: JsonValue
    by: str
    at: float
    shown: str | None = None

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "seq": self.seq,
            "interrupt_id": self.interrupt_id,
            "answer": self.answer,
            "by": self.by,
            "at": self.at,
            "shown": self.shown,
        }


NotificationStatus = Literal["pending", "sent", "failed", "skipped"]
"""``pending``: to deliver (at ``next_attempt_at``); ``sent``: delivered; ``failed``: given up
(kept, with its ``last_error``); ``skipped``: a record only, never delivered."""

CLOSING_EVENTS = ("answered", "expired", "withdrawn")
"""The events that close a question: once one is stored, its ``asked`` notification is no
longer listed by ``open_questions``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Notification:
    """A notification about a question, in a store's outbox (:class:`NotificationOutbox`).

    ``id`` is deterministic (the same event about the same question always has the same id),
    so adding it twice stores it once and receivers de-duplicate by it. ``payload`` is the
    JSON object delivered (the notifier adds the time of delivery). ``attempts`` counts the
    deliveries tried and settled; ``next_attempt_at`` is when it is due (None once settled).
    """

    id: str
    session_id: str
    interrupt_id: str
    event: str
    payload: dict[str, JsonValue]
    created_at: float
    status: NotificationStatus = "pending"
    attempts: int = 0
    next_attempt_at: float | None = None
    last_error: str | None = None

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "id": self.id,
            "session_id": self.session_id,
            "interrupt_id": self.interrupt_id,
            "event": self.event,
            "payload": self.payload,
            "created_at": self.created_at,
            "status": self.status,
            "attempts": self.attempts,
            "next_attempt_at": self.next_attempt_at,
            "last_error": self.last_error,
        }


@runtime_checkable
class SessionStore(Protocol):
    """Where agents keep their sessions: all an agent needs (``Agent(session=store)``). A new
    backend is one class meeting this protocol, plus a line in the conformance suite
    (``interlude.testing.conformance``); :class:`AnswerQueue` and :class:`PendingIndex` are
    optional parts it may meet too, and ``fork`` and ``rewind`` optional operations it may
    have (see the module's docstring: they are not part of this protocol)."""

    async def load(self, session_id: str) -> StoredSession | None:
        """The stored session, or None if there is none. SessionCorruptError if unreadable."""
        ...

    async def save(self, session_id: str, update: SessionUpdate) -> int:
        """Apply ``update`` atomically if the stored version (0: no session yet) is
        ``update.expected_version``; return the new version. SessionConflictError otherwise,
        with nothing written. A store with an :class:`AnswerQueue` also refuses, in the same
        transaction, a save whose audit entries answer a question (``answered_ids``) that has
        a recorded answer the save does not apply: AlreadyAnsweredError, nothing written."""
        ...

    async def audit_trail(self, session_id: str) -> list[dict[str, JsonValue]]:
        """The session's audit entries, oldest first (empty if there is no such session)."""
        ...

    async def list_sessions(self) -> list[str]:
        """Every stored session id, sorted."""
        ...

    async def delete(self, session_id: str) -> None:
        """Remove a session, with its pending interrupts and recorded answers where the store
        keeps them (no error if there is none)."""
        ...


@runtime_checkable
class AnswerQueue(Protocol):
    """Answers recorded for sessions' pending questions, for workers to apply, and the list of
    sessions a worker has something to do for."""

    async def record_answers(
        self,
        session_id: str,
        answers: list[dict[str, JsonValue]],
        *,
        expected_version: int | None = None,
    ) -> list[RecordedAnswer]:
        """Record answers (each ``{"interrupt_id", "answer", "by", "at", "shown"}``) for the
        session's pending questions, atomically, and return them with their ``seq``.
        SessionConflictError, recording nothing, if a question already has a recorded answer
        (the first answer wins), or if ``expected_version`` is given and the session is at
        another version (it moved on since the answers were checked against it); SessionError
        if there is no such session. The store does not check the answers: the operator floor
        does, against version ``expected_version``, and the resume that applies them again.

        The other half of "the first answer wins" is in :meth:`SessionStore.save`: a save whose
        audit entries answer a question that has a recorded answer it does not apply
        (``applied_answers``) is refused with AlreadyAnsweredError, writing nothing."""
        ...

    async def recorded_answers(self, session_id: str) -> list[RecordedAnswer]:
        """The session's recorded answers not yet cleared, by ``seq``."""
        ...

    async def clear_answers(self, session_id: str, upto_seq: int) -> None:
        """Remove the session's recorded answers with ``seq <= upto_seq``."""
        ...

    async def sessions_to_resume(
        self,
        now: datetime | float,
        *,
        limit: int | None = None,
        reserve_for: str | None = None,
        lease: float = 30.0,
    ) -> list[str]:
        """Sessions a worker has something to do for: with recorded answers, with a pending
        question (as the saves' ``pending`` gave them) whose deadline is at or before ``now``,
        or with a run claim whose lease ran out before ``now`` (a run whose process died).
        Oldest work first, up to ``limit``.

        With ``reserve_for`` (a worker's id), in the same transaction as the selection, each
        session returned is reserved for that owner until ``now + lease``, and a session
        another owner holds a reservation on that has not lapsed at ``now`` is passed by (so
        ``limit`` counts the sessions returned, not those passed by); the same owner gets its
        own reservations again (renewed). Without ``reserve_for``, reservations are ignored.
        A reservation is advisory (the run claim on save still fences runs); it ends when a
        save storing a run claim lands (the claim keeps others out from then on: a worker that
        dies mid-run holds the session no longer than its claim), and goes with the session.
        Only stores with ``reserves_work = True`` reserve; others take neither argument (a
        :class:`~interlude.Worker` then shuffles what it gets instead)."""
        ...


@runtime_checkable
class PendingIndex(Protocol):
    """The questions waiting across sessions, as the saves' ``pending`` lists gave them."""

    async def pending_interrupts(self, query: PendingQuery | None = None) -> list[PendingInterrupt]:
        """Pending interrupts across sessions, oldest first, that pass ``query`` (None: all)."""
        ...

    async def expired_interrupts(
        self, now: datetime | float, *, limit: int | None = None
    ) -> list[PendingInterrupt]:
        """Pending interrupts whose deadline (``expires_at``) is at or before ``now``, across
        sessions, earliest deadline first."""
        ...


@runtime_checkable
class NotificationOutbox(Protocol):
    """Notifications about sessions' questions, kept until delivered (at least once): what
    :class:`interlude.notify.Notifier` fills and delivers from. A session's notifications go
    with the session (``delete``)."""

    async def add_notifications(self, notifications: list[Notification]) -> list[str]:
        """Store, in one transaction, the notifications whose id is not stored yet (for a
        session that exists; others are left out) as given; return the ids stored, in order.
        A stored notification is never changed by this (adding is idempotent). Adding one with
        a closing event (``answered``, ``expired``, ``withdrawn``) closes its question's
        ``asked`` notification for :meth:`open_questions`."""
        ...

    async def claim_notifications(
        self, now: float, *, lease: float, limit: int | None = None
    ) -> list[Notification]:
        """The pending notifications due at ``now`` (``next_attempt_at <= now``), earliest
        first (ties by id), up to ``limit``, as claimed: in the same transaction each is made
        due again only at ``now + lease``, so other notifiers pass them by while this one
        delivers (and a notifier that dies mid-delivery leaves them to be delivered again)."""
        ...

    async def settle_notification(
        self,
        notification_id: str,
        outcome: Literal["sent", "retry", "failed"],
        *,
        retry_at: float | None = None,
        error: str | None = None,
    ) -> None:
        """Record a delivery attempt (``attempts`` + 1): ``sent``, ``failed`` for good (kept
        with ``error``), or ``retry`` at ``retry_at`` (pending, with ``error``). No error if
        there is no such notification (its session was deleted)."""
        ...

    async def open_questions(self, *, limit: int | None = None) -> list[Notification]:
        """The ``asked`` notifications whose question has no closing notification yet, oldest
        first (ties by id)."""
        ...

    async def notifications(self, session_id: str) -> list[Notification]:
        """Every notification of a session, oldest first (ties by id)."""
        ...


@runtime_checkable
class CallClaims(Protocol):
    """Claims on tool calls that sessions share (a fork and the session it was forked from
    hold the same calls up to the fork point): of the sessions that would run one such call,
    the first to claim it runs it and the others ask a person first (``Agent.fork``).

    A key names one call in the session it was asked in (the agent makes it; the store does not
    interpret it). The session a call was asked in does not claim it: its save that starts the
    call names it in ``SessionUpdate.starts`` and is refused (CallTakenError) if another
    session holds it. Every other session claims it here first."""

    async def claim_call(
        self, key: str, session_id: str, *, origin: str
    ) -> tuple[str, StoredSession | None]:
        """Claim call ``key`` (asked in session ``origin``) for ``session_id`` unless another
        session holds it. Returns the session that holds it (``session_id`` if it does now, or
        already did) and session ``origin`` as stored (None if there is none), read in the same
        atomic step: a save of ``origin`` either is in what is returned or comes after the
        claim (and then sees it). Claims on calls asked in ``origin`` go with ``origin``
        (``delete``)."""
        ...


@runtime_checkable
class InboxStore(SessionStore, AnswerQueue, PendingIndex, Protocol):
    """A store with all three parts, as an :class:`~interlude.Inbox` and a
    :class:`~interlude.Worker` use it: sessions, recorded answers and the pending index.
    Every shipped store is one."""
