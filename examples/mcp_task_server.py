"""A task-capable MCP server (a small box office) for the docs' MCP Tasks example and the
tests, built on the official SDK's extension API: ``python examples/mcp_task_server.py PORT``
serves streamable HTTP on 127.0.0.1.

The SDK (mcp 2.3.0) ships the tasks types (``mcp_types.Task``, ``GetTaskRequestParams``, ...)
and the extension seams (``mcp.server.extension.Extension``: new methods, a ``tools/call``
interceptor) but no tasks extension itself; this one is small and in memory. A call of a tool
named in ``TASK_TOOLS`` answers at once with ``{"resultType": "task", "task": {...}}`` and runs
in the background; ``tasks/get`` shows its state (with ``inputRequests`` while it is
``input_required``), ``tasks/update`` answers them, ``tasks/result`` gives the tool's result.

Each event is appended as a line to the file named by ``MCP_TEST_LOG`` (if set); when
``MCP_TEST_UPDATE_MARKER`` names a file, it is written as a ``tasks/update`` is taken.
``MCP_TEST_TASK_TTL`` (milliseconds) sets how long a task is kept; ``MCP_TEST_POLL_INTERVAL``
(milliseconds) the ``pollInterval`` every task reports (a lying server says 1e9: eleven days).
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime
import os
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    GetTaskPayloadRequestParams,
    GetTaskRequestParams,
    RequestParams,
    TextContent,
)

TASK_TOOLS = {"book", "crunch", "survey", "stall"}
TTL_MS = int(os.environ.get("MCP_TEST_TASK_TTL", "600000"))
POLL_MS = int(float(os.environ.get("MCP_TEST_POLL_INTERVAL", "100")))


def log(line: str) -> None:
    path = os.environ.get("MCP_TEST_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat()


class _Task:
    """One task: its state, the questions it waits on, and the tool's result."""

    def __init__(self) -> None:
        self.id = uuid.uuid4().hex
        self.status = "working"
        self.message: str | None = None
        self.created = _now()
        self.updated = self.created
        self.born = time.monotonic()
        self.requests: dict[str, Any] | None = None
        self.responses: asyncio.Future[dict[str, Any]] | None = None
        self.result: dict[str, Any] | None = None
        self.runner: asyncio.Task[None] | None = None

    def expired(self) -> bool:
        return (time.monotonic() - self.born) * 1000 > TTL_MS

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "taskId": self.id,
            "status": self.status,
            "createdAt": self.created,
            "lastUpdatedAt": self.updated,
            "ttl": TTL_MS,
            "pollInterval": POLL_MS,
        }
        if self.message is not None:
            out["statusMessage"] = self.message
        if self.status == "input_required" and self.requests is not None:
            out["inputRequests"] = self.requests
        return out

    def set(self, status: str, message: str | None = None) -> None:
        self.status, self.message, self.updated = status, message, _now()

    async def ask(self, requests: dict[str, Any]) -> dict[str, Any]:
        """Wait in ``input_required`` until ``tasks/update`` answers ``requests``."""
        self.responses = asyncio.get_running_loop().create_future()
        self.requests = requests
        self.set("input_required", "waiting for the user")
        answers = await self.responses
        self.requests, self.responses = None, None
        self.set("working")
        return answers


TASKS: dict[str, _Task] = {}
CURRENT: contextvars.ContextVar[_Task] = contextvars.ContextVar("CURRENT")


def _elicit(message: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
            },
        },
    }


async def book(show: str) -> str:
    """Book seats for a show (asks how many, as a task)."""
    task = CURRENT.get()
    log(f"book start {show}")
    answers = await task.ask(
        {"seats": _elicit(f"How many seats for {show}?", {"n": {"type": "integer"}})}
    )
    answer = answers["seats"]
    if answer.get("action") != "accept":
        log(f"book declined {show}")
        return f"not booked: {answer.get('action')}"
    seats = answer["content"]["n"]
    await asyncio.sleep(float(os.environ.get("MCP_TEST_AFTER_UPDATE", "0")))
    log(f"book done {show} {seats}")
    return f"booked {seats} seats for {show}"


