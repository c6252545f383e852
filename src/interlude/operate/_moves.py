"""A session's next move, decided in one place for the worker and every door.

:func:`carry_on` is the move a worker makes for a session that has something to do: recover a
run whose process stopped, apply the answers recorded for it (one resume per person, in the
order they answered, through an :class:`ApplyingStore` so the save that applies an answer
removes it), then settle the questions whose deadline passed. :class:`Operator` is what a door
calls: ``answer`` records answers through the inbox's rules (who may answer, the first answer
wins, edits checked, all failing closed with a typed refusal) and makes the move at once in
this process. A door only translates its wire format to these calls and maps the refusals.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ResumeError, SessionConflictError
from ._applying import ApplyingStore
from ._inbox import Inbox
from ._sessions import owner_of

if TYPE_CHECKING:
    from .._messages import JsonValue
    from .._stream import StreamEvent
    from ..sessions import InboxStore, RecordedAnswer
    from ._app import App
    from ._resumable import Outcome, Resumable

__all__ = ["Operator", "by_person", "carry_on", "check_queue"]

_log = logging.getLogger("interlude.worker")


async def carry_on(
    app: App, store: InboxStore, session_id: str, *, clock: Callable[[], float] = time.time
) -> Outcome | None:
    """Make ``session_id``'s next move (a node's session: its outermost graph's): how the
    last run it made ended, None when nothing ran. SessionConflictError when another process
    runs it now (nothing done)."""
    session_id = await owner_of(store, session_id)
    recorded = await store.recorded_answers(session_id)
    view = ApplyingStore(store, recorded)
    opened: Resumable = await app.open_async(session_id, view)
    if opened.kind != "agent":
        view.graph = session_id  # its answers count as applied once its record drops them
    last: Outcome | None = None
    if opened.needs_recovery:
        last = await opened.recover_async()
    if recorded:
        last = await by_person(opened, recorded) or last
        if view.waiting:  # about questions that are gone, or refused (logged): never to apply
            await store.clear_answers(session_id, max(r.seq for r in recorded))
    now = clock()
    if opened.is_paused and any(
        q.expires_at is not None and q.expires_at <= now for q in opened.interrupts
    ):
        last = await opened.resume_expired_async()
    return last


async def by_person(opened: Resumable, recorded: list[RecordedAnswer]) -> Outcome | None:
    """Apply recorded answers, one resume per person who answered (in the order they
    answered), while ``opened`` is paused; an answer whose question is no longer pending, or
    a person's answers the resume refuses (expired meanwhile), are logged and left. How the
    last resume that went through ended (None: none did)."""
    last: Outcome | None = None
    left = list(recorded)
    while left and opened.is_paused:
        pending = {q.id for q in opened.interrupts}
        usable = [r for r in left if r.interrupt_id in pending]
        for r in left:
            if r.interrupt_id not in pending:
                _log.warning("answer to %s by %r not applied: not pending", r.interrupt_id, r.by)
        if not usable:
            break
        by = usable[0].by
        group = [r for r in usable if r.by == by]
        left = [r for r in usable if r.by != by]
        answers = {r.interrupt_id: r.answer for r in group}
        shown = {r.interrupt_id: r.shown for r in group if r.shown is not None}
        try:
            last = await opened.resume_async(answers, by=by, shown=shown or None)
        except ResumeError as exc:  # e.g. expired meanwhile, or not what was shown
            _log.warning("answers by %r refused: %s", by, exc)
    return last


def check_queue(store: object, who: str) -> None:
    """ConfigurationError unless ``store`` keeps recorded answers (an ``InboxStore``): every
    answer goes through its queue, where the first one wins."""
    from ..sessions import InboxStore

    if not isinstance(store, InboxStore):
        from ..errors import ConfigurationError

        raise ConfigurationError(
            f"{who} answer through the store's answer queue, and {type(store).__name__} has "
            "none (record_answers, recorded_answers, clear_answers, sessions_to_resume)"
        )


class Operator:
    """The floor as the doors use it: ``app``'s sessions on ``store``.

    Every answer goes through :meth:`answer` (or :meth:`answer_stream`, for a door that
    streams the run): checked by the inbox's rules and recorded atomically, so an answer
    given through another door first wins and this one is refused with a typed error, then
    applied here at once (a worker that gets there first applies it instead)."""

    def __init__(
        self,
        app: App,
        store: InboxStore | str,
        *,
        signing_key: bytes | str | None = None,
        clock: Callable[[], float] | None = None,
        inbox: Inbox | None = None,
    ) -> None:
        self.app = app
        self.inbox = inbox or Inbox(store, app=app, signing_key=signing_key, clock=clock)
        """The inbox answers are recorded through (a given one gets ``app`` for its edit
        checks when it has none)."""
        if self.inbox.app is None:
            self.inbox.app = app
        self.store: InboxStore = self.inbox.store
        check_queue(self.store, "the operator floor's doors")

    def close(self) -> None:
        """Close the store if it was opened here from a URL."""
        self.inbox.close()

    async def open(self, session_id: str) -> Resumable:
        """The session's agent, graph or swarm, built by the App and loaded."""
        opened: Resumable = await self.app.open_async(session_id, self.store)
        return opened

    async def start(self, name: str, session_id: str) -> Resumable:
        """A new session ``session_id`` of ``name`` (SessionError if it exists)."""
        opened: Resumable = await self.app.start_async(name, session_id, self.store)
        return opened

    async def carry_on(self, session_id: str) -> Outcome | None:
        """The session's next move now (see :func:`carry_on`): how its last run ended; None
        when nothing ran, or another process holds it (that process makes the move)."""
        try:
            return await carry_on(self.app, self.store, session_id, clock=self.inbox.clock)
        except SessionConflictError:
            return None

    async def answer(
        self,
        session_id: str,
        answers: Mapping[str, JsonValue],
        *,
        by: str,
        groups: Collection[str] | None,
        shown: Mapping[str, str] | None = None,
    ) -> tuple[Resumable, Outcome | None]:
        """Record ``answers`` as ``by`` (a member of ``groups``; None: the operator, whose
        groups are not checked) and carry the session on: the session as it stands after,
        and how the run ended (None: another process carries it on). Refused (nothing
        recorded, nothing run): the typed errors of :meth:`Inbox.record_async`."""
        await self.inbox.record_async(session_id, answers, by=by, shown=shown, groups=groups)
        outcome = await self.carry_on(session_id)
        return await self.open(session_id), outcome

    async def answer_stream(
        self,
        session_id: str,
        answers: Mapping[str, JsonValue],
        *,
        by: str,
        groups: Collection[str] | None,
        shown: Mapping[str, str] | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """:meth:`answer` for a door that streams the run: the answers are recorded (or
        refused) before the first event, then the resume that applies them is streamed. If a
        worker took them first, the stream ends with the session as it stands."""
        recorded = await self.inbox.record_async(
            session_id, answers, by=by, shown=shown, groups=groups
        )
        view = ApplyingStore(self.store, await self.store.recorded_answers(session_id))
        agent: Any = await self.app.open_async(session_id, view)
        mine = {r.interrupt_id: r.answer for r in recorded}
        digests = {r.interrupt_id: r.shown for r in recorded if r.shown is not None}
        try:
            async for event in agent.resume_stream_async(
                mine, by=recorded[0].by, shown=digests or None
            ):
                yield event
        except (SessionConflictError, ResumeError):
            if any(r.seq in view.applied for r in recorded):
                raise  # this resume applied them and then failed: say so
            from .._stream import RunFinished

            yield RunFinished(standing(await self.open(session_id)))


def standing(opened: Resumable) -> Any:
    """An ``AgentResult`` for where an agent's session stands (its answers applied by
    another process): paused with its questions, or ended with its last reply."""
    from .._result import AgentResult

    if opened.is_paused:
        return AgentResult(stop_reason="interrupt", interrupts=list(opened.interrupts))
    messages = getattr(opened, "messages", [])
    last = messages[-1] if messages and messages[-1].role == "assistant" else None
    return AgentResult(stop_reason="end_turn", message=last)
