"""An MCP server's tool as an Interlude tool: its spec, its annotations, and its results."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from .._messages import JsonValue, Text, ToolResult, ToolUse
from .._tools import ToolContext, ToolSpec
from ..errors import McpServerError
from ._elicit import Elicitation, to_elicit_result
from ._results import result_from_mcp
from ._thread import call_in_thread

if TYPE_CHECKING:
    import mcp.types

    from ._server import McpServer

__all__ = [
    "ActiveCall",
    "McpTool",
    "QuestionWithdrawn",
    "ToolAnnotations",
    "UrlElicitationRequired",
    "result_from_mcp",
]

T = TypeVar("T")

_URL_ROUNDS = 10
"""How often one run of a tool may be sent again after the user visited the pages a server
sent them to (-32042) before the call gives up."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolAnnotations:
    """What an MCP server says about a tool, with the MCP spec's defaults filled in.

    These are hints from the server, not guarantees: trust them as much as you trust the
    server. ``destructive`` is False for a read-only tool and True when the server says nothing;
    ``idempotent`` is True for a read-only tool or one hinted idempotent; ``open_world`` (the
    tool reaches outside systems) is True unless the server says otherwise.
    """

    title: str | None = None
    read_only: bool = False
    destructive: bool = True
    idempotent: bool = False
    open_world: bool = True

    @classmethod
    def from_mcp(cls, hints: mcp.types.ToolAnnotations | None) -> ToolAnnotations:
        if hints is None:
            return cls()
        read_only = bool(hints.read_only_hint)
        return cls(
            title=hints.title,
            read_only=read_only,
            destructive=not read_only and hints.destructive_hint is not False,
            idempotent=read_only or bool(hints.idempotent_hint),
            open_world=hints.open_world_hint is not False,
        )


class McpTool:
    """One tool of an :class:`~interlude.mcp.McpServer`, run on the server when called.

    ``annotations`` holds the server's hints; ``idempotent`` (read by recovery: a call in
    doubt after a crash runs again without asking) follows them. ``as_task`` says whether a
    call asks the server for a task (the tool's ``execution.taskSupport``, MCP 2025-11-25). A
    server that cannot be reached gives the model an error result naming it; the next call
    connects again.
    """

    def __init__(
        self,
        server: McpServer,
        remote: mcp.types.Tool,
        name: str,
        *,
        as_task: bool = False,
    ) -> None:
        self.server = server
        self.as_task = as_task
        self.remote_name = remote.name
        """The tool's name on the server (``name`` may carry a prefix)."""
        self._name = name
        self.annotations = ToolAnnotations.from_mcp(remote.annotations)
        self.idempotent = self.annotations.idempotent
        description = remote.description or self.annotations.title or remote.name
        schema = dict(remote.input_schema)
        schema.pop("title", None)
        self._spec = ToolSpec(name, description, schema)
        self.output_schema: dict[str, JsonValue] | None = remote.output_schema

    def __repr__(self) -> str:
        return f"McpTool({self._name!r}, server={self.server.name!r})"

    @property
    def policy_source(self) -> str:
        """Where a policy sees this tool come from: ``mcp:<server name>``."""
        return f"mcp:{self.server.name}"

    @property
    def name(self) -> str:
        return self._name

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    async def aclose(self) -> None:
        """Close the server's connection (the agent's ``aclose`` calls this)."""
        await self.server.aclose()

    async def abandon(self, tool_use: ToolUse, checkpoint: JsonValue) -> None:
        """A call of this tool paused on an MCP task was dropped with its pause
        (``discard_pause``): ask the server to cancel the task (``tasks/cancel``), best
        effort, so it stops waiting for answers that will never come."""
        from ._tasks import abandon_task

        await abandon_task(self, tool_use, checkpoint)

    async def run(self, tool_use: ToolUse, context: ToolContext) -> ToolResult:
        """Call the tool on the server; a question the server asks meanwhile is answered by
        the server's ``elicitation`` callback or becomes an interrupt (see ``_elicit``).

        A server that answers -32042 (the user must first visit some pages) asks those as
        URL-mode questions; once each is accepted, the call is sent again.

        A server that runs the call as a task (the tasks extension) is polled until the task
        ends; what the task asks pauses the run, and its answers go back with ``tasks/update``
        on resume, in any process (see ``_tasks``). A tool called ``as_task`` asks for a task
        (2025-11-25), followed the same way."""
        from ._task_wire import TaskStarted
        from ._tasks import follow_task, pending_task, start_task

        kept = pending_task(context, self.server.name)
        if kept is not None:  # resumed after a pause on a task: the tool is not called again
            return await follow_task(self, tool_use, context, str(kept["task"]), kept)
        if self.as_task:
            return await start_task(self, tool_use, context)
        asked: dict[str, int] = {}
        for _ in range(_URL_ROUNDS):
            try:
                result = await self._run_once(tool_use, context, asked)
            except TaskStarted as started:
                return await follow_task(self, tool_use, context, started.task.task_id)
            except UrlElicitationRequired as needed:
                refused = await self._visit(needed, tool_use, context, asked)
                if refused is None:
                    continue
                return ToolResult(tool_use.id, "error", [Text(refused)])
            except McpServerError as exc:
                return ToolResult(tool_use.id, "error", [Text(str(exc))])
            return result_from_mcp(tool_use.id, result, limit=self.server.max_output)
        text = (
            f"MCP server {self.server.name!r} still sends the user to a web page after "
            f"{_URL_ROUNDS} visits; {self.remote_name!r} was not run"
        )
        return ToolResult(tool_use.id, "error", [Text(text)])

    async def _run_once(
        self, tool_use: ToolUse, context: ToolContext, asked: dict[str, int]
    ) -> mcp.types.CallToolResult:
        def send(call: ActiveCall) -> Coroutine[Any, Any, mcp.types.CallToolResult]:
            return self.server._call(self.remote_name, tool_use.input, call)

        return await self._converse(send, tool_use, context, asked)

    async def _converse(
        self,
        send: Callable[[ActiveCall], Coroutine[Any, Any, T]],
        tool_use: ToolUse,
        context: ToolContext,
        asked: dict[str, int],
    ) -> T:
        """Run ``send(call)`` on the MCP loop and answer the questions the server asks on
        ``call`` meanwhile; an interrupt ends the request and leaves its question unanswered."""
        call = ActiveCall(asyncio.get_running_loop(), context.report_progress)
        future = call_in_thread(send(call))
        future.add_done_callback(call.finished)
        try:
            while True:
                item = await call.queue.get()
                if item is None:
                    break
                params, reply = item
                try:
                    answer = await self._answer(params, tool_use, context, asked)
                except BaseException:  # an interrupt (or a failure): end the server's call,
                    future.cancel()  # and leave its question unanswered (never a made-up one)
                    _settle(reply, QuestionWithdrawn())
                    raise
                _settle(reply, answer)
        finally:
            if not future.done():
                future.cancel()
        return future.result()

    async def _visit(
        self,
        needed: UrlElicitationRequired,
        tool_use: ToolUse,
        context: ToolContext,
        asked: dict[str, int],
    ) -> str | None:
        """Ask the user to visit each page; None when they all did, else why not."""
        for params in needed.elicitations:
            answer = await self._answer(params, tool_use, context, asked)
            if answer.action != "accept":
                return (
                    f"MCP server {self.server.name!r} needs the user to visit {params.url} "
                    f"before {self.remote_name!r} can run; the user answered {answer.action!r}"
                )
        return None

    async def _answer(
        self,
        params: mcp.types.ElicitRequestParams,
        tool_use: ToolUse,
        context: ToolContext,
        asked: dict[str, int],
    ) -> mcp.types.ElicitResult:
        question = Elicitation.from_params(
            params, server=self.server.name, tool=self.name, tool_use=tool_use
        )
        repeat = asked.get(question.digest, 0)
        asked[question.digest] = repeat + 1
        if repeat:
            question = replace(question, repeat=repeat)
        url_mode = question.schema is None
        handler = self.server.elicitation
        if handler is not None:
            answer = handler(question)
            if inspect.isawaitable(answer):
                answer = await answer
            if answer is not None:
                _check_answer(question, answer)
                return to_elicit_result(answer, url_mode)
        from pydantic import WithJsonSchema

        answer = context.interrupt(
            question.name,
            question.reason,
            response_type=Annotated[Any, WithJsonSchema(question.answer_schema)],
        )
        return to_elicit_result(answer, url_mode)


