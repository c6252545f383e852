"""The client side: start an agent's workflow, see what it waits on, answer it, list the paused."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ApplicationError

from .. import errors
from .._interrupt import Interrupt
from .._messages import JsonValue
from ._workflow import AGENT, PENDING, WORKFLOW, Limits

__all__ = ["AgentClient"]


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
        ``limits`` sets when a paused run continues as new and the largest model request."""
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
        """The questions the agent waits on (empty while it runs or once it has finished)."""
        data = await self.handle(workflow_id).query("pending")
        return [Interrupt.from_dict(d) for d in data]

    async def answer(
        self,
        workflow_id: str,
        answers: Mapping[str, JsonValue],
        *,
        by: str | None = None,
        shown: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Answer pending questions and wait until the run pauses again or ends: returns
        ``{"stop_reason", "text", "interrupts"}``. A refused answer raises the same ResumeError
        as ``Agent.resume`` (UnknownInterruptError, AnswerValidationError, ...); nothing changed."""
        try:
            out: dict[str, Any] = await self.handle(workflow_id).execute_update(
                "answer", args=[dict(answers), by, None if shown is None else dict(shown)]
            )
        except WorkflowUpdateFailedError as exc:
            raise _as_interlude_error(exc) from exc
        return out

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
    if cls is errors.InterruptExpiredError:
        data = details.get("interrupt") if isinstance(details, dict) else None
        return errors.InterruptExpiredError(
            message, None if data is None else Interrupt.from_dict(data)
        )
    if isinstance(cls, type) and issubclass(cls, errors.ResumeError):
        return cls(message)
    return exc
