"""What the inbox's routes read and answer through: an :class:`InboxBackend`.

Two exist. :class:`StoreBackend` works on a session store (``interlude.Inbox``):
answers are recorded there and a worker applies them. ``interlude.temporal.TemporalInbox``
works on paused agent workflows: the list comes from Temporal's visibility listing and each
workflow's ``pending`` query, and an answer goes to the workflow's ``answer`` Update (it
carries the run on itself). The routes know only this protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._inbox import SessionView

if TYPE_CHECKING:
    from .._messages import JsonValue
    from ..sessions import InboxStore, PendingInterrupt, RecordedAnswer
    from ._app import App

__all__ = ["InboxBackend", "StoreBackend", "WorkflowView"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowView(SessionView):
    """A session that is a workflow: the :class:`SessionView` plus what Temporal says of it
    (``status``, ``run_id``, ``task_queue``, ``started``, ``closed``, and once it has ended
    ``stop_reason``, ``reply`` or ``failure``)."""

    workflow: dict[str, Any]


@runtime_checkable
class InboxBackend(Protocol):
    """Where the inbox finds the questions and sends the answers.

    Errors are the session errors the store's ``Inbox`` raises, which the routes map to HTTP
    statuses: SessionError (404, no such session), NotAllowedToAnswerError (403), ResumeError
    (409: not paused, unknown question, deadline passed), SessionConflictError (409, already
    answered),
    AnswerValidationError / ResumeInputError (422), a TimeoutError (504: no one took the
    answer or the query in time)."""

    clock: Callable[[], float]
    applies: str
    """Who carries a run on once answered, as the pages say it ("a worker")."""
    taken: str
    """What the page says once an answer is taken."""

    async def pending(
        self,
        *,
        name: str | None = None,
        tool_name: str | None = None,
        older_than: datetime | float | None = None,
        limit: int | None = None,
        agent: str | None = None,
        expiring_before: datetime | float | None = None,
    ) -> list[PendingInterrupt]:
        """The waiting questions, oldest first."""
        ...

    async def answered(self, session_ids: Collection[str]) -> dict[str, dict[str, str]]:
        """For each session, the questions answered but not yet applied: ``{id: by}``."""
        ...

    async def session(self, session_id: str) -> SessionView:
        """One session: its conversation, pending questions, audit trail."""
        ...

    async def answer(
        self,
        session_id: str,
        answers: Mapping[str, JsonValue],
        *,
        by: str,
        shown: Mapping[str, str] | None = None,
        groups: Collection[str] | None = None,
    ) -> list[RecordedAnswer]:
        """Hand over answers as ``by`` (checked as ``resume`` checks them; a refused answer
        changes nothing); what was taken. With ``groups`` (``by``'s), a question they may not
        answer now is refused (NotAllowedToAnswerError, 403)."""
        ...

    async def aclose(self) -> None:
        """Release what the backend opened (called when the application stops)."""
        ...


class StoreBackend:
    """The inbox on a session store: answers are recorded for a worker to apply."""

    applies = "a worker"
    taken = "Your answer is recorded; a worker carries the run on."

    def __init__(
        self,
        store: InboxStore | str,
        *,
        signing_key: bytes | str | None = None,
        app: App | None = None,
    ) -> None:
        from ._inbox import Inbox

        self.inbox = Inbox(store, signing_key=signing_key, app=app)
        self.clock: Callable[[], float] = self.inbox.clock

    @property
    def store(self) -> InboxStore:
        return self.inbox.store

    async def pending(self, **filters: Any) -> list[PendingInterrupt]:
        return await self.inbox.pending_async(**filters)

    async def answered(self, session_ids: Collection[str]) -> dict[str, dict[str, str]]:
        answered: dict[str, dict[str, str]] = {}
        for session_id in session_ids:
            recorded = await self.inbox.store.recorded_answers(session_id)
            answered[session_id] = {r.interrupt_id: r.by for r in recorded}
        return answered

    async def session(self, session_id: str) -> SessionView:
        return await self.inbox.session_async(session_id)

    async def answer(
        self,
        session_id: str,
        answers: Mapping[str, JsonValue],
        *,
        by: str,
        shown: Mapping[str, str] | None = None,
        groups: Collection[str] | None = None,
    ) -> list[RecordedAnswer]:
        return await self.inbox.record_async(session_id, answers, by=by, shown=shown, groups=groups)

    async def aclose(self) -> None:
        self.inbox.close()
