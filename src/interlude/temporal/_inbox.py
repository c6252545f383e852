"""``TemporalInbox``: the web inbox (``interlude.server``) on paused agent workflows.

The list is the visibility listing of the running workflows whose ``InterludePending`` search
attribute is true, each asked what it waits on through its ``pending`` query (the listing is
eventually consistent; the query is not). A session is a workflow id: its page shows the
pending questions while it runs and, once it has ended, its conversation, audit trail and
outcome from its result. An answer goes to the workflow's ``answer`` Update and the call
returns once the workflow has accepted it (its validator applies ``resume``'s checks; a refused
answer raises the same ResumeError and changes nothing): the workflow carries the run on by
itself, so there is no worker to run in the web process.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.common import QueryRejectCondition
from temporalio.service import RPCError, RPCStatusCode

from .. import errors
from .._interrupt import Interrupt
from ..sessions import PendingInterrupt, PendingQuery, RecordedAnswer, select_pending
from ._client import MAX_UPDATE_BYTES, AnswerTimeoutError, _as_interlude_error, _quote
from ._workflow import AGENT, NAMES, PENDING, json_size

if TYPE_CHECKING:
    from temporalio.client import WorkflowExecutionDescription, WorkflowHandle

    from .._audit import AuditEntry
    from .._messages import JsonValue, Message
    from ..operate import SessionView

__all__ = ["QueryTimeoutError", "TemporalInbox"]

log = logging.getLogger("interlude.temporal")


class QueryTimeoutError(errors.SessionError, TimeoutError):
    """A workflow did not answer its ``pending`` query in time: no worker polls its task
    queue (or every worker is busy). The inbox answers 504."""


class TemporalInbox:
    """The inbox's backend on agent workflows (``create_app(TemporalInbox(...), tokens=...)``).

    ``client`` is a connected ``temporalio.client.Client`` or a ``HOST:PORT`` to connect to on
    first use (in the serving event loop; ``namespace`` then applies). ``task_queue`` limits the
    list to workflows on that queue. ``query_timeout`` bounds each ``pending`` query (a
    workflow that does not answer is left out of the list and named in :attr:`skipped`);
    ``answer_timeout`` bounds the wait for the workflow to accept an answer (then
    :class:`AnswerTimeoutError`: the Update may still be applied later). At most
    ``max_workflows`` paused workflows are listed per pass, ``concurrency`` queried at a time.
    """

    applies = "the workflow"
    taken = "Your answer is accepted; the workflow carries the run on."

    def __init__(
        self,
        client: Client | str,
        *,
        namespace: str = "default",
        task_queue: str | None = None,
        query_timeout: float = 5.0,
        answer_timeout: float = 30.0,
        max_workflows: int = 1000,
        concurrency: int = 20,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._client = client if isinstance(client, Client) else None
        self._target = client if isinstance(client, str) else None
        self._namespace = namespace
        self._connecting: asyncio.Lock | None = None
        self.task_queue = task_queue
        self.query_timeout = query_timeout
        self.answer_timeout = answer_timeout
        self.max_workflows = max_workflows
        self.concurrency = concurrency
        self.clock: Callable[[], float] = clock or time.time
        self.skipped: tuple[tuple[str, str], ...] = ()
        """``(workflow id, why)`` of the paused workflows the last list left out."""

    async def client(self) -> Client:
        """The Temporal client (connecting on first use when given an address)."""
        if self._client is not None:
            return self._client
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._client is None:
                assert self._target is not None
                self._client = await Client.connect(self._target, namespace=self._namespace)
        return self._client

    # --- the list ---------------------------------------------------------------------------

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
        """The questions the paused workflows wait on, oldest first (filters as the stores')."""
        client = await self.client()
        query = f"{PENDING.name} = true AND ExecutionStatus = 'Running'"
        if agent is not None:
            query += f" AND {AGENT.name} = {_quote(agent)}"
        if name is not None:
            query += f" AND {NAMES.name} = {_quote(name)}"
        if self.task_queue is not None:
            query += f" AND TaskQueue = {_quote(self.task_queue)}"
        listed: dict[str, str | None] = {}
        async for execution in client.list_workflows(query, limit=self.max_workflows):
            listed[execution.id] = execution.typed_search_attributes.get(AGENT)
        gate = asyncio.Semaphore(self.concurrency)

        async def ask(workflow_id: str) -> list[Interrupt] | str:
            async with gate:
                try:
                    return await self._query(client.get_workflow_handle(workflow_id))
                except QueryTimeoutError as exc:
                    return str(exc)
                except RPCError as exc:
                    if exc.status == RPCStatusCode.NOT_FOUND:  # gone meanwhile
                        return []
                    return f"its pending query failed: {exc}"

        got = await asyncio.gather(*(ask(w) for w in listed))
        entries: list[PendingInterrupt] = []
        skipped: list[tuple[str, str]] = []
        for (workflow_id, agent_name), questions in zip(listed.items(), got, strict=True):
            if isinstance(questions, str):
                skipped.append((workflow_id, questions))
                continue
            entries.extend(
                PendingInterrupt(workflow_id, interrupt, interrupt.raised_at, agent_name)
                for interrupt in questions
            )
        for workflow_id, why in skipped:
            log.warning("the inbox leaves out workflow %r: %s", workflow_id, why)
        self.skipped = tuple(skipped)
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
        """Nothing waits between an answer and its application: the workflow takes it."""
        return {}

    async def _query(self, handle: WorkflowHandle[Any, Any]) -> list[Interrupt]:
        """The workflow's pending questions (empty once it has closed)."""
        try:
            data = await handle.query(
                "pending",
                reject_condition=QueryRejectCondition.NOT_OPEN,
                rpc_timeout=timedelta(seconds=self.query_timeout),
            )
        except WorkflowQueryRejectedError:  # closed meanwhile: nothing is pending
            return []
        except RPCError as exc:
            if exc.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
                raise QueryTimeoutError(
                    f"workflow {handle.id!r} did not answer its pending query within "
                    f"{self.query_timeout:g} s: is a worker (interlude temporal-worker) polling "
                    "its task queue?"
                ) from None
            raise
        return [Interrupt.from_dict(d) for d in data]

    # --- one session ------------------------------------------------------------------------

    async def session(self, session_id: str) -> SessionView:
        """The workflow as a session (a :class:`~interlude.server.WorkflowView`): its pending
        questions while it runs; its conversation, audit trail and outcome once it has ended.
        SessionError (404) if there is no such workflow."""
        from ..operate import WorkflowView

        client = await self.client()
        handle = client.get_workflow_handle(session_id)
        described = await self._describe(handle)
        status = "UNKNOWN" if described.status is None else described.status.name
        interrupts: list[Interrupt] = []
        messages: list[Message] = []
        audit: list[AuditEntry] = []
        outcome: dict[str, Any] = {"stop_reason": None, "reply": None, "failure": None}
        if described.status == WorkflowExecutionStatus.RUNNING:
            interrupts = await self._query(handle)
        elif described.status == WorkflowExecutionStatus.COMPLETED:
            result: dict[str, Any] = await handle.result()
            outcome["stop_reason"] = result.get("stop_reason")
            outcome["reply"] = result.get("text")
            messages, audit = _conversation(result.get("state"))
        else:
            try:
                await handle.result()
            except Exception as exc:
                cause = exc.__cause__ or exc
                outcome["failure"] = str(cause) or type(cause).__name__
        return WorkflowView(
            session_id=session_id,
            agent=described.typed_search_attributes.get(AGENT),
            version=described.history_length,
            messages=messages,
            interrupts=interrupts,
            audit=audit,
            running=status == "RUNNING" and not interrupts,
            workflow={
                "status": status,
                "run_id": described.run_id,
                "task_queue": described.task_queue,
                "started": _stamp(described.start_time),
                "closed": _stamp(described.close_time),
                **outcome,
            },
        )

    async def _describe(self, handle: WorkflowHandle[Any, Any]) -> WorkflowExecutionDescription:
        try:
            return await handle.describe()
        except RPCError as exc:
            if exc.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
                raise errors.SessionError(f"no workflow {handle.id!r} on Temporal") from None
            raise

    # --- answers ----------------------------------------------------------------------------

    async def answer(
        self,
        session_id: str,
        answers: Mapping[str, JsonValue],
        *,
        by: str,
        shown: Mapping[str, str] | None = None,
        groups: Collection[str] | None = None,
    ) -> list[RecordedAnswer]:
        """Send ``answers`` to the workflow's ``answer`` Update as ``by``, and return once the
        workflow has accepted them (it then carries the run on). Refused: the ResumeError its
        validator raised (nothing changed); NotPausedError for a closed workflow; SessionError
        for none; AnswerTimeoutError when no worker took it within ``answer_timeout``. With
        ``groups`` (``by``'s), NotAllowedToAnswerError for a question they may not answer now
        (checked against the workflow's pending query first)."""
        answers, by, shown, args = _checked(session_id, answers, by, shown)
        client = await self.client()
        handle = client.get_workflow_handle(session_id)
        now = self.clock()
        try:
            if groups is not None:
                await self._check_groups(handle, answers, groups, now, by)
            update = await handle.start_update(
                "answer",
                args=args,
                wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                rpc_timeout=timedelta(seconds=self.answer_timeout),
            )
            # A refused Update comes back from start_update with its outcome already known (the
            # server completes it at once): read it, without waiting for accepted ones.
            if getattr(update, "_known_outcome", None) is not None:
                await update.result()
        except WorkflowUpdateFailedError as exc:
            refused = _as_interlude_error(exc)
            if isinstance(refused, errors.ResumeError):
                raise refused from None
            # Accepted, and the run failed at once: the workflow's page shows its failure.
        except WorkflowUpdateRPCTimeoutOrCancelledError:
            raise AnswerTimeoutError(
                f"workflow {session_id!r} did not take the answer within {self.answer_timeout:g} "
                "s: is a worker (interlude temporal-worker) polling its task queue? The answer "
                "may still be applied later"
            ) from None
        except RPCError as exc:
            described = await self._describe(handle)  # SessionError when there is none
            if described.status not in (None, WorkflowExecutionStatus.RUNNING):
                raise errors.NotPausedError(
                    f"workflow {session_id!r} is closed ({described.status.name}): there is "
                    "nothing to answer"
                ) from None
            raise exc from None
        digests = dict(shown or {})
        return [
            RecordedAnswer(
                seq=n,
                interrupt_id=iid,
                answer=answer,
                by=by,
                at=now,
                shown=digests.get(iid),
            )
            for n, (iid, answer) in enumerate(answers.items(), 1)
        ]

    async def _check_groups(
        self,
        handle: WorkflowHandle[Any, Any],
        answers: Mapping[str, JsonValue],
        groups: Collection[str],
        now: float,
        by: str,
    ) -> None:
        """NotAllowedToAnswerError for a question ``by`` (in ``groups``) may not answer now,
        checked against the workflow's pending query (nothing sent when it cannot be)."""
        from ..operate import check_allowed

        try:
            asked = {i.id: i for i in await self._query(handle)}
        except QueryTimeoutError as exc:
            raise QueryTimeoutError(
                f"{exc}: who may answer could not be checked, so nothing was sent"
            ) from None
        check_allowed(asked, answers, groups, now, by)

    async def aclose(self) -> None:
        """Nothing to release: a Temporal client holds no resource to close."""


def _checked(
    session_id: str,
    answers: Mapping[str, JsonValue],
    by: str,
    shown: Mapping[str, str] | None,
) -> tuple[dict[str, JsonValue], str, dict[str, str] | None, list[Any]]:
    """The answers by question id (the keys the inbox shows name their workflow), ``by`` as
    recorded, the digests and the Update's arguments; ResumeInputError for none, or for more
    than an Update may carry."""
    from .._agent import check_by
    from ..operate import by_question_id

    if not isinstance(answers, Mapping) or not answers:
        raise errors.ResumeInputError("answer() takes a non-empty map of question id to answer")
    by = check_by(by)
    answers = by_question_id(session_id, answers)
    digests = None if shown is None else by_question_id(session_id, shown)
    args = [answers, by, digests]
    size = json_size(args)
    if size > MAX_UPDATE_BYTES:
        raise errors.ResumeInputError(
            f"the answers are {size} bytes of JSON, above the limit of {MAX_UPDATE_BYTES} "
            "bytes for any Update: answer with less"
        )
    return answers, by, digests, args


def _stamp(when: datetime | None) -> float | None:
    return None if when is None else when.timestamp()


def _graph_audit(entries: Any) -> list[AuditEntry]:
    """A graph's audit trail (each entry an agent's, with the ``node`` it went to) as entries
    (empty when it does not read as one)."""
    from .._audit import AuditEntry

    try:
        return [AuditEntry.from_dict(e) for e in entries or ()]
    except errors.InterludeError:
        return []


def _conversation(state: Any) -> tuple[list[Message], list[AuditEntry]]:
    """The conversation and audit trail of a finished run's ``export_state()`` (empty when
    the result omits it); a graph's (or swarm's): its audit trail, no conversation (each node
    agent's is in the state, under ``nodes``)."""
    from .._agent import decode_state

    if not isinstance(state, dict):
        return [], []
    record = state.get("record")
    if state.get("format") == "interlude.orchestration-state" and isinstance(record, dict):
        return [], _graph_audit(record.get("audit"))  # a graph's or swarm's: no conversation
    try:
        loaded = decode_state(state)
    except errors.InterludeError:
        return [], []
    return loaded.messages, loaded.audit
