"""A run as A2A events: what a stream (``message/stream``, ``tasks/resubscribe``) and a push
notification carry.

A stream starts with the task (``working``), goes on with ``working`` status updates as the run
goes (a tool call started or finished, its progress, the agent's text between them) and ends
with the task as the session then stands: ``input-required`` with its questions (the same
status message ``tasks/get`` shows), ``completed`` (its reply as the ``result`` artifact, then
the status), ``canceled`` or ``failed``. Every status carries the time it was sent.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from a2a.types import (
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from .._messages import Text
from .._stream import MessageAppended, ToolCallFinished, ToolCallProgress, ToolCallStarted
from ._wire import data_part

if TYPE_CHECKING:
    from .._stream import StreamEvent

__all__ = [
    "ENDS",
    "Progress",
    "Update",
    "final_events",
    "stamped",
    "status_event",
    "working_task",
]

Update = TaskStatusUpdateEvent | TaskArtifactUpdateEvent
"""What a stream carries after the task it starts with."""

ENDS = frozenset(
    {
        TaskState.TASK_STATE_INPUT_REQUIRED,
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
    }
)
"""The states a run stops in: a stream ends there, a push notification is sent."""

TOOL_CALL_KEY = "tool_call"


def stamped(status: TaskStatus) -> TaskStatus:
    """A copy of ``status`` carrying the time now (a receiver can refuse stale ones)."""
    out = TaskStatus()
    out.CopyFrom(status)
    out.timestamp.GetCurrentTime()
    return out


def status_event(task_id: str, status: TaskStatus) -> TaskStatusUpdateEvent:
    """The status update of task ``task_id`` (its context id is the same: one session)."""
    return TaskStatusUpdateEvent(task_id=task_id, context_id=task_id, status=stamped(status))


def _message(task_id: str, *parts: Part) -> Message:
    return Message(
        message_id=f"{task_id}:{uuid.uuid4().hex}",
        task_id=task_id,
        context_id=task_id,
        role=Role.ROLE_AGENT,
        parts=list(parts),
    )


def _working(task_id: str, text: str, data: dict[str, Any] | None = None) -> TaskStatus:
    parts = [Part(text=text)] + ([] if data is None else [data_part(data)])
    return TaskStatus(state=TaskState.TASK_STATE_WORKING, message=_message(task_id, *parts))


def working_task(task_id: str, text: str) -> Task:
    """Task ``task_id`` as a stream starts with it: ``working``, saying ``text``."""
    return Task(id=task_id, context_id=task_id, status=stamped(_working(task_id, text)))


def final_events(task: Task) -> list[Update]:
    """The events that end a stream on ``task`` as it now stands: its artifacts when it
    completed (each whole: ``last_chunk``), then its status."""
    events: list[Update] = []
    if task.status.state == TaskState.TASK_STATE_COMPLETED:
        for artifact in task.artifacts:
            events.append(
                TaskArtifactUpdateEvent(
                    task_id=task.id, context_id=task.id, artifact=artifact, last_chunk=True
                )
            )
    events.append(status_event(task.id, task.status))
    return events


class Progress:
    """A run's stream events as ``working`` status updates of task ``task_id``: a tool call
    started, its progress, its end (with its status), and the agent's text as it is added.
    Text deltas and the tool calls' input are not sent: the reply comes whole at the end."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self.tools: dict[str, str] = {}
        """The name of each tool call under way, by tool use id."""

    def updates(self, event: StreamEvent) -> list[TaskStatusUpdateEvent]:
        status = self._status(event)
        return [] if status is None else [status_event(self.task_id, status)]

    def _status(self, event: StreamEvent) -> TaskStatus | None:
        task = self.task_id
        call: dict[str, Any]
        if isinstance(event, ToolCallStarted):
            use = event.tool_use
            self.tools[use.id] = use.name
            call = {"id": use.id, "name": use.name, "status": "started"}
            return _working(task, f"Running {use.name}.", {TOOL_CALL_KEY: call})
        if isinstance(event, ToolCallProgress):
            use = event.tool_use
            call = {"id": use.id, "name": use.name, "progress": event.progress}
            if event.total is not None:
                call["total"] = event.total
            text = event.message or f"{use.name} is under way."
            return _working(task, text, {TOOL_CALL_KEY: call})
        if isinstance(event, ToolCallFinished):
            result = event.result
            name = self.tools.pop(result.tool_use_id, "the tool")
            call = {"id": result.tool_use_id, "name": name, "status": result.status}
            return _working(task, f"{name} finished ({result.status}).", {TOOL_CALL_KEY: call})
        if isinstance(event, MessageAppended) and event.message.role == "assistant":
            text = "".join(b.text for b in event.message.content if isinstance(b, Text))
            return _working(task, text) if text.strip() else None
        return None
