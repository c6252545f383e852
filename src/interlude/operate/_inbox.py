"""Inbox: the questions waiting in a store, answers recorded for workers, audit trails.

Answering without the agent: ``record`` checks answers as ``resume`` would (against the
stored pause: ids pending, JSON, response types, deadlines, the digest of what was shown) and
stores them; a :class:`~interlude.Worker` then builds the agent through the operator's
:class:`~interlude.App` and applies them. Every query works from sync and async code.

A graph's or swarm's session (``interlude.multiagent``) is served the same way: its questions
are those its record waits on (each with the node that asked in its ``via``, see
``node_path``), answers are checked against them as ``resume`` checks an agent's, and the
worker resumes the graph.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING

from .._messages import JsonValue, Message
from .._sync import run_sync
from ..errors import AlreadyAnsweredError, SessionConflictError
from ..sessions import (
    InboxStore,
    PendingInterrupt,
    PendingQuery,
    RecordedAnswer,
    StoredSession,
    open_store,
)
from ._sessions import is_graph

if TYPE_CHECKING:
    from .._audit import AuditEntry
    from .._interrupt import Interrupt
    from ._app import App
    from ._people import Person

__all__ = ["Inbox", "SessionView"]

_TRIES = 3
"""How many times answers are checked and recorded when the session moves on in between."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionView:
    """A stored session as a person answering it needs to see it (read from the store, not
    verified: a signed pause is verified by the agent that applies the answers)."""

    session_id: str
    agent: str | None
    version: int
    messages: list[Message]
    interrupts: list[Interrupt]
    """The pending questions, exactly as they were shown."""
    audit: list[AuditEntry]
    recorded: list[RecordedAnswer] = field(default_factory=list)
    """Answers recorded and waiting for a worker."""
    running: bool = False
    """A run holds the session now (a live claim)."""
    stopped: bool = False
    """A run stopped before it finished (its process died): a worker recovers it."""
    votes: Mapping[str, tuple[JsonValue, tuple[str, ...]]] = field(default_factory=dict)
    """Votes so far toward a quorum: question id -> (the answer voted for, who voted, in
    order); a question with none yet is absent."""
    decisions: dict[str, dict[str, JsonValue]] = field(default_factory=dict)
    """The approval decisions remembered now, by tool name, as ``Agent.decisions`` gives
    them: ``{"approve", "scope": "run" | "session", "note"?}``."""
    kind: str = "agent"
    """Whose session it is: "agent", or "graph" / "swarm" (no messages nor audit trail of its
    own; its nodes' agents keep theirs in their own sessions)."""


