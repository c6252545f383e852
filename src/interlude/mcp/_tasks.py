"""A tool call the MCP server ran as a task (the tasks extension): polled, paused, answered.

The server answers ``tools/call`` with a task and runs the tool in the background. The tool's
body here polls ``tasks/get`` (never holding a request open while the task works) until:

- ``input_required``: each of the task's input requests (elicitations) is answered by the
  server's ``elicitation`` callback or becomes an interrupt, named from the question as in
  ``_elicit``. Before pausing, the call keeps ``{server, task, requests, names}`` as its
  checkpoint. On resume (in any process: the task lives on the server) the body runs again,
  gets the answers back from ``interrupt``, and sends them with ``tasks/update``, but only if
  the task still waits on exactly those requests: a run that stopped after sending them (its
  process was killed) left the task working or done, and the re-run just goes on polling. The
  tool is never called again.
- ``completed`` / ``failed``: ``tasks/result`` is the tool's result.
- ``cancelled``, or a task the server no longer has (expired): an error result naming it.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from .._messages import JsonValue, Text, ToolResult, ToolUse
from .._tools import ToolContext
from ..errors import McpServerError

if TYPE_CHECKING:
    from ._task_wire import TaskState
    from ._tool import McpTool

__all__ = ["CHECKPOINT_KEY", "MAX_WAIT", "follow_task", "pending_task"]

CHECKPOINT_KEY = "mcp_task"
"""Where a task's record sits in the call's checkpoint."""

MAX_WAIT = 3600.0
"""Seconds one run of the tool's body polls a task at most before giving up with an error."""

FIRST_POLL = 0.05
"""Seconds before the first ``tasks/get`` (the server's ``pollInterval`` is a floor)."""

LONGEST_POLL = 2.0
"""Seconds between polls at most, however long the task runs (the backoff's ceiling)."""


def pending_task(context: ToolContext, server: str) -> dict[str, JsonValue] | None:
    """The task record this call kept when it paused on that server's task (None if none)."""
    kept = context.checkpoint
    if not isinstance(kept, dict):
        return None
    record = kept.get(CHECKPOINT_KEY)
    if isinstance(record, dict) and record.get("server") == server:
        return record
    return None


async def follow_task(
    tool: McpTool,
    tool_use: ToolUse,
    context: ToolContext,
    task_id: str,
    record: dict[str, JsonValue] | None = None,
) -> ToolResult:
    """Follow task ``task_id`` to its result; ``record`` is the checkpoint of a pause on it
    (whose answers are sent first, unless they already reached the task)."""
    from mcp.shared.exceptions import MCPError

    follow = _Follow(tool, tool_use, context, task_id)
    try:
        if record is not None:
            await follow.answer_kept(record)
        return await follow.to_the_end()
    except MCPError as exc:  # the server refused a tasks/* request: the task is gone
        return follow.error(
            f"MCP server {tool.server.name!r} no longer has task {task_id} of "
            f"{tool.remote_name!r} (it expired or was dropped: {exc.message}); its answer was "
            "not delivered and its result is lost"
        )
    except McpServerError as exc:
        return follow.error(f"{exc} (task {task_id} of {tool.remote_name!r})")


class _Follow:
    """One run of the body over one task."""

    def __init__(self, tool: McpTool, tool_use: ToolUse, context: ToolContext, task_id: str):
        self.tool = tool
        self.tool_use = tool_use
        self.context = context
        self.task_id = task_id
        self.sent: dict[str, Any] = {}
        """The input requests this run answered (the task may still show them a moment)."""
        self.asked: dict[str, int] = {}

    def error(self, text: str) -> ToolResult:
        return ToolResult(self.tool_use.id, "error", [Text(text)])

    async def _request(self, request: Any, result_type: Any) -> Any:
        return await self.tool.server._task_request(request, result_type)

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
        from mcp_types import CallToolResult

        from ._results import result_from_mcp
        from ._task_wire import result_request

        deadline = time.monotonic() + MAX_WAIT
        wait = FIRST_POLL
        status, message = "", None
        told = 0
        while True:
            state = await self.state()
            floor = (state.poll_interval or 0) / 1000
            if state.status != status:  # a new phase: look again soon
                wait = FIRST_POLL
            if state.status == "working" and state.status_message not in (None, message):
                told += 1  # status messages, counted: the task gives no figures
                self.context.report_progress(told, None, state.status_message)
            status, message = state.status, state.status_message
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
            waiting = state.input_requests or {}
            if state.status == "input_required" and waiting and waiting != self.sent:
                problem = _unsupported(waiting)
                if problem is not None:
                    return self.error(problem)
                self._keep(waiting)
                await self._update(await self._answers(waiting))
                self.sent = waiting
                continue
            if time.monotonic() > deadline:
                return self.error(
                    f"task {self.task_id} of {self.tool.remote_name!r} was still "
                    f"{state.status!r} after {MAX_WAIT:.0f} s of polling"
                )
            await asyncio.sleep(max(wait, floor))
            wait = min(wait * 1.5, LONGEST_POLL)

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
