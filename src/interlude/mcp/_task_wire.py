"""The MCP tasks extension on the wire, over the official SDK's types and extension seams.

mcp 2.3.0 defines the tasks types (``mcp_types.Task``, ``GetTaskRequest``,
``GetTaskPayloadRequest``, ``InputRequests``/``InputResponses``) and the client extension seam
(``mcp.client.extension.ClientExtension`` with a ``ResultClaim`` on ``tools/call``) but ships no
tasks extension: nothing sends ``tasks/*`` for you, and ``tasks/update`` has no request type.
This module adds what is missing, as typed models sent through ``ClientSession.send_request``:

- :class:`TaskCreated`: a ``tools/call`` answered ``{"resultType": "task", "task": {...}}``;
- :class:`TaskState`: a ``tasks/get`` answer (a ``Task``, plus ``inputRequests`` while it is
  ``input_required``);
- :class:`UpdateTaskRequest`: ``tasks/update`` with ``{"taskId", "inputResponses"}``.

Only imported once a server is connected (it imports the SDK).
"""

from __future__ import annotations

from typing import Any, Literal

from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp_types import (
    CallToolResult,
    GetTaskPayloadRequest,
    GetTaskPayloadRequestParams,
    GetTaskRequest,
    GetTaskRequestParams,
    Request,
    RequestParams,
    Result,
    Task,
)
from pydantic import Field

__all__ = [
    "EXTENSION",
    "TaskCreated",
    "TaskStarted",
    "TaskState",
    "TasksExtension",
    "UpdateTaskRequest",
    "get_request",
    "result_request",
    "update_request",
]

EXTENSION = "io.modelcontextprotocol/tasks"
"""The extension's identifier, advertised in the client's capabilities."""


class TaskCreated(Result):
    """A ``tools/call`` the server turned into a task."""

    result_type: Literal["task"] = "task"
    task: Task


class TaskState(Result, Task):
    """A ``tasks/get`` answer: the task, and what it asks while ``input_required``."""

    input_requests: dict[str, Any] | None = None


class UpdateTaskParams(RequestParams):
    task_id: str
    input_responses: dict[str, Any] = Field(default_factory=dict)


class UpdateTaskRequest(Request[UpdateTaskParams, Literal["tasks/update"]]):
    """Answers to a task's input requests (the extension's ``tasks/update``)."""

    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateTaskParams


class TaskStarted(Exception):
    """Raised out of ``Client.call_tool`` when the server answers with a task: the tool's own
    loop follows the task from there (polling, and pausing when it asks something)."""

    def __init__(self, task: Task) -> None:
        super().__init__(f"the server started task {task.task_id}")
        self.task = task


async def _started(created: TaskCreated, _: ClaimContext) -> CallToolResult:
    raise TaskStarted(created.task)


class TasksExtension(ClientExtension):
    """Advertises the tasks extension and claims its ``"task"`` result of ``tools/call``."""

    identifier = EXTENSION

    def claims(self) -> tuple[ResultClaim[Any], ...]:
        return (ResultClaim(result_type="task", model=TaskCreated, resolve=_started),)


def get_request(task_id: str) -> GetTaskRequest:
    return GetTaskRequest(params=GetTaskRequestParams(task_id=task_id))


def result_request(task_id: str) -> GetTaskPayloadRequest:
    return GetTaskPayloadRequest(params=GetTaskPayloadRequestParams(task_id=task_id))


def update_request(task_id: str, responses: dict[str, Any]) -> UpdateTaskRequest:
    return UpdateTaskRequest(params=UpdateTaskParams(task_id=task_id, input_responses=responses))