class Inbox:
    """Pending, expired and audit queries on a session store (or a store URL).

    Each query has an async form (``pending_async``) and a sync one (``pending``); the sync
    ones work from plain sync code and from code running inside an event loop's thread (a
    notebook, an async app's sync helper) alike, without ``asyncio.run``. ``skipped`` is the
    store's ``(session_id, why)`` list of sessions the last query left out, unreadable.

    A store opened here from a URL is closed by :meth:`close` (or leaving a ``with`` block);
    a store passed in is left open. ``link_secret`` signs the one-time answer links
    :meth:`answer_link` makes (the server that checks them has the same secret).
    """

    def __init__(
        self,
        store: InboxStore | str,
        *,
        clock: Callable[[], float] | None = None,
        signing_key: bytes | str | None = None,
        app: App | None = None,
        link_secret: bytes | str | None = None,
    ) -> None:
        from .._agent import as_key
        from ._links import link_key

        self._key = as_key(signing_key)
        """With a key (the agents' ``signing_key``), a pause is verified before its questions
        are shown or answers are checked against them (StateIntegrityError if it does not)."""
        self._link_key = None if link_secret is None else link_key(link_secret)
        self._owned = isinstance(store, str)
        self.store: InboxStore = open_store(store) if isinstance(store, str) else store
        self.clock: Callable[[], float] = clock or time.time
        self.app = app
        """The App whose agents the sessions are (None: not known here). With it, an answer
        that edits a call's input is checked against the tool's own validation too (as the
        resume that applies it checks it), so a refused edit is never recorded."""

    @property
    def skipped(self) -> tuple[tuple[str, str], ...]:
        return tuple(getattr(self.store, "skipped", ()))

    async def pending_async(
        self,
        *,
        name: str | None = None,
        tool_name: str | None = None,
        older_than: datetime | float | None = None,
        newer_than: datetime | float | None = None,
        limit: int | None = None,
        agent: str | None = None,
        expiring_before: datetime | float | None = None,
    ) -> list[PendingInterrupt]:
        """Pending interrupts across sessions, oldest first (the filters of a
        :class:`~interlude.sessions.PendingQuery`)."""
        return await self.store.pending_interrupts(
            PendingQuery(
                name=name,
                tool_name=tool_name,
                older_than=older_than,
                newer_than=newer_than,
                limit=limit,
                agent=agent,
                expiring_before=expiring_before,
            )
        )

    def pending(
        self,
        *,
        name: str | None = None,
        tool_name: str | None = None,
        older_than: datetime | float | None = None,
        newer_than: datetime | float | None = None,
        limit: int | None = None,
        agent: str | None = None,
        expiring_before: datetime | float | None = None,
    ) -> list[PendingInterrupt]:
        """:meth:`pending_async`, from sync code."""
        return run_sync(
            self.pending_async(
                name=name,
                tool_name=tool_name,
                older_than=older_than,
                newer_than=newer_than,
                limit=limit,
                agent=agent,
                expiring_before=expiring_before,
            )
        )

    async def expired_async(
        self, now: datetime | float | None = None, *, limit: int | None = None
    ) -> list[PendingInterrupt]:
        """Pending interrupts whose deadline is at or before ``now`` (default: this moment),
        earliest deadline first."""
        return await self.store.expired_interrupts(time.time() if now is None else now, limit=limit)

    def expired(
        self, now: datetime | float | None = None, *, limit: int | None = None
    ) -> list[PendingInterrupt]:
        """:meth:`expired_async`, from sync code."""
        return run_sync(self.expired_async(now, limit=limit))

    async def audit_async(self, session_id: str) -> list[dict[str, JsonValue]]:
        """The session's audit entries, oldest first (empty if there is no such session)."""
        return await self.store.audit_trail(session_id)

    def audit(self, session_id: str) -> list[dict[str, JsonValue]]:
        """:meth:`audit_async`, from sync code."""
        return run_sync(self.audit_async(session_id))

    async def session_async(self, session_id: str) -> SessionView:
        """The session's conversation, pending questions, audit trail and recorded answers.
        SessionError if there is no such session; SessionCorruptError if it cannot be read."""
        stored = await self._load(session_id)
        recorded = await self.store.recorded_answers(session_id)
        if is_graph(stored):
            return await _graph_view(self.store, session_id, stored, recorded)
        return _view(session_id, stored, recorded, self._key)

    def session(self, session_id: str) -> SessionView:
        """:meth:`session_async`, from sync code."""
        return run_sync(self.session_async(session_id))

    async def record_async(
        self,
        session_id: str,
        answers: Mapping[str, JsonValue],
        *,
        by: str,
        shown: Mapping[str, str] | None = None,
        groups: Collection[str] | None = None,
    ) -> list[RecordedAnswer]:
        """Record answers to the session's pending questions for a worker to apply.

        They are checked first exactly as ``resume`` checks them, against the stored pause
        (NotPausedError, UnknownInterruptError, ResumeInputError, AnswerValidationError,
        InterruptExpiredError; nothing is recorded then). ``by`` is who answers, for the audit
        trail; ``shown`` maps ids to the digest of the question as the person saw it (default:
        the stored question's), which the worker's resume checks again. SessionConflictError
        if a question already has a recorded answer (the first one wins); both it and a
        question answered and applied already say who answered first.

        With ``groups`` (the groups ``by`` belongs to), a question they may not answer now
        (``Interrupt.may_answer``) is refused with NotAllowedToAnswerError; without, groups are
        not checked. A vote toward a quorum is checked against the votes so far as ``resume``
        counts them (ResumeInputError for the same person twice, naming the votes); while
        another vote on the question waits for a worker, SessionConflictError says it is
        being applied and to try again."""
        from .._agent import check_by
        from ..errors import ResumeInputError
        from ._keys import by_question_id

        if not isinstance(answers, Mapping) or not answers:
            raise ResumeInputError("record() takes a non-empty map of interrupt id to answer")
        by = check_by(by)
        answers = by_question_id(session_id, answers)  # the keys doors show, or plain ids
        if isinstance(shown, Mapping):
            shown = by_question_id(session_id, shown)
        for attempt in range(_TRIES):
            stored = await self._load(session_id)
            try:
                return await self._record(stored, answers, by, shown, groups)
            except SessionConflictError as exc:  # it moved on while the answers were checked
                if isinstance(exc, AlreadyAnsweredError) or attempt == _TRIES - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _record(
        self,
        stored: StoredSession,
        answers: Mapping[str, JsonValue],
        by: str,
        shown: Mapping[str, str] | None,
        groups: Collection[str] | None,
    ) -> list[RecordedAnswer]:
        """Check ``answers`` against the session as ``stored`` and record them if it still
        stands at that version (the check and the claim are one step against the store)."""
        from .._agent import check_answers, moved_error, moved_to, moving_error, moving_to
        from ..errors import NotPausedError
        from ._rules import check_allowed, check_taken, check_votes, queue_conflict

        session_id = stored.session_id
        going = moving_to(stored.claim)
        if going is not None:  # frozen by a move: it will be answered where it goes
            raise moving_error(session_id, going)
        if is_graph(stored):
            view = await _graph_view(self.store, session_id, stored, [])
        else:
            view = _view(session_id, stored, [], self._key)
        check_taken(session_id, answers, view.audit, ())  # applied while the page was open
        if not view.interrupts:
            went = moved_to(stored.claim)
            if went is not None:
                raise moved_error(session_id, went)
            raise NotPausedError(
                f"session {session_id!r} waits on no question"
                + (" (a run holds it now)" if view.running else "")
            )
        asked = {i.id: i for i in view.interrupts}
        now = self.clock()
        if groups is not None:
            check_allowed(asked, answers, groups, now, by)
        check_answers(asked, answers, now, shown)
        check_votes(asked, answers, by, view.votes)
        if self.app is not None and view.kind == "agent" and _edits(answers):
            await self._check_edits(stored, answers, by, shown)
        digests = dict(shown or {})
        entries: list[dict[str, JsonValue]] = [
            {
                "interrupt_id": iid,
                "answer": answer,
                "by": by,
                "at": now,
                "shown": digests.get(iid) or asked[iid].digest,
            }
            for iid, answer in answers.items()
        ]
        try:
            return await self.store.record_answers(
                session_id, entries, expected_version=stored.version
            )
        except AlreadyAnsweredError:
            recorded = await self.store.recorded_answers(session_id)
            queued = [r for r in recorded if r.interrupt_id in answers]
            refused = queue_conflict(session_id, asked, view.votes, queued, by)
            if refused is not None:
                raise refused from None
            raise

    async def _check_edits(
        self,
        stored: StoredSession,
        answers: Mapping[str, JsonValue],
        by: str,
        shown: Mapping[str, str] | None,
    ) -> None:
        """The resume's own checks of ``answers`` (edits against the tool's validation among
        them), on the session's agent built by the App: nothing runs, nothing changes."""
        assert self.app is not None
        opened = await self.app.open_async(stored.session_id, self.store)
        opened.check_resume(answers, by=by, shown=shown)

    def record(
        self,
        session_id: str,
        answers: Mapping[str, JsonValue],
        *,
        by: str,
        shown: Mapping[str, str] | None = None,
        groups: Collection[str] | None = None,
    ) -> list[RecordedAnswer]:
        """:meth:`record_async`, from sync code."""
        return run_sync(self.record_async(session_id, answers, by=by, shown=shown, groups=groups))

    async def answer_link_async(
        self,
        session_id: str,
        interrupt_id: str,
        *,
        person: Person | str,
        expires_in: float | timedelta,
        choice: bool | None = None,
    ) -> str:
        """The path (``/links/<token>``) of a one-time link on ``interlude serve`` that
        answers the pending question ``interrupt_id`` (or its answer key) of ``session_id`` as
        ``person`` (a name: in no group), for ``expires_in`` seconds and never past the
        question's deadline. Opening it shows the question; submitting it answers once,
        through :meth:`record_async`'s rules, as ``person`` with their groups. With ``choice``
        (a yes/no question only), the link gives that answer (``True`` approves, ``False``
        declines); without it, it opens the question's answer form.

        ConfigurationError without a ``link_secret``; NotPausedError or UnknownInterruptError
        when the question does not wait now; ResumeInputError for a bad ``person``,
        ``expires_in`` or ``choice``."""
        from ..errors import ConfigurationError, NotPausedError, UnknownInterruptError
        from ._keys import question_id_of
        from ._links import as_person, make_link, seconds

        if self._link_key is None:
            raise ConfigurationError("answer links need Inbox(..., link_secret=...)")
        who, lifetime = as_person(person), seconds(expires_in)
        question_id = question_id_of(session_id, interrupt_id)
        view = await self.session_async(session_id)
        if not view.interrupts:
            raise NotPausedError(f"session {session_id!r} waits on no question")
        question = next((i for i in view.interrupts if i.id == question_id), None)
        if question is None:
            raise UnknownInterruptError(
                f"session {session_id!r} does not wait on question {question_id!r}"
            )
        link = make_link(
            self._link_key,
            session_id,
            question,
            who,
            now=self.clock(),
            lifetime=lifetime,
            choice=choice,
        )
        return link.path

    def answer_link(
        self,
        session_id: str,
        interrupt_id: str,
        *,
        person: Person | str,
        expires_in: float | timedelta,
        choice: bool | None = None,
    ) -> str:
        """:meth:`answer_link_async`, from sync code."""
        return run_sync(
            self.answer_link_async(
                session_id, interrupt_id, person=person, expires_in=expires_in, choice=choice
            )
        )

    async def _load(self, session_id: str) -> StoredSession:
        from ..errors import SessionError

        stored = await self.store.load(session_id)
        if stored is None:
            raise SessionError(f"no session {session_id!r} in the store")
        return stored

    def close(self) -> None:
        """Close the store if this inbox opened it from a URL (idempotent)."""
        close = getattr(self.store, "close", None)
        if self._owned and close is not None:
            self._owned = False
            close()

    def __enter__(self) -> Inbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _view(
    session_id: str,
    stored: StoredSession,
    recorded: list[RecordedAnswer],
    key: bytes | None = None,
) -> SessionView:
    """The stored session decoded (SessionCorruptError if it cannot be); with a signing
    ``key``, its pause verified for the agent the session names (StateIntegrityError)."""
    from .._agent import decode_stored, remembered_decisions
    from ..sessions import claim_is_live, split_marker

    loaded = decode_stored(stored, key, stored.agent)
    _, marker = split_marker(stored.pause)
    claim = stored.claim
    live = isinstance(claim, dict) and claim_is_live(claim)
    journal = loaded.pause is not None and not loaded.pause.interrupts
    progress = None if loaded.pause is None else loaded.pause.progress
    run = {} if progress is None else progress.decisions
    return SessionView(
        session_id=session_id,
        agent=stored.agent,
        version=stored.version,
        messages=loaded.messages,
        interrupts=[] if loaded.pause is None else list(loaded.pause.interrupts),
        audit=loaded.audit,
        recorded=recorded,
        running=live,
        stopped=not live and (journal or marker is not None),
        votes={} if progress is None else dict(progress.votes),
        decisions=remembered_decisions(loaded.audit, run, key is not None, loaded.messages),
    )


