"""MemoryStore: sessions in a dict, for tests and single-process use."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from .._interrupt import Interrupt
from .._messages import JsonValue
from ..errors import SessionConflictError, SessionCorruptError, StateFormatError
from ._answers import (
    answer_entries,
    answered_ids,
    call_taken,
    check_version,
    claim_deadline,
    conflict,
    no_session,
    queued_first,
    read_answer,
    reserved_by_other,
    resume_order,
)
from ._outbox import CLOSING_EVENTS, check_notifications, due_order, read_notification, settled
from ._protocol import (
    Notification,
    PendingInterrupt,
    PendingQuery,
    RecordedAnswer,
    SessionUpdate,
    StoredSession,
    audit_json,
    check_session_id,
    epoch,
    no_rewind,
)

__all__ = ["MemoryStore", "expired_first", "resume_times", "select_pending"]


@dataclass(slots=True)
class _Record:
    version: int
    format_version: int
    messages: list[str] = field(default_factory=list)  # JSON text: what a disk store would hold
    state: str = "{}"
    pause: str = "null"
    claim: str = "null"
    tools: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    agent: str | None = None
    audit: list[str] = field(default_factory=list)
    answers: list[tuple[int, str]] = field(default_factory=list)  # (seq, JSON text), by seq
    answer_seq: int = 0  # the highest seq ever given: a cleared seq is never reused
    notifications: dict[str, str] = field(default_factory=dict)  # id -> JSON text
    reserved: dict[str, JsonValue] | None = None  # {"owner", "until"}: a worker's reservation


def _stored(session_id: str, r: _Record) -> StoredSession:
    return StoredSession(
        session_id=session_id,
        version=r.version,
        format_version=r.format_version,
        messages=[json.loads(m) for m in r.messages],
        state=json.loads(r.state),
        pause=json.loads(r.pause),
        tools=list(r.tools),
        claim=json.loads(r.claim),
        agent=r.agent,
        audit=[json.loads(a) for a in r.audit],
    )


def select_pending(entries: list[PendingInterrupt], query: PendingQuery) -> list[PendingInterrupt]:
    """The entries that pass ``query``, oldest first (ties: session id, interrupt id), cut to
    its ``limit`` (shared by the non-SQL stores)."""
    found = [e for e in entries if query.matches(e)]
    found.sort(key=lambda e: (e.raised_at, e.session_id, e.interrupt.id))
    return found if query.limit is None else found[: query.limit]


def resume_times(
    pending: list[PendingInterrupt],
    answered: dict[str, float],
    claims: dict[str, float],
    now: float,
) -> dict[str, float]:
    """When each session's oldest work became due: its first recorded answer's time
    (``answered``), an overdue question's deadline, a run claim's lapsed lease (``claims``)
    (shared by the non-SQL stores)."""
    due = dict(answered)
    for e in pending:
        if e.expires_at is not None and e.expires_at <= now:
            due[e.session_id] = min(due.get(e.session_id, e.expires_at), e.expires_at)
    for sid, expires in claims.items():
        if expires <= now:
            due[sid] = min(due.get(sid, expires), expires)
    return due


def expired_first(
    entries: list[PendingInterrupt], now: float, limit: int | None
) -> list[PendingInterrupt]:
    """The entries whose deadline is at or before ``now``, earliest deadline first (ties: session
    id, interrupt id), cut to ``limit`` (shared by the non-SQL stores)."""
    found = [e for e in entries if e.expires_at is not None and e.expires_at <= now]
    found.sort(key=lambda e: (e.expires_at, e.session_id, e.interrupt.id))
    return found if limit is None else found[:limit]


class MemoryStore:
    """Sessions kept in this process's memory, as JSON text (so nothing is shared by reference).

    ``bytes_written`` counts the JSON bytes saved, for measuring what a save costs.
    """

    def __init__(self) -> None:
        self._sessions: dict[str, _Record] = {}
        self._calls: dict[str, tuple[str, str]] = {}  # call key -> (holder, origin)
        self._lock = threading.Lock()
        self.bytes_written = 0

    async def load(self, session_id: str) -> StoredSession | None:
        check_session_id(session_id)
        with self._lock:
            r = self._sessions.get(session_id)
            return None if r is None else _stored(session_id, r)

    _saves_inline = True
    """Saves run to the end without suspending (no await inside): a cancel cannot cut one."""

    async def save(self, session_id: str, update: SessionUpdate) -> int:
        return self._save(session_id, update)

    async def rewind(self, session_id: str, update: SessionUpdate) -> int:
        """:meth:`save`, except that ``update.first_index`` may be below the number of messages
        stored: the conversation is first cut there, under the same lock (the optional
        ``rewind`` of ``interlude.sessions._protocol``)."""
        if update.expected_version < 1:
            raise no_rewind(check_session_id(session_id))
        return self._save(session_id, update, rewind=True)

    def _save(self, session_id: str, update: SessionUpdate, *, rewind: bool = False) -> int:
        """A save (a rewind, with ``rewind``), run to the end without suspending."""
        check_session_id(session_id)
        messages = [json.dumps(m) for m in update.new_messages]
        pause = json.dumps(update.pause)
        claim = json.dumps(update.claim)
        state = None if update.state is None else json.dumps(update.state)
        keep = update.pending is None
        pending = [json.dumps(p) for p in update.pending or ()]
        audit = audit_json(session_id, update.audit)
        with self._lock:
            r = self._sessions.get(session_id)
            current = 0 if r is None else r.version
            if current != update.expected_version:
                raise SessionConflictError(
                    f"session {session_id!r} is at version {current}, not "
                    f"{update.expected_version}: another agent saved it first"
                )
            if r is not None and r.answers:
                self._check_queue(session_id, r, update)
            for key in update.starts:
                holder = self._calls.get(key, (session_id,))[0]
                if holder != session_id:
                    raise call_taken(session_id, key, holder)
            stored = 0 if r is None else len(r.messages)
            if update.first_index != stored:
                if not rewind or r is None or update.first_index > stored:
                    raise SessionConflictError(
                        f"session {session_id!r} holds {stored} messages, but the save "
                        f"appends at {update.first_index}"
                    )
                del r.messages[update.first_index :]  # a rewind: cut, then appended to
            if r is None:
                r = self._sessions[session_id] = _Record(0, update.format_version)
            r.messages.extend(messages)
            r.pause, r.claim, r.tools = pause, claim, list(update.tools)
            if update.claim is not None:  # the run's claim takes over from a reservation
                r.reserved = None
            if not keep:
                r.pending = pending
            r.format_version = update.format_version
            r.audit.extend(audit)
            if update.applied_answers:  # applied by this save: gone with it
                applied = set(update.applied_answers)
                r.answers = [(seq, t) for seq, t in r.answers if seq not in applied]
            if update.agent is not None:
                r.agent = update.agent
            if state is not None:
                r.state = state
            r.version += 1
            self.bytes_written += sum(map(len, messages)) + len(pause) + sum(map(len, pending))
            self.bytes_written += len(claim) + (0 if state is None else len(state))
            self.bytes_written += sum(map(len, audit))
            return r.version

    skipped: tuple[tuple[str, str], ...] = ()
    """``(session_id, why)`` of the sessions the last :meth:`pending_interrupts` (or
    :meth:`expired_interrupts`, or :meth:`sessions_to_resume`) call left out entries of,
    because they could not be read (empty when everything was read)."""

    async def pending_interrupts(self, query: PendingQuery | None = None) -> list[PendingInterrupt]:
        """Pending interrupts across sessions, oldest first, that pass ``query`` (None: all).

        A pending entry that is not a valid interrupt does not hide the others: it is left
        out, and ``self.skipped`` is set to the ``(session_id, why)`` of each session with
        entries left out by this call, in session id order (empty when all were read).
        """
        return select_pending(self._pending(), query or PendingQuery())

    async def expired_interrupts(
        self, now: datetime | float, *, limit: int | None = None
    ) -> list[PendingInterrupt]:
        """Pending interrupts whose deadline is at or before ``now``, earliest first; entries
        that cannot be read are left out and named in ``self.skipped``, as above."""
        return expired_first(self._pending(), float(epoch(now) or 0.0), limit)

    def _pending(self) -> list[PendingInterrupt]:
        """Every readable pending interrupt; sets ``self.skipped`` for the unreadable ones."""
        with self._lock:
            items = [(sid, r.agent, p) for sid, r in self._sessions.items() for p in r.pending]
        found = []
        skipped: dict[str, str] = {}
        for sid, agent, text in items:
            try:
                interrupt = Interrupt.from_dict(json.loads(text), "pending interrupt")
            except (StateFormatError, TypeError, ValueError, RecursionError) as exc:
                skipped.setdefault(sid, f"session {sid!r} is corrupt: {exc}")
                continue
            found.append(PendingInterrupt(sid, interrupt, interrupt.raised_at, agent))
        self.skipped = tuple(sorted(skipped.items()))
        return found

    def _check_queue(self, session_id: str, r: _Record, update: SessionUpdate) -> None:
        """AlreadyAnsweredError if ``update`` answers a question a recorded answer waits for."""
        answered = set(answered_ids(update.audit))
        if not answered:
            return
        applied = set(update.applied_answers)
        for seq, text in r.answers:
            waiting = self._answer(session_id, seq, text)
            if waiting.interrupt_id in answered and seq not in applied:
                raise queued_first(session_id, waiting)

    async def record_answers(
        self,
        session_id: str,
        answers: list[dict[str, JsonValue]],
        *,
        expected_version: int | None = None,
    ) -> list[RecordedAnswer]:
        check_session_id(session_id)
        entries = answer_entries(session_id, answers)
        texts = [json.dumps(e) for e in entries]
        with self._lock:
            r = self._sessions.get(session_id)
            if r is None:
                raise no_session(session_id)
            check_version(session_id, r.version, expected_version)
            taken = {self._answer(session_id, seq, t).interrupt_id for seq, t in r.answers}
            for e in entries:
                if e["interrupt_id"] in taken:
                    raise conflict(session_id, str(e["interrupt_id"]))
            first = r.answer_seq + 1
            r.answers.extend((first + i, t) for i, t in enumerate(texts))
            r.answer_seq += len(texts)
            self.bytes_written += sum(map(len, texts))
        return [self._answer(session_id, first + i, t) for i, t in enumerate(texts)]

    @staticmethod
    def _answer(session_id: str, seq: int, text: str) -> RecordedAnswer:
        return read_answer(session_id, seq, text, "in memory")

    async def recorded_answers(self, session_id: str) -> list[RecordedAnswer]:
        check_session_id(session_id)
        with self._lock:
            r = self._sessions.get(session_id)
            stored = [] if r is None else list(r.answers)
        return [self._answer(session_id, seq, text) for seq, text in stored]

    async def clear_answers(self, session_id: str, upto_seq: int) -> None:
        check_session_id(session_id)
        with self._lock:
            r = self._sessions.get(session_id)
            if r is not None:
                r.answers = [(seq, t) for seq, t in r.answers if seq > upto_seq]

    reserves_work = True
    """:meth:`sessions_to_resume` reserves what it returns when given ``reserve_for``."""

    async def sessions_to_resume(
        self,
        now: datetime | float,
        *,
        limit: int | None = None,
        reserve_for: str | None = None,
        lease: float = 30.0,
    ) -> list[str]:
        """Sessions with recorded answers, an overdue question or a lapsed run claim, oldest
        work first; sessions whose entries cannot be read are named in ``self.skipped``. With
        ``reserve_for``, those returned are reserved for it until ``now + lease`` (under the
        store's lock), passing by other owners' live reservations."""
        when = float(epoch(now) or 0.0)
        pending = self._pending()
        skipped = dict(self.skipped)
        with self._lock:
            stored = {sid: (r.answers[:1], r.claim) for sid, r in self._sessions.items()}
        answered: dict[str, float] = {}
        claims: dict[str, float] = {}
        for sid, (first, claim_text) in stored.items():
            try:
                if first:
                    answered[sid] = self._answer(sid, *first[0]).at
                expires = claim_deadline(json.loads(claim_text))
            except (SessionCorruptError, ValueError, RecursionError) as exc:
                skipped.setdefault(sid, str(exc))
                continue
            if expires is not None:
                claims[sid] = expires
        self.skipped = tuple(sorted(skipped.items()))
        due = resume_times(pending, answered, claims, when)
        if reserve_for is None:
            return resume_order(due, limit)
        return self._reserve(resume_order(due, None), reserve_for, when, lease, limit)

    def _reserve(
        self, ordered: list[str], owner: str, now: float, lease: float, limit: int | None
    ) -> list[str]:
        """The first ``limit`` of ``ordered`` that no other owner holds, reserved for
        ``owner`` until ``now + lease``, in one step under the lock."""
        taken: list[str] = []
        with self._lock:
            for sid in ordered:
                if limit is not None and len(taken) >= limit:
                    break
                r = self._sessions.get(sid)
                if r is None or reserved_by_other(r.reserved, owner, now):
                    continue
                r.reserved = {"owner": owner, "until": now + lease}
                taken.append(sid)
        return taken

    async def audit_trail(self, session_id: str) -> list[dict[str, JsonValue]]:
        check_session_id(session_id)
        with self._lock:
            r = self._sessions.get(session_id)
            audit = [] if r is None else list(r.audit)
        return [json.loads(a) for a in audit]

    async def list_sessions(self) -> list[str]:
        with self._lock:
            return sorted(self._sessions)

    async def fork(self, session_id: str, new_session_id: str, update: SessionUpdate) -> int:
        """Make session ``new_session_id`` from the start of ``session_id`` and ``update``
        (see ``interlude.sessions._forking``); the source is not changed."""
        from ._forking import fork_by_copy

        return await fork_by_copy(self, session_id, new_session_id, update)

    async def delete(self, session_id: str) -> None:
        check_session_id(session_id)
        with self._lock:
            self._sessions.pop(session_id, None)
            for key in [k for k, (_, origin) in self._calls.items() if origin == session_id]:
                del self._calls[key]

    async def claim_call(
        self, key: str, session_id: str, *, origin: str
    ) -> tuple[str, StoredSession | None]:
        """Claim tool call ``key`` for ``session_id`` (see :class:`CallClaims`)."""
        check_session_id(session_id)
        check_session_id(origin)
        with self._lock:
            holder = self._calls.setdefault(key, (session_id, origin))[0]
            r = self._sessions.get(origin)
            return holder, None if r is None else _stored(origin, r)

    # -- the notification outbox ---------------------------------------------------------------

    def _notes(self) -> list[Notification]:
        """Every stored notification (we hold the lock)."""
        return [
            read_notification(text, "in memory")
            for r in self._sessions.values()
            for text in r.notifications.values()
        ]

    async def add_notifications(self, notifications: list[Notification]) -> list[str]:
        checked = check_notifications(notifications)
        added = []
        with self._lock:
            for n in checked:
                r = self._sessions.get(n.session_id)
                if r is None or n.id in r.notifications:  # ids name their session
                    continue
                r.notifications[n.id] = json.dumps(n.to_dict())
                added.append(n.id)
        return added

    async def claim_notifications(
        self, now: float, *, lease: float, limit: int | None = None
    ) -> list[Notification]:
        with self._lock:
            due = [
                n
                for n in self._notes()
                if n.status == "pending" and (n.next_attempt_at or 0.0) <= now
            ]
            due.sort(key=due_order)
            due = due if limit is None else due[: max(limit, 0)]
            taken = [replace(n, next_attempt_at=now + lease) for n in due]
            for n in taken:
                self._sessions[n.session_id].notifications[n.id] = json.dumps(n.to_dict())
        return taken

    async def settle_notification(
        self,
        notification_id: str,
        outcome: Literal["sent", "retry", "failed"],
        *,
        retry_at: float | None = None,
        error: str | None = None,
    ) -> None:
        with self._lock:
            for r in self._sessions.values():
                text = r.notifications.get(notification_id)
                if text is not None:
                    n = settled(read_notification(text, "in memory"), outcome, retry_at, error)
                    r.notifications[notification_id] = json.dumps(n.to_dict())

    async def open_questions(self, *, limit: int | None = None) -> list[Notification]:
        with self._lock:
            notes = self._notes()
        closed = {(n.session_id, n.interrupt_id) for n in notes if n.event in CLOSING_EVENTS}
        found = [
            n for n in notes if n.event == "asked" and (n.session_id, n.interrupt_id) not in closed
        ]
        found.sort(key=lambda n: (n.created_at, n.id))
        return found if limit is None else found[: max(limit, 0)]

    async def notifications(self, session_id: str) -> list[Notification]:
        check_session_id(session_id)
        with self._lock:
            r = self._sessions.get(session_id)
            texts = [] if r is None else list(r.notifications.values())
        found = [read_notification(t, "in memory") for t in texts]
        return sorted(found, key=lambda n: (n.created_at, n.id))