def _settle(reply: concurrent.futures.Future[Any], answer: Any) -> None:
    """Answer the server's question (or withdraw it), unless its call ended meanwhile."""
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        if isinstance(answer, BaseException):
            reply.set_exception(answer)
        else:
            reply.set_result(answer)


class QuestionWithdrawn(Exception):
    """The run paused on a server's question: it is left unanswered (its call is ended)."""


class UrlElicitationRequired(Exception):
    """A call refused with -32042: the user must visit the pages in ``elicitations`` first."""

    def __init__(self, error: Any) -> None:
        from mcp.shared.exceptions import UrlElicitationRequiredError

        super().__init__(error.message)
        self.elicitations = UrlElicitationRequiredError.from_error(error.error).elicitations

    @staticmethod
    def matches(error: Any) -> bool:
        from mcp_types import URL_ELICITATION_REQUIRED

        return bool(error.code == URL_ELICITATION_REQUIRED)


def _check_answer(question: Elicitation, answer: JsonValue) -> None:
    from .._typed import answer_problem
    from ..errors import ConfigurationError

    problem = answer_problem(question.answer_schema, answer)
    if problem is not None:
        where = ".".join(map(str, problem[0])) or "the answer"
        raise ConfigurationError(
            f"the elicitation callback's answer {answer!r} to {question.message!r} does not fit "
            f"at {where}: {problem[1]}"
        )


class ActiveCall:
    """A tool call in flight, seen from both sides: the server's questions travel from the MCP
    thread to the tool's loop through ``queue`` (None: the call ended), answers come back
    through a future."""

    __slots__ = ("loop", "on_progress", "queue")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        on_progress: Callable[[float, float | None, str | None], None],
    ) -> None:
        self.loop = loop
        self.on_progress = on_progress
        self.queue: asyncio.Queue[
            tuple[mcp.types.ElicitRequestParams, concurrent.futures.Future[Any]] | None
        ] = asyncio.Queue()

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """A progress notification from the server about this call (on the MCP loop): handed
        to the tool's loop, where it becomes a ``ToolCallProgress`` stream event."""
        with contextlib.suppress(RuntimeError):  # the tool's loop is gone: nobody streams
            self.loop.call_soon_threadsafe(self.on_progress, progress, total, message)

    async def ask(self, params: mcp.types.ElicitRequestParams) -> mcp.types.ElicitResult:
        """Hand a question to the tool's body and wait for its answer (on the MCP loop)."""
        reply: concurrent.futures.Future[mcp.types.ElicitResult] = concurrent.futures.Future()
        self.loop.call_soon_threadsafe(self.queue.put_nowait, (params, reply))
        return await asyncio.wrap_future(reply)

    def finished(self, _: object) -> None:
        with contextlib.suppress(RuntimeError):  # the tool's loop is gone: nobody waits
            self.loop.call_soon_threadsafe(self.queue.put_nowait, None)
