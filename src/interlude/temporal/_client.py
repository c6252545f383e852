"""The client side: start an agent's workflow, see what it waits on, answer it, list the paused,
undo its run to a checkpoint (and carry on the run an undo left stopped)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import QueryRejectCondition, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from .. import errors
from .._interrupt import Interrupt
from .._messages import JsonValue
from ._workflow import AGENT, MEMO_PENDING, PENDING, WORKFLOW, Limits, json_size

__all__ = ["AgentClient", "AnswerTimeoutError", "recover", "undo"]

ANSWER_TIMEOUT = 60.0
"""How long ``AgentClient.answer`` waits by default (seconds)."""

MAX_UPDATE_BYTES = 3 * 512 * 1024
"""Answers above this (1.5 MiB of JSON) are refused by the client itself: Temporal's SDK fails
the workflow task that would carry them (even to refuse them), again and again."""


class AnswerTimeoutError(errors.SessionError, TimeoutError):
    """``AgentClient.answer`` waited longer than its ``timeout``: no worker took the Update, or
    the run took longer to pause again or end. The answer may still be applied later (or have
    been applied): see ``pending`` / ``result``."""


class AgentClient:
    """Agents as Temporal workflows, from the client side.

    ::

        agents = AgentClient(await Client.connect("localhost:7233"), task_queue="agents")
        workflow_id = await agents.start("ops", "Free some disk space")
        for question in await agents.pending(workflow_id): ...
        outcome = await agents.answer(workflow_id, {question_id: True}, by="alice")
    """

    def __init__(self, client: Client, *, task_queue: str) -> None:
        self.client = client
        self.task_queue = task_queue

    async def start(
        self,
        agent: str,
        prompt: str | None = None,
        *,
        state: Mapping[str, JsonValue] | None = None,
        workflow_id: str | None = None,
        limits: Limits | None = None,
    ) -> str:
        """Start agent ``agent`` on ``prompt`` (or on an ``export_state()``); its workflow id.
        ``limits`` sets when a paused run continues as new and the largest payload (model and
        tool requests and results, the continue-as-new input)."""
        workflow_id = workflow_id or f"interlude-{agent}-{uuid.uuid4()}"
        request: dict[str, Any] = {
            "agent": agent,
            "prompt": prompt,
            "state": None if state is None else dict(state),
        }
        if limits is not None:
            request["limits"] = limits.to_dict()
        await self.client.start_workflow(
            WORKFLOW,
            request,
            id=workflow_id,
            task_queue=self.task_queue,
            search_attributes=TypedSearchAttributes(
                [SearchAttributePair(AGENT, agent), SearchAttributePair(PENDING, False)]
            ),
        )
        return workflow_id

    def handle(self, workflow_id: str) -> WorkflowHandle[Any, Any]:
        return self.client.get_workflow_handle(workflow_id)

    async def pending(self, workflow_id: str) -> list[Interrupt]:
        """The questions the agent waits on (empty before it first pauses, and once it has
        finished, been terminated or cancelled).

        Read from the workflow's description (the memo it sets when it pauses: no worker
        involved); while an answer is being applied the questions answered are still listed
        (answering them again is refused). A run that recorded none there (questions above
        64 KiB of JSON, or a run started before the memo) is asked its ``pending`` query."""
        try:
            described = await self.handle(workflow_id).describe()
        except RPCError:
            described = None  # the query below raises what is wrong, as it always did
        if described is not None:
            if described.status != WorkflowExecutionStatus.RUNNING:
                return []
            recorded = (await described.memo()).get(MEMO_PENDING)
            if isinstance(recorded, list):
                return [Interrupt.from_dict(d) for d in recorded]
        try:
            data = await self.handle(workflow_id).query(
                "pending", reject_condition=QueryRejectCondition.NOT_OPEN
            )
        except WorkflowQueryRejectedError:  # closed: nothing is pending any more
            return []
        except (RPCError, WorkflowQueryFailedError):
            if await self._closed(workflow_id) is not None:
                return []
            raise
        return [Interrupt.from_dict(d) for d in data]

    async def _closed(self, workflow_id: str) -> str | None:
        return await _closed(self.client, workflow_id)

    async def answer(
        self,
        workflow_id: str,
        answers: Mapping[str, JsonValue],
        *,
        by: str | None = None,
        shown: Mapping[str, str] | None = None,
        timeout: float | None = ANSWER_TIMEOUT,  # noqa: ASYNC109 (also the Update's rpc timeout)
        partial: bool = False,
    ) -> dict[str, Any]:
        """Answer pending questions and wait until the run pauses again or ends: returns
        ``{"stop_reason", "text", "interrupts"}``. A refused answer raises the same ResumeError
        as ``Agent.resume`` (UnknownInterruptError, AnswerValidationError, ...); nothing changed.
        A closed workflow (completed, failed, terminated, ...) raises NotPausedError saying so.
        A run that fails after taking the answer raises its error (e.g. ModelError, or
        ReplayedException for a non-Interlude one). Waiting longer than ``timeout`` seconds
        (None: no limit), e.g. with no worker up, raises AnswerTimeoutError. ``partial=True``
        (a graph's run): the answered nodes' branches go on while other questions wait, as
        ``Graph.resume(partial=True)``; an agent's run refuses it (ResumeInputError)."""
        args: list[Any] = [dict(answers), by, None if shown is None else dict(shown)]
        if partial:  # sent only when asked for: workers before it take three arguments
            args.append(True)
        size = json_size(args)
        if size > MAX_UPDATE_BYTES:  # Temporal would wedge the workflow's task on it
            raise errors.ResumeInputError(
                f"the answers are {size} bytes of JSON, above the limit of {MAX_UPDATE_BYTES} "
                "bytes for any Update (Temporal refuses payloads above 2 MiB; the workflow's "
                "own limit is Limits.max_answer_bytes): answer with less"
            )
        return await _update(
            self.client,
            workflow_id,
            "answer",
            args,
            timeout,
            f"task queue {self.task_queue!r}",
            lambda how: errors.NotPausedError(
                f"workflow {workflow_id!r} is closed ({how}): there is nothing to answer"
            ),
        )

    async def undo(
        self,
        workflow_id: str,
        to: str,
        *,
        by: str | None = None,
        skip: Sequence[str] = (),
        dry_run: bool = False,
        timeout: float | None = ANSWER_TIMEOUT,  # noqa: ASYNC109 (also the Update's rpc timeout)
    ) -> dict[str, Any]:
        """:func:`undo` the run of workflow ``workflow_id`` to checkpoint ``to``."""
        return await undo(self, workflow_id, to, by=by, skip=skip, dry_run=dry_run, timeout=timeout)

    async def recover(
        self,
        workflow_id: str,
        *,
        timeout: float | None = ANSWER_TIMEOUT,  # noqa: ASYNC109 (also the Update's rpc timeout)
    ) -> dict[str, Any]:
        """:func:`recover`: carry on the run an undo left stopped at its checkpoint."""
        return await recover(self, workflow_id, timeout=timeout)

    async def result(self, workflow_id: str) -> dict[str, Any]:
        """The finished run: ``{"stop_reason", "text", "interrupts", "state"}``."""
        out: dict[str, Any] = await self.handle(workflow_id).result()
        return out

    async def paused(self, agent: str | None = None, *, names: str | None = None) -> list[str]:
        """Ids of the running workflows waiting on answers (of ``agent``; asking ``names``),
        from the search attributes: an inbox across all agents (eventually consistent)."""
        query = f"{PENDING.name} = true AND ExecutionStatus = 'Running'"
        if agent is not None:
            query += f" AND {AGENT.name} = {_quote(agent)}"
        if names is not None:
            query += f" AND InterludeInterruptNames = {_quote(names)}"
        return [w.id async for w in self.client.list_workflows(query)]


async def undo(
    client: Client | AgentClient,
    workflow_id: str,
    to: str,
    *,
    by: str | None = None,
    skip: Sequence[str] = (),
    dry_run: bool = False,
    timeout: float | None = ANSWER_TIMEOUT,  # noqa: ASYNC109 (also the Update's rpc timeout)
) -> dict[str, Any]:
    """Take the run of workflow ``workflow_id`` back to checkpoint ``to`` (an id of
    ``Agent.checkpoints()``, e.g. ``"m4"``), by the workflow's Update ``undo``: the
    compensations of the calls since run as activities, newest first, once each
    (``Agent.undo_async``; ``skip``: calls to leave as they are, ``by``: who undoes).

    ``dry_run=True`` returns the plan (``UndoPlan.to_dict()``: ``steps``, ``skipped``,
    ``keep``, ``stands``) and changes nothing. Otherwise returns ``{"stop_reason", "text",
    "interrupts", "stands"}``: ``"undone"``, standing ``"stopped"`` at the checkpoint (the
    workflow then waits for :func:`recover` to carry the run on) or ``"idle"`` (its run had
    ended there: the workflow completes); or ``"interrupt"`` when a compensation waits on a
    question (answer it with ``AgentClient.answer``: the undo then carries on).

    The run must wait on people (paused, with nothing in flight): else AgentBusyError. A
    refused undo raises what ``Agent.undo`` raises (UndoError naming the calls with no
    compensation, UnknownCheckpointError, ...); nothing changed. A closed workflow raises
    UndoError saying so. Waiting longer than ``timeout`` seconds raises AnswerTimeoutError."""
    request: dict[str, Any] = {"to": to, "by": by, "skip": list(skip), "dry_run": dry_run}
    temporal, where = _client_of(client)
    return await _update(
        temporal,
        workflow_id,
        "undo",
        [request],
        timeout,
        where,
        lambda how: errors.UndoError(
            f"workflow {workflow_id!r} is closed ({how}): its run can no longer be undone there"
        ),
    )


async def recover(
    client: Client | AgentClient,
    workflow_id: str,
    *,
    timeout: float | None = ANSWER_TIMEOUT,  # noqa: ASYNC109 (also the Update's rpc timeout)
) -> dict[str, Any]:
    """Carry on the run an :func:`undo` left stopped at its checkpoint (the workflow's Update
    ``recover``, ``Agent.recover_async``): returns ``{"stop_reason", "text", "interrupts"}``
    once it pauses again or ends. NotPausedError when the workflow holds no stopped run."""
    temporal, where = _client_of(client)
    return await _update(
        temporal,
        workflow_id,
        "recover",
        [],
        timeout,
        where,
        lambda how: errors.NotPausedError(
            f"workflow {workflow_id!r} is closed ({how}): there is nothing to recover"
        ),
    )


def _client_of(client: Client | AgentClient) -> tuple[Client, str]:
    """The Temporal client, and the task queue a worker should poll (in words)."""
    if isinstance(client, AgentClient):
        return client.client, f"task queue {client.task_queue!r}"
    return client, "the workflow's task queue"


async def _update(
    client: Client,
    workflow_id: str,
    name: str,
    args: list[Any],
    timeout: float | None,  # noqa: ASYNC109 (also the Update's rpc timeout)
    where: str,
    closed: Callable[[str], Exception],
) -> dict[str, Any]:
    """Run Update ``name`` and wait for its outcome: its failure as Interlude's error, no
    outcome within ``timeout`` seconds as AnswerTimeoutError, a closed workflow as
    ``closed(how it closed)``."""
    rpc_timeout = None if timeout is None else timedelta(seconds=timeout)
    backstop = None if timeout is None else timeout + 5.0  # the rpc timeout comes first
    handle = client.get_workflow_handle(workflow_id)
    try:
        out: dict[str, Any] = await asyncio.wait_for(
            handle.execute_update(name, args=args, rpc_timeout=rpc_timeout), backstop
        )
    except WorkflowUpdateFailedError as exc:
        raise _as_interlude_error(exc) from exc
    except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError) as exc:
        raise AnswerTimeoutError(
            f"no outcome for the {name} to workflow {workflow_id!r} within {timeout} s: is a "
            f"worker polling {where}? The Update may still be applied later; see pending() / "
            "result()"
        ) from exc
    except RPCError as exc:
        how = await _closed(client, workflow_id)
        if how is None:
            raise
        went = await moved_to(client, workflow_id) if how == "completed" else None
        if went is not None:
            raise errors.SessionMovedError(
                f"session {workflow_id!r} was moved to {went}: answer it there; nothing was "
                "changed here",
                target=went,
            ) from exc
        raise closed(how) from exc
    return out


