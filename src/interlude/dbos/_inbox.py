"""``DBOSInbox``: the web inbox (``interlude.server``) and the CLI on DBOS runs.

The list is :func:`~interlude.dbos.pending` (the paused runs' attributes: no worker is asked).
A session is a workflow id: its page shows the pending questions while it waits and, once it
has ended, its conversation, audit trail and outcome from its result. An answer goes through
:func:`~interlude.dbos.answer`, the one answer path: the workflow checks it as ``resume`` does
and a refused answer raises the embedded error, changing nothing. The workflow carries the run
on by itself, so there is no worker to run in the web process.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .. import errors
from .._interrupt import Interrupt
from ..sessions import PendingInterrupt, PendingQuery, RecordedAnswer, select_pending
from . import _common as c
from ._client import ENDED, _client, _status, answer, pending

if TYPE_CHECKING:
    from dbos import WorkflowStatus

    from .._audit import AuditEntry
    from .._messages import JsonValue, Message
    from ..operate import WorkflowView

__all__ = ["DBOSInbox", "describe", "view_of", "wait_outcome"]


class DBOSInbox:
    """The inbox's backend on DBOS runs (``create_app(DBOSInbox(url), tokens=...)``): ``url``
    is the DBOS system database (PostgreSQL) the workers run on. ``answer_timeout`` bounds the
    wait for the run to take an answer (then :class:`~interlude.dbos.AnswerTimeoutError`: it
    may still be applied later)."""

    applies = "the run"
    taken = "Your answer is accepted; the run carries on."

    def __init__(
        self,
        url: str,
        *,
        answer_timeout: float = 30.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.url = url
        self.answer_timeout = answer_timeout
        self.clock: Callable[[], float] = clock or time.time

    async def pending(
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
        """The questions the paused runs wait on, oldest first (filters as the stores')."""
        entries = await pending(self.url, agent=agent)
        wanted = PendingQuery(
            name=name,
            tool_name=tool_name,
            older_than=older_than,
            newer_than=newer_than,
            limit=limit,
            agent=agent,
            expiring_before=expiring_before,
        )
        return select_pending(entries, wanted)

    async def answered(self, session_ids: Collection[str]) -> dict[str, dict[str, str]]:
        """Nothing waits between an answer and its application: the run takes it."""
        return {}

    async def session(self, session_id: str) -> WorkflowView:
        """The run as a session (a :class:`~interlude.operate.WorkflowView`); SessionError
        (404) if there is no such run."""
        status = await describe(self.url, session_id)
        if status is None:
            raise errors.SessionError(f"no run {session_id!r} on the DBOS system database")
        return view_of(status)

    async def answer(
        self,
        session_id: str,
        answers: Mapping[str, JsonValue],
        *,
        by: str,
        shown: Mapping[str, str] | None = None,
        groups: Collection[str] | None = None,
    ) -> list[RecordedAnswer]:
        """Send ``answers`` to the run as ``by`` through :func:`~interlude.dbos.answer` and
        return once the run took them. Refused: the embedded ResumeError (nothing changed);
        SessionError for no such run; AnswerTimeoutError when no worker took it in time. With
        ``groups`` (``by``'s), NotAllowedToAnswerError for a question they may not answer now
        (checked against the questions the run's attributes hold; nothing is sent)."""
        from .._agent import check_by
        from ..operate import by_question_id, check_allowed

        if not isinstance(answers, Mapping) or not answers:
            raise errors.ResumeInputError("answer() takes a non-empty map of question id to answer")
        by = check_by(by)
        answers = by_question_id(session_id, answers)
        digests = None if shown is None else by_question_id(session_id, shown)
        status = await _status(_client(self.url), session_id, output=False)
        if status is None:
            raise errors.SessionError(f"no run {session_id!r} on the DBOS system database")
        now = self.clock()
        if groups is not None:
            asked = {i.id: i for i in _questions(status)}
            unseen = sorted(i for i in answers if i not in asked)
            if unseen:  # the run checks answers, not groups: only questions it shows are
                raise errors.UnknownInterruptError(  # answered with the groups checked here
                    f"session {session_id!r} does not wait on {unseen[0]!r} now: answer the "
                    "questions it waits on (their ids as listed)"
                )
            check_allowed(asked, answers, groups, now, by)
        await answer(
            self.url, session_id, answers, by=by, shown=digests, timeout=self.answer_timeout
        )
        kept = dict(digests or {})
        return [
            RecordedAnswer(
                seq=n, interrupt_id=iid, answer=value, by=by, at=now, shown=kept.get(iid)
            )
            for n, (iid, value) in enumerate(answers.items(), 1)
        ]

    async def aclose(self) -> None:
        """Nothing to release: the clients are shared (``close_clients`` closes them)."""


async def describe(url: str, session_id: str) -> WorkflowStatus | None:
    """The run's DBOS status, with its input and output (None: no such run)."""
    found = await _client(url).list_workflows_async(
        workflow_ids=[session_id], load_input=True, load_output=True
    )
    return found[0] if found else None


def _questions(status: WorkflowStatus) -> list[Interrupt]:
    """The questions a run waits on now (from its attributes; none unless it is paused)."""
    attrs = status.attributes or {}
    if status.status != "PENDING" or not attrs.get(c.PENDING):
        return []
    return [Interrupt.from_dict(q) for q in attrs.get(c.QUESTIONS) or ()]


def _agent_of(status: WorkflowStatus) -> str | None:
    attrs = status.attributes or {}
    if attrs.get(c.AGENT):
        return str(attrs[c.AGENT])
    inputs: Any = status.input
    args = inputs.get("args") if isinstance(inputs, dict) else getattr(inputs, "args", None)
    if args and isinstance(args[0], dict) and isinstance(args[0].get("agent"), str):
        return str(args[0]["agent"])
    return None


def _stamp(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000.0


def view_of(status: WorkflowStatus) -> WorkflowView:
    """A run's status as a session: its questions while it waits; its conversation, audit
    trail and outcome once it has ended (``workflow``: ``status``, ``executor_id``, ``queue``,
    ``started``, ``closed``, ``pause``, ``stop_reason``, ``reply``, ``failure``)."""
    from ..operate import WorkflowView

    attrs = status.attributes or {}
    interrupts = _questions(status)
    messages: list[Message] = []
    audit: list[AuditEntry] = []
    outcome: dict[str, Any] = {"stop_reason": None, "reply": None, "failure": None}
    if status.status == "SUCCESS" and isinstance(status.output, dict):
        outcome["stop_reason"] = status.output.get("stop_reason")
        outcome["reply"] = status.output.get("text")
        messages, audit = _conversation(status.output.get("state"))
    elif status.status in ENDED:
        error = status.error
        outcome["failure"] = (str(error) or type(error).__name__) if error else status.status
    return WorkflowView(
        session_id=status.workflow_id,
        agent=_agent_of(status),
        version=int(attrs.get(c.PAUSE) or 0),
        messages=messages,
        interrupts=interrupts,
        audit=audit,
        running=status.status in ("PENDING", "ENQUEUED", "DELAYED") and not interrupts,
        workflow={
            "status": status.status,
            "executor_id": status.executor_id,
            "queue": status.queue_name,
            "started": _stamp(status.created_at),
            "closed": _stamp(status.completed_at),
            "pause": int(attrs.get(c.PAUSE) or 0),
            **outcome,
        },
    )


def _conversation(state: Any) -> tuple[list[Message], list[AuditEntry]]:
    """The conversation and audit trail of a finished run's ``export_state()`` (empty when it
    does not read as one)."""
    from .._agent import decode_state

    if not isinstance(state, dict):
        return [], []
    try:
        loaded = decode_state(state)
    except errors.InterludeError:
        return [], []
    return loaded.messages, loaded.audit


async def wait_outcome(
    url: str,
    session_id: str,
    *,
    after_pause: int = 0,
    timeout: float = 60.0,  # noqa: ASYNC109 (a polling deadline)
    queued: float | None = None,
) -> dict[str, Any] | None:
    """Where the run stands once it paused again (a pause numbered above ``after_pause``) or
    ended: ``{"status", "stop_reason", "text", "interrupts"}``; None when neither happened in
    ``timeout`` s, or when it still waits on the queue (no worker took it) after ``queued`` s."""
    started = time.monotonic()
    while True:
        status = await describe(url, session_id)
        if status is not None:
            attrs = status.attributes or {}
            view = view_of(status)
            if status.status in ENDED or (
                view.interrupts and int(attrs.get(c.PAUSE) or 0) > after_pause
            ):
                return {
                    "status": status.status,
                    "stop_reason": "interrupt" if view.interrupts else view.workflow["stop_reason"],
                    "text": view.workflow["reply"],
                    "failure": view.workflow["failure"],
                    "interrupts": view.interrupts,
                }
        waited = time.monotonic() - started
        waiting = status is None or status.status in ("ENQUEUED", "DELAYED")
        if waited > timeout or (queued is not None and waiting and waited > queued):
            return None
        await asyncio.sleep(0.05)