def _edits(answers: Mapping[str, JsonValue]) -> bool:
    """Whether an answer edits a call's input (an approval's ``{"approve", "input"}``)."""
    return any(isinstance(a, Mapping) and a.get("input") is not None for a in answers.values())


async def _graph_view(
    store: InboxStore, session_id: str, stored: StoredSession, recorded: list[RecordedAnswer]
) -> SessionView:
    """A graph's (or swarm's) session as :class:`SessionView`: the questions its record waits
    on; running while a started node's run claim is live, stopped when its record holds a run
    no process holds (a worker recovers it)."""
    from ..multiagent import node_session_id, read_record
    from ..sessions import claim_is_live, split_marker

    record = read_record(stored)
    live = False
    for node in record.started:
        node_stored = await store.load(node_session_id(session_id, node))
        if node_stored is not None:
            _, marker = split_marker(node_stored.pause)
            claim = node_stored.claim if marker is None else marker
            live = live or (isinstance(claim, dict) and claim_is_live(claim))
    return SessionView(
        session_id=session_id,
        agent=stored.agent,
        version=stored.version,
        messages=[],
        interrupts=list(record.questions),
        audit=[],
        recorded=recorded,
        running=live,
        stopped=record.status == "running" and not live,
        kind=record.kind if record.kind in ("graph", "swarm") else "graph",
    )