async def moved_to(client: Client, workflow_id: str) -> str | None:
    """Where the run of workflow ``workflow_id`` went, when it ended moved (``move_out``);
    None while it runs, or when it ended otherwise."""
    if await _closed(client, workflow_id) is None:
        return None
    result = await moved_result(client, workflow_id)
    return None if result is None else result[0]


async def moved_result(
    client: Client, workflow_id: str
) -> tuple[str, dict[str, JsonValue] | None] | None:
    """(where it went, the state it left with) for a workflow that ended moved; else None."""
    try:
        out = await client.get_workflow_handle(workflow_id).result(follow_runs=False)
    except Exception:  # running, failed, unknown: it did not end moved
        return None
    if not isinstance(out, dict) or not isinstance(out.get("moved_to"), str):
        return None
    state = out.get("state")
    return out["moved_to"], state if isinstance(state, dict) else None


async def _closed(client: Client, workflow_id: str) -> str | None:
    """How the workflow closed ("completed", "terminated", ...), or None while it runs
    (or when it cannot be described)."""
    try:
        status = (await client.get_workflow_handle(workflow_id).describe()).status
    except RPCError:
        return None
    if status is None or status == WorkflowExecutionStatus.RUNNING:
        return None
    return status.name.lower().replace("_", " ")


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _as_interlude_error(exc: WorkflowUpdateFailedError) -> Exception:
    cause = exc.cause
    if not isinstance(cause, ApplicationError):
        return exc
    cls = getattr(errors, cause.type or "", None)
    message = cause.message
    details = cause.details[0] if cause.details else {}
    if cls is errors.AnswerValidationError and isinstance(details, dict):
        path = tuple(details.get("path") or ())
        return errors.AnswerValidationError(
            message, interrupt_id=str(details.get("interrupt_id")), path=path
        )
    if cls is errors.SessionMovedError:
        target = details.get("target") if isinstance(details, dict) else None
        return errors.SessionMovedError(message, target=str(target or ""))
    if cls is errors.UndoError:
        calls = details.get("calls") if isinstance(details, dict) else None
        return errors.UndoError(message, tuple(str(c) for c in calls or ()))
    if cls is errors.InterruptExpiredError:
        data = details.get("interrupt") if isinstance(details, dict) else None
        return errors.InterruptExpiredError(
            message, None if data is None else Interrupt.from_dict(data)
        )
    if isinstance(cls, type) and issubclass(cls, errors.InterludeError):
        try:
            return cls(message)
        except TypeError:  # a constructor of its own: keep the type's name
            pass
    if cause.type:  # the run failed with an error of its own (RuntimeError, ...)
        return errors.ReplayedException(cause.type, message)
    return exc
