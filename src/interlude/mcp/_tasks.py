"""A tool call the MCP server ran as a task: polled, paused, answered.

Two kinds of task reach here. The tasks extension (``io.modelcontextprotocol/tasks``): the
server answers ``tools/call`` with a task of its own accord. MCP 2025-11-25 task augmentation:
a tool listed with ``execution.taskSupport`` "required" (or "optional") is called asking for a
task (:func:`start_task`). Either way the tool's body polls ``tasks/get`` (never holding a
request open while the task works) until:

- ``input_required``, extension: each of the task's input requests (elicitations) is answered
  by the server's ``elicitation`` callback or becomes an interrupt, named from the question as
  in ``_elicit``. Before pausing, the call keeps ``{server, task, requests, names}`` as its
  checkpoint. On resume (in any process: the task lives on the server) the body runs again,
  gets the answers back from ``interrupt``, and sends them with ``tasks/update``, but only if
  the task still waits on exactly those requests: a run that stopped after sending them (its
  process was killed) left the task working or done, and the re-run just goes on polling. The
  tool is never called again.
- ``input_required``, 2025-11-25: ``tasks/result`` is sent; the server sends the task's
  questions on it (marked with the task's id) and answers it with the result once the task
  ends. A question is answered as a mid-call one is; at a pause the task is cancelled, and on
  resume the tool is called again (a new task), which asks again and gets the stored answer.
- ``completed`` / ``failed``: ``tasks/result`` is the tool's result.
- ``cancelled``, or a task the server no longer has (expired): an error result naming it.

A lying server cannot park the run: a wait between polls honours the task's ``pollInterval``
up to :data:`LONGEST_POLL_INTERVAL` only, and no wait or request goes past the deadline
(``McpServer(task_timeout=...)``, an hour by default), after which the model gets an error
result saying whether the server cancelled the task (``tasks/cancel``) or it may still run.

A task nobody will follow any more is cancelled on the server (``tasks/cancel``, best effort,
for :data:`GRACE` seconds at most, logged on ``interlude.mcp``): when the body following it is
cancelled (``agent.cancel()`` of a run waiting on it, a timeout), and when the pause that holds
it in its checkpoint is discarded (``discard_pause``: :func:`abandon_task`, which
``McpTool.abandon`` runs). A server without ``tasks/cancel`` leaves the task to its ``ttl``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from .._messages import JsonValue, Text, ToolResult, ToolUse
from .._tools import ToolContext
from ..errors import InterruptSignal, McpServerError

if TYPE_CHECKING:
    from ._task_wire import TaskState
    from ._tool import McpTool

__all__ = [
    "CHECKPOINT_KEY",
    "LONGEST_POLL_INTERVAL",
    "TASK_TIMEOUT",
    "abandon_task",
    "cancel_task",
    "follow_task",
    "kept_task",
    "pending_task",
    "start_task",
]

_log = logging.getLogger("interlude.mcp")

CHECKPOINT_KEY = "mcp_task"
"""Where a task's record sits in the call's checkpoint."""

TASK_TIMEOUT = 3600.0
"""Seconds one run of the tool's body follows a task at most, unless the server says otherwise
(``McpServer(task_timeout=...)``): then the model gets an error result."""

FIRST_POLL = 0.05
"""Seconds before the first ``tasks/get`` (the server's ``pollInterval`` is a floor)."""

LONGEST_BACKOFF = 2.0
"""Seconds between polls at most by our own backoff, however long the task runs."""

LONGEST_POLL_INTERVAL = 30.0
"""The longest ``pollInterval`` (in seconds) a task is granted: a server asking for more is
polled this often all the same."""

GRACE = 5.0
"""Seconds a request may run past the deadline (the last look at the task, a cancel)."""


def pending_task(context: ToolContext, server: str) -> dict[str, JsonValue] | None:
    """The task record this call kept when it paused on that server's task (None if none)."""
    return kept_task(context.checkpoint, server)


def kept_task(checkpoint: JsonValue, server: str) -> dict[str, JsonValue] | None:
    """The task record a call's ``checkpoint`` holds for that server's task (None if none)."""
    if not isinstance(checkpoint, dict):
        return None
    record = checkpoint.get(CHECKPOINT_KEY)
    if isinstance(record, dict) and record.get("server") == server:
        return record
    return None


async def abandon_task(tool: McpTool, tool_use: ToolUse, checkpoint: JsonValue) -> bool:
    """A call paused on a task was dropped with its pause: cancel the task its ``checkpoint``
    holds (``tasks/cancel``). Whether the server agreed (False too when it holds none)."""
    record = kept_task(checkpoint, tool.server.name)
    task_id = None if record is None else record.get("task")
    if not isinstance(task_id, str) or not task_id:
        return False
    return await cancel_task(tool, tool_use, task_id, "its pause was discarded")


async def cancel_task(tool: McpTool, tool_use: ToolUse, task_id: str, why: str) -> bool:
    """Ask the server to cancel task ``task_id`` (``tasks/cancel``, both kinds of task),
    waiting :data:`GRACE` seconds at most (a connection to make included): whether it agreed.
    A server that refuses, or cannot, leaves the task as it is. Logged either way."""
    from mcp_types import Result

    from ._task_wire import cancel_request

    send = tool.server._task_request(cancel_request(task_id), Result, read_timeout=GRACE)
    what = (
        f"task {task_id} of {tool.remote_name!r} (call {tool_use.id!r}) on MCP server "
        f"{tool.server.name!r}"
    )
    try:
        await asyncio.wait_for(send, GRACE)
    except Exception as exc:
        _log.warning("could not cancel %s (%s): %s", what, why, exc)
        return False
    _log.info("cancelled %s: %s", what, why)
    return True


async def start_task(tool: McpTool, tool_use: ToolUse, context: ToolContext) -> ToolResult:
    """Call ``tool`` asking for a task (2025-11-25 task augmentation) and follow the task."""
    from mcp.shared.exceptions import MCPError

    follow = _Follow(tool, tool_use, context, "", augmented=True)
    try:
        task = await tool.server._start_task(
            tool.remote_name, tool_use.input, follow.request_timeout()
        )
    except MCPError as exc:
        return follow.error(
            f"MCP server {tool.server.name!r} failed to run {tool.remote_name!r} as a task: "
            f"{exc.message}"
        )
    except McpServerError as exc:
        return follow.error(str(exc))
    follow.task_id = task.task_id
    return await _follow(follow, None)


async def follow_task(
    tool: McpTool,
    tool_use: ToolUse,
    context: ToolContext,
    task_id: str,
    record: dict[str, JsonValue] | None = None,
) -> ToolResult:
    """Follow task ``task_id`` (of the tasks extension) to its result; ``record`` is the
    checkpoint of a pause on it (whose answers are sent first, unless they already reached
    the task)."""
    return await _follow(_Follow(tool, tool_use, context, task_id), record)


async def _follow(follow: _Follow, record: dict[str, JsonValue] | None) -> ToolResult:
    from mcp.shared.exceptions import MCPError
    from mcp_types import REQUEST_TIMEOUT

    tool, task_id = follow.tool, follow.task_id
    try:
        if record is not None:
            await follow.answer_kept(record)
        return await follow.to_the_end()
    except asyncio.CancelledError:  # nobody follows it any more (agent.cancel(), a timeout)
        await follow.abandoned()
        raise
    except MCPError as exc:  # the server refused a tasks/* request: the task is gone
        if exc.code == REQUEST_TIMEOUT:
            return await follow.gave_up(f"MCP server {tool.server.name!r} did not answer in time")
        return follow.error(
            f"MCP server {tool.server.name!r} no longer has task {task_id} of "
            f"{tool.remote_name!r} (it expired or was dropped: {exc.message}); its answer was "
            "not delivered and its result is lost"
        )
    except McpServerError as exc:
        return follow.error(f"{exc} (task {task_id} of {tool.remote_name!r})")


class _Follow:
    """One run of the body over one task."""

    def __init__(
        self,
        tool: McpTool,
        tool_use: ToolUse,
        context: ToolContext,
        task_id: str,
        *,
        augmented: bool = False,
    ):
        self.tool = tool
        self.tool_use = tool_use
        self.context = context
        self.task_id = task_id
        self.augmented = augmented
        """A 2025-11-25 task (asked for by the call), rather than one of the extension."""
        self.sent: dict[str, Any] = {}
        """The input requests this run answered (the task may still show them a moment)."""
        self.asked: dict[str, int] = {}
        timeout = tool.server.task_timeout
        self.deadline = None if timeout is None else time.monotonic() + timeout

    def error(self, text: str) -> ToolResult:
        return ToolResult(self.tool_use.id, "error", [Text(text)])

    def left(self) -> float | None:
        """Seconds until the deadline (None: there is none)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def request_timeout(self) -> float | None:
        """How long a request may take: the server's ``timeout``, and never more than
        :data:`GRACE` past the deadline."""
        left = self.left()
        bounds = [self.tool.server.timeout, None if left is None else left + GRACE]
        known = [b for b in bounds if b is not None]
        return max(min(known), 0.1) if known else None

    def next_wait(self, backoff: float, poll_interval_ms: float | None) -> float:
        """Seconds until the next poll: the backoff, no sooner than the task's
        ``pollInterval`` (up to :data:`LONGEST_POLL_INTERVAL`), never past the deadline."""
        floor = min(max(poll_interval_ms or 0, 0) / 1000, LONGEST_POLL_INTERVAL)
        wait = max(backoff, floor)
        left = self.left()
        return wait if left is None else max(min(wait, left), 0)

    async def _request(self, request: Any, result_type: Any) -> Any:
        return await self.tool.server._task_request(
            request, result_type, read_timeout=self.request_timeout()
        )

    async def state(self) -> TaskState:
        from ._task_wire import TaskState, get_request

        state: TaskState = await self._request(get_request(self.task_id), TaskState)
        return state

    async def answer_kept(self, record: dict[str, JsonValue]) -> None:
        """The resume of a pause on this task: send its answers unless they were sent."""
        requests = record.get("requests")
        asked = record.get("asked")
        assert isinstance(requests, dict) and isinstance(asked, dict)
        self.asked = {str(k): int(v) for k, v in asked.items() if isinstance(v, int)}
        responses = await self._answers(requests)  # all known now (or the next question stops)
        state = await self.state()
        waiting = state.input_requests or {}
        if state.status == "input_required" and waiting == requests:
            from mcp.shared.exceptions import MCPError

            try:
                await self._update(responses)
            except MCPError:  # refused: fine if another run's answers got there first
                again = await self.state()
                if again.status == "input_required" and again.input_requests == requests:
                    raise
        # else they reached the task already (a run stopped after sending them): not again
        self.sent = requests

    async def to_the_end(self) -> ToolResult:
        """Poll until the task ends, answering what it asks on the way."""
        backoff = FIRST_POLL
        status, message = "", None
        told = 0
        while True:
            state = await self.state()
            if state.status != status:  # a new phase: look again soon
                backoff = FIRST_POLL
            if state.status == "working" and state.status_message not in (None, message):
                told += 1  # status messages, counted: the task gives no figures
                self.context.report_progress(told, None, state.status_message)
            status, message = state.status, state.status_message
            ended = await self._ended(state)
            if ended is not None:
                return ended
            left = self.left()
            if left is not None and left <= 0:
                return await self.gave_up(f"it was still {state.status!r}")
            waiting = state.input_requests or {}
            if state.status == "input_required" and self.augmented:
                return await self._collect()
            if state.status == "input_required" and waiting and waiting != self.sent:
                problem = _unsupported(waiting)
                if problem is not None:
                    return self.error(problem)
                self._keep(waiting)
                await self._update(await self._answers(waiting))
                self.sent = waiting
                continue
            await asyncio.sleep(self.next_wait(backoff, state.poll_interval))
            backoff = min(backoff * 1.5, LONGEST_BACKOFF)

    async def _ended(self, state: TaskState) -> ToolResult | None:
        """The call's result if the task has ended (None while it goes on)."""
        from mcp_types import CallToolResult

        from ._results import result_from_mcp
        from ._task_wire import result_request

        if state.status == "failed" and not await self._has_result():
            return self.error(
                f"task {self.task_id} of {self.tool.remote_name!r} on MCP server "
                f"{self.tool.server.name!r} failed: {state.status_message or 'no reason given'}"
            )
        if state.status in ("completed", "failed"):
            result = await self._request(result_request(self.task_id), CallToolResult)
            return result_from_mcp(self.tool_use.id, result, limit=self.tool.server.max_output)
        if state.status == "cancelled":
            return self.error(
                f"task {self.task_id} of {self.tool.remote_name!r} on MCP server "
                f"{self.tool.server.name!r} was cancelled: {state.status_message or ''}".strip()
            )
        return None

    async def _collect(self) -> ToolResult:
        """A 2025-11-25 task waits for input: ``tasks/result`` brings its questions (each
        answered as a mid-call question is), then its result. At a pause the task is
        cancelled: on resume the tool is called again and asks again."""
        from ._results import result_from_mcp

        server = self.tool.server
        timeout = self.request_timeout()
        try:
            result = await self.tool._converse(
                lambda call: server._task_result(self.task_id, call, timeout),
                self.tool_use,
                self.context,
                self.asked,
            )
        except InterruptSignal:
            await self._cancel("the run paused on its question (the call asks again on resume)")
            raise
        return result_from_mcp(self.tool_use.id, result, limit=server.max_output)

    async def gave_up(self, why: str) -> ToolResult:
        """The error result of a task followed no further (``why``: what was seen last)."""
        timeout, left = self.tool.server.task_timeout, self.left()
        late = timeout is not None and left is not None and left <= 0
        after = f" after {timeout:g} s (task_timeout)" if late else ""
        fate = (
            "it was cancelled"
            if await self._cancel()
            else "it may still be running on the server, and its result is not fetched"
        )
        return self.error(
            f"gave up on task {self.task_id} of {self.tool.remote_name!r} on MCP server "
            f"{self.tool.server.name!r}{after}: {why}; {fate}"
        )

    async def _cancel(self, why: str = "it is followed no further") -> bool:
        """Ask the server to cancel the task (``tasks/cancel``, in both kinds of task):
        whether it agreed. A server that refuses, or cannot, leaves the task as it is."""
        if not self.task_id:
            return False
        return await cancel_task(self.tool, self.tool_use, self.task_id, why)

    async def abandoned(self) -> None:
        """The body was cancelled while it followed the task: cancel the task too, for
        :data:`GRACE` seconds at most (the request goes on in the MCP thread even if this
        wait is cancelled again)."""
        sending = asyncio.ensure_future(self._cancel("the run following it was cancelled"))
        with contextlib.suppress(asyncio.CancelledError):  # cancelled again: do not wait
            await asyncio.shield(sending)

    async def _has_result(self) -> bool:
        """Whether a failed task has a result to give (a tool error) rather than none."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CallToolResult

        from ._task_wire import result_request

        try:
            await self._request(result_request(self.task_id), CallToolResult)
        except MCPError:
            return False
        return True

    def _keep(self, requests: dict[str, Any]) -> None:
        """Keep what the task asks (and the ask counts before it) with the call."""
        self.context.checkpoint = {
            CHECKPOINT_KEY: {
                "server": self.tool.server.name,
                "task": self.task_id,
                "requests": requests,
                "asked": dict(self.asked),
            }
        }

    async def _answers(self, requests: dict[str, Any]) -> dict[str, JsonValue]:
        """The answers to ``requests`` (in key order, so names and repeats are stable); an
        interrupt stops the run at the first one nobody answered yet."""
        from mcp_types import ElicitRequest

        out: dict[str, JsonValue] = {}
        for key in sorted(requests):
            params = ElicitRequest.model_validate(requests[key]).params
            answer = await self.tool._answer(params, self.tool_use, self.context, self.asked)
            out[key] = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
        return out

    async def _update(self, responses: dict[str, JsonValue]) -> None:
        from mcp_types import EmptyResult

        from ._task_wire import update_request

        await self._request(update_request(self.task_id, responses), EmptyResult)


def _unsupported(requests: dict[str, Any]) -> str | None:
    """Why Interlude cannot answer ``requests`` (None: all are elicitations it can)."""
    for key, request in requests.items():
        method = request.get("method") if isinstance(request, dict) else None
        if method != "elicitation/create":
            return (
                f"the task asks {key!r} with {method!r}; Interlude answers only "
                "elicitation/create input requests"
            )
    return None
