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

MCP 2025-11-25 has tasks of its own ("task augmentation"): a tool listed with
``execution.taskSupport`` ``"required"`` or ``"optional"`` is called with a ``task`` field in
the ``tools/call`` params, and the server answers with a ``CreateTaskResult``; ``tasks/get``,
``tasks/result`` and ``tasks/cancel`` follow it. mcp 2.3.0 has those types only: it checks a
2025-11-25 ``tools/call`` answer as a ``CallToolResult``, so :func:`start_augmented` sends that
one request through the session's raw channel and reads the answer itself.

Only imported once a server is connected (it imports the SDK).
"""

from __future__ import annotations

from typing import Any, Literal

from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp.shared.dispatcher import CallOptions, Outbound
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import (
    CallToolRequestParams,
    CallToolResult,
    CancelTaskRequest,
    CancelTaskRequestParams,
    CreateTaskResult,
    GetTaskPayloadRequest,
    GetTaskPayloadRequestParams,
    GetTaskRequest,
    GetTaskRequestParams,
    Request,
    RequestParams,
    Result,
    ServerCapabilities,
    Task,
    TaskMetadata,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

__all__ = [
    "EXTENSION",
    "RELATED_TASK",
    "TaskCreated",
    "TaskStarted",
    "TaskState",
    "TasksExtension",
    "UpdateTaskRequest",
    "augment_problem",
    "cancel_request",
    "get_request",
    "related_task",
    "result_request",
    "start_augmented",
    "update_request",
]

EXTENSION = "io.modelcontextprotocol/tasks"
"""The extension's identifier, advertised in the client's capabilities."""

RELATED_TASK = "io.modelcontextprotocol/related-task"
"""The ``_meta`` key with which a 2025-11-25 server ties a request of its own to a task."""


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


def cancel_request(task_id: str) -> CancelTaskRequest:
    return CancelTaskRequest(params=CancelTaskRequestParams(task_id=task_id))


def related_task(params: Any) -> str | None:
    """The task a server's request (an elicitation) belongs to, from its ``_meta`` (or None)."""
    meta = getattr(params, "meta", None)
    related = meta.get(RELATED_TASK) if isinstance(meta, dict) else None
    task_id = related.get("taskId") if isinstance(related, dict) else None
    return task_id if isinstance(task_id, str) else None


def _raw_channel(session: ClientSession) -> Outbound | None:
    """The session's raw request channel (a private attribute of mcp 2.3.0's session)."""
    channel = getattr(session, "_dispatcher", None)
    return channel if callable(getattr(channel, "send_raw_request", None)) else None


def augment_problem(session: ClientSession, capabilities: ServerCapabilities) -> str | None:
    """Why this session cannot call a tool as a 2025-11-25 task (None: it can)."""
    if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return f"protocol {session.protocol_version} has no task-augmented tools/call"
    requests = None if capabilities.tasks is None else capabilities.tasks.requests
    tools = None if requests is None else requests.tools
    if tools is None or tools.call is None:
        return "the server does not offer task-augmented tools/call (capabilities.tasks)"
    if _raw_channel(session) is None:
        return "the installed mcp package has no way to send a task-augmented tools/call"
    return None


async def start_augmented(
    session: ClientSession, name: str, arguments: dict[str, Any], read_timeout: float | None
) -> Task:
    """Call tool ``name`` asking for a task (2025-11-25): the task the server made.

    ``read_timeout`` bounds the wait for the answer (None: no bound)."""
    channel = _raw_channel(session)
    if channel is None:  # checked when the tools were listed; the SDK changed since
        raise RuntimeError("the installed mcp package cannot send a task-augmented tools/call")
    params = CallToolRequestParams(name=name, arguments=arguments, task=TaskMetadata())
    opts: CallOptions = {}
    if session.protocol_version is not None:  # as the SDK's own requests on this session say
        opts["headers"] = {MCP_PROTOCOL_VERSION_HEADER: session.protocol_version}
    if read_timeout is not None:
        opts["timeout"] = read_timeout
    raw = await channel.send_raw_request(
        "tools/call", params.model_dump(by_alias=True, mode="json", exclude_none=True), opts
    )
    return CreateTaskResult.model_validate(raw, by_name=False).task