async def survey(topic: str) -> str:
    """Two rounds of questions, as a task."""
    task = CURRENT.get()
    log(f"survey start {topic}")
    first = await task.ask(
        {
            "name": _elicit("Your name?", {"name": {"type": "string"}}),
            "age": _elicit("Your age?", {"age": {"type": "integer"}}),
        }
    )
    second = await task.ask({"colour": _elicit("Favourite colour?", {"c": {"type": "string"}})})
    name = first["name"]["content"]["name"]
    age = first["age"]["content"]["age"]
    colour = second["colour"]["content"]["c"]
    log(f"survey done {name} {age} {colour}")
    return f"{name} ({age}) likes {colour}"


async def crunch(seconds: float) -> str:
    """Work for ``seconds`` without asking anything, as a task."""
    task = CURRENT.get()
    log("crunch start")
    steps = 10
    for i in range(steps):
        await asyncio.sleep(seconds / steps)
        task.message = f"{(i + 1) * 100 // steps}%"
    log("crunch done")
    return f"crunched for {seconds} s"


async def stall() -> str:
    """Never finishes: the task stays ``working`` for ever, as a task."""
    log("stall start")
    await asyncio.Event().wait()
    return "unreachable"


class Tasks(Extension):
    """The tasks extension, in memory."""

    identifier = "io.modelcontextprotocol/tasks"

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding("tasks/get", GetTaskRequestParams, self.get),
            MethodBinding("tasks/result", GetTaskPayloadRequestParams, self.result),
            MethodBinding("tasks/update", UpdateParams, self.update),
        )

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        if params.name not in TASK_TOOLS:
            return await call_next(ctx)
        task = _Task()
        TASKS[task.id] = task

        async def run() -> None:
            CURRENT.set(task)
            try:
                result = await call_next(ctx)
                task.result = _dump(result)
                failed = bool(task.result.get("isError"))
                task.set("failed" if failed else "completed")
            except Exception as exc:  # the tool broke: the task failed
                task.result = CallToolResult(
                    content=[TextContent(type="text", text=str(exc))], is_error=True
                ).model_dump(by_alias=True, mode="json", exclude_none=True)
                task.set("failed", str(exc))

        task.runner = asyncio.get_running_loop().create_task(run())
        log(f"tools/call {params.name} -> task")
        return {"resultType": "task", "task": task.wire()}

    async def get(
        self, ctx: ServerRequestContext[Any, Any], params: GetTaskRequestParams
    ) -> HandlerResult:
        task = _find(params.task_id)
        log(f"tasks/get {task.status}")
        return task.wire()

    async def result(
        self, ctx: ServerRequestContext[Any, Any], params: GetTaskPayloadRequestParams
    ) -> HandlerResult:
        task = _find(params.task_id)
        if task.result is None:
            raise MCPError(INVALID_PARAMS, f"task {task.id} has no result yet ({task.status})")
        log("tasks/result")
        return task.result

    async def update(
        self, ctx: ServerRequestContext[Any, Any], params: UpdateParams
    ) -> HandlerResult:
        task = _find(params.task_id)
        waiting = task.responses
        if task.status != "input_required" or waiting is None or waiting.done():
            log(f"tasks/update refused ({task.status})")
            raise MCPError(
                INVALID_PARAMS, f"task {task.id} is not waiting for input ({task.status})"
            )
        assert task.requests is not None
        if set(params.input_responses) != set(task.requests):
            log("tasks/update refused (keys)")
            raise MCPError(INVALID_PARAMS, "the responses do not answer the task's input requests")
        _mark_update()
        log("tasks/update")
        waiting.set_result(dict(params.input_responses))
        return {}


class UpdateParams(RequestParams):
    """``tasks/update`` params: the task and the answers to its input requests."""

    task_id: str
    input_responses: dict[str, Any]


def _mark_update() -> None:
    marker = os.environ.get("MCP_TEST_UPDATE_MARKER")
    if marker:
        with open(marker, "w", encoding="utf-8") as f:
            f.write("updated")


def _find(task_id: str) -> _Task:
    task = TASKS.get(task_id)
    if task is not None and task.expired():
        del TASKS[task_id]
        if task.runner is not None:
            task.runner.cancel()
        task = None
    if task is None:
        log("task not found")
        raise MCPError(INVALID_PARAMS, f"task {task_id} not found")
    return task


def _dump(result: Any) -> dict[str, Any]:
    if isinstance(result, dict):
        return result
    dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


server = MCPServer("tasks", log_level="CRITICAL", extensions=[Tasks()])
for _fn in (book, survey, crunch, stall):
    server.add_tool(_fn)

if __name__ == "__main__":
    import anyio

    anyio.run(lambda: server.run_streamable_http_async(port=int(sys.argv[1])))
