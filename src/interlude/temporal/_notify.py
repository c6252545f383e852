"""Notifications of a run on Temporal: the workflow decides what is due (its timers are
durable), an activity delivers it.

A paused workflow sends ``asked`` for each new question, ``escalated`` and ``deadline_near``
when their moments come (a workflow timer, kept in the history across worker restarts),
``expired`` when a deadline settles a question and ``answered`` when an answer does. Delivery
is the ``interlude.notify`` activity, retried by Temporal: at least once, each notification
with the same id the store-backed notifier would give it (receivers de-duplicate by it). A
worker whose App has no ``notify=`` sends nothing and schedules nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from ._registry import lookup

if TYPE_CHECKING:
    from .._agent import Agent
    from .._interrupt import Interrupt
    from ..multiagent import Graph, Swarm
    from ..notify import Notifications

__all__ = ["NOTIFY_ACTIVITY", "RunNotices", "notify_activity"]

NOTIFY_ACTIVITY = "interlude.notify"
_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=5),
    maximum_attempts=20,
    non_retryable_error_types=["PermanentNotificationError"],
)


@activity.defn(name=NOTIFY_ACTIVITY)
async def notify_activity(messages: list[dict[str, Any]]) -> None:
    """Deliver ``messages`` to every target of the worker's App (one failure: all again)."""
    from ..errors import NotificationError

    settings = lookup(activity.info().task_queue).app.notifications
    if settings is None:
        return
    for message in messages:
        for target in settings.targets:
            try:
                await target.send(message)
            except NotificationError as exc:
                if exc.permanent:
                    raise ApplicationError(
                        f"{target.name}: {exc}", type="PermanentNotificationError"
                    ) from None
                raise


class RunNotices:
    """What a workflow has notified of its run, and what it owes."""

    def __init__(self, task_queue: str, workflow_id: str, agent: str) -> None:
        self.settings: Notifications | None = lookup(task_queue).app.notifications
        self.session_id = workflow_id
        self.agent = agent
        self.sent: set[str] = set()

    def next_moment(self, questions: Iterable[Interrupt]) -> float | None:
        """The earliest escalation or warning still owed (epoch seconds), or None."""
        moments = [
            t for event, q, t in self._timed(questions) if self._id(q, event) not in self.sent
        ]
        return min(moments) if moments else None

    async def send_due(self, questions: list[Interrupt], now: float) -> None:
        """``asked`` for new questions, and escalations and warnings whose moment came."""
        due = [("asked", q, now) for q in questions]
        due += [(e, q, t) for e, q, t in self._timed(questions) if t <= now]
        await self._send(due)

    async def send_closed(
        self, before: list[Interrupt], agent: Agent | Graph | Swarm, now: float
    ) -> None:
        """``answered`` or ``expired`` for the questions of ``before`` no longer pending (of an
        agent, or of a graph: its audit entries, each also naming its node, are read as an
        agent's)."""
        from .._audit import AuditEntry

        pending = {q.id for q in agent.interrupts}
        entries = [e if isinstance(e, AuditEntry) else AuditEntry.from_dict(e) for e in agent.audit]
        last = {e.interrupt_id: e for e in entries if e.settles}
        due = []
        for q in before:
            entry = last.get(q.id)
            if q.id in pending or entry is None or self._id(q, "asked") not in self.sent:
                continue
            event = "expired" if entry.expired else "answered"
            answer = {"by": entry.by, "at": entry.at, "answer": entry.answer}
            due.append((event, q, entry.at, {"answer": answer}))
        await self._send(due)

    def _timed(self, questions: Iterable[Interrupt]) -> list[tuple[str, Interrupt, float]]:
        if self.settings is None:
            return []
        out = []
        for q in questions:
            if q.escalate_after is not None:
                out.append(("escalated", q, q.raised_at + q.escalate_after))
            warn = q.warn_before if q.warn_before is not None else self.settings.warn_before
            if q.expires_at is not None and warn is not None:
                out.append(("deadline_near", q, q.expires_at - warn))
        return out

    def _id(self, question: Interrupt, event: str) -> str:
        from ..notify import notification_id

        return notification_id(self.session_id, question.id, event)

    async def _send(self, due: list[tuple[Any, ...]]) -> None:
        if self.settings is None or not self.settings.targets:
            return
        from urllib.parse import quote

        base = self.settings.inbox_url
        url = (
            None
            if base is None
            else f"{base.rstrip('/')}/sessions/{quote(self.session_id, safe='')}"
        )
        messages = []
        for event, question, at, *extra in due:
            nid = self._id(question, event)
            if nid in self.sent:
                continue
            self.sent.add(nid)
            message: dict[str, Any] = {
                "id": nid,
                "event": event,
                "session_id": self.session_id,
                "agent": self.agent,
                "question": question.to_dict(),
                "at": at,
                "url": url,
            }
            if extra:
                message.update(extra[0])
            messages.append(message)
        if not messages:
            return
        try:
            await workflow.execute_activity(
                NOTIFY_ACTIVITY,
                messages,
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=_RETRY,
            )
        except ActivityError as exc:  # a notification is not the run: it goes on
            workflow.logger.error(
                "notifications %s not delivered: %s", [m["id"] for m in messages], exc.cause
            )
