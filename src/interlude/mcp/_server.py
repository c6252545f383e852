"""An MCP server the agent reaches over stdio or streamable HTTP, connected on first use."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from .._messages import JsonValue
from ..errors import ConfigurationError, McpServerError
from ._connection import Connection, describe, is_lost, needs_back_channel, watch_session
from ._elicit import Elicitation
from ._tasks import TASK_TIMEOUT
from ._thread import _OPEN, block_on, call_in_thread, run_in_thread
from ._tool import ActiveCall, McpTool, QuestionWithdrawn, UrlElicitationRequired

if TYPE_CHECKING:
    import mcp
    import mcp.types
    from mcp_types import Task

__all__ = ["ElicitationHandler", "McpServer"]

ElicitationHandler: TypeAlias = Callable[
    [Elicitation], "JsonValue | Awaitable[JsonValue | None] | None"
]
"""Answers a server's question in process: an answer (see ``_elicit``), or None to pause."""

_CALL: contextvars.ContextVar[ActiveCall | None] = contextvars.ContextVar("mcp_call", default=None)
_log = logging.getLogger("interlude.mcp")


@dataclass(frozen=True, slots=True)
class _Stdio:
    command: str
    args: tuple[str, ...]
    env: Mapping[str, str] | None
    cwd: str | None


@dataclass(frozen=True, slots=True)
class _Http:
    url: str
    headers: Mapping[str, str] | None


class McpServer:
    """An MCP server whose tools an agent can use: ``Agent(model, tools=server.tools())``.

    Make one with :meth:`stdio` (a command started as a subprocess) or :meth:`http` (a
    streamable HTTP endpoint). Nothing connects until the tools are listed or called; the
    connection then stays open until :meth:`close` (or the agent's ``close``, or the end of the
    process). A server that dies gives the model an error result naming it, and the next call
    connects again.

    ``elicitation`` answers a server's questions in process (return None to pause instead);
    without it, or when it returns None, the question pauses the run as an interrupt.
    ``timeout`` bounds each request (seconds; None waits as long as the server takes).
    ``connect_timeout`` bounds connecting (starting the process, the handshake): 60 s unless
    given, None to wait without end. ``max_output`` caps the text of a result the model
    sees (characters; 200,000 unless given, None for no cap): the rest is cut, with a note.
    ``protocol="legacy"`` speaks the handshake-era protocol (``initialize``) even to a server
    that knows the newer one; ``"auto"`` picks the newest both sides speak, and moves to the
    handshake-era one for good once a tool asks a question mid-call (``ctx.elicit``), which
    only that protocol carries. A handshake-era session runs one call at a time, so that each
    question the server asks belongs to the call in flight (see docs/mcp.md).

    ``tasks`` (on unless False) lets the server run calls as tasks: the tasks extension is
    advertised, and a tool listed with ``execution.taskSupport`` "required" or "optional"
    (MCP 2025-11-25) is called asking for a task. A tool that requires a task the connection
    cannot ask for (``tasks=False``, or a server without task-augmented calls) is left out of
    the tools, with a warning on the ``interlude.mcp`` logger. ``task_timeout`` bounds how long
    one run of a tool follows its task (seconds; an hour unless given, None for no bound).
    """

    def __init__(
        self,
        transport: _Stdio | _Http,
        *,
        name: str,
        elicitation: ElicitationHandler | None = None,
        timeout: float | None = None,
        protocol: Literal["auto", "legacy"] = "auto",
        connect_timeout: float | None = 60.0,
        max_output: int | None = 200_000,
        tasks: bool = True,
        task_timeout: float | None = TASK_TIMEOUT,
    ) -> None:
        import importlib.util

        if importlib.util.find_spec("mcp") is None:
            raise ConfigurationError(
                "MCP servers need the mcp package: pip install 'interlude-agents[mcp]'"
            )
        if protocol not in ("auto", "legacy"):
            raise ConfigurationError(f"protocol must be 'auto' or 'legacy', got {protocol!r}")
        if task_timeout is not None and not task_timeout > 0:
            raise ConfigurationError(
                f"task_timeout must be a number of seconds above 0 or None, got {task_timeout!r}"
            )
        self.tasks = bool(tasks)
        self.task_timeout = task_timeout
        self.protocol = protocol
        self._transport = transport
        self.name = name
        self.elicitation = elicitation
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_output = max_output
        self._conn: Connection | None = None
        self._retired: set[Connection] = set()
        self._needs_legacy = False
        """Set (protocol "auto") once a tool asked mid-call: later sessions are handshake-era."""
        self._lock: asyncio.Lock | None = None
        self._pid = os.getpid()

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        elicitation: ElicitationHandler | None = None,
        timeout: float | None = None,
        protocol: Literal["auto", "legacy"] = "auto",
        connect_timeout: float | None = 60.0,
        max_output: int | None = 200_000,
        tasks: bool = True,
        task_timeout: float | None = TASK_TIMEOUT,
    ) -> McpServer:
        """A server run as ``command args...``, spoken to over its stdin and stdout (named,
        unless ``name`` is given, after its first argument not starting with ``-``). It does
        not inherit this process's environment: it gets a few safe variables (such as PATH and
        HOME, the MCP SDK's default) and ``env`` on top."""
        if isinstance(args, str):
            raise ConfigurationError(f"args must be a list of arguments, got the string {args!r}")
        named = next((a for a in args if not a.startswith("-")), command)  # the script or package
        default = os.path.splitext(os.path.basename(named.rstrip("/")))[0] or command
        transport = _Stdio(command, tuple(args), env, None if cwd is None else os.fspath(cwd))
        return cls(
            transport,
            name=name or default,
            elicitation=elicitation,
            timeout=timeout,
            protocol=protocol,
            connect_timeout=connect_timeout,
            max_output=max_output,
            tasks=tasks,
            task_timeout=task_timeout,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        name: str | None = None,
        headers: Mapping[str, str] | None = None,
        elicitation: ElicitationHandler | None = None,
        timeout: float | None = None,
        protocol: Literal["auto", "legacy"] = "auto",
        connect_timeout: float | None = 60.0,
        max_output: int | None = 200_000,
        tasks: bool = True,
        task_timeout: float | None = TASK_TIMEOUT,
    ) -> McpServer:
        """A server at a streamable HTTP endpoint (``http://host:port/mcp``)."""
        if not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"an MCP server URL starts with http:// or https://: {url!r}")
        default = url.split("//", 1)[1].split("/", 1)[0]
        return cls(
            _Http(url, headers),
            name=name or default,
            elicitation=elicitation,
            timeout=timeout,
            protocol=protocol,
            connect_timeout=connect_timeout,
            max_output=max_output,
            tasks=tasks,
            task_timeout=task_timeout,
        )

    def __repr__(self) -> str:
        return f"McpServer({self.name!r})"

    # --- tools ----------------------------------------------------------------------------

    def tools(self, *, prefix: str = "") -> list[McpTool]:
        """The server's tools (connecting if needed), from sync code. ``prefix`` is put
        before every tool's name, to keep two servers' tools apart."""
        return block_on(self._list(prefix))

    async def list_tools(self, *, prefix: str = "") -> list[McpTool]:
        """The server's tools (connecting if needed)."""
        return await run_in_thread(self._list(prefix))

    async def _list(self, prefix: str) -> list[McpTool]:
        for attempt in range(2):
            conn = await self._connected()
            assert conn.client is not None
            found: list[McpTool] = []
            cursor: str | None = None
            try:
                while True:
                    page = await conn.client.list_tools(cursor=cursor)
                    offered = (self._offered(conn, t, prefix) for t in page.tools)
                    found.extend(tool for tool in offered if tool is not None)
                    cursor = page.next_cursor
                    if not cursor:
                        return found
            except Exception as exc:
                if conn.session_gone and attempt == 0:  # the server restarted: a new session
                    conn.stop.set()
                    continue
                if is_lost(exc):
                    conn.stop.set()
                raise McpServerError(
                    f"MCP server {self.name!r} did not list its tools: {describe(exc)}"
                ) from exc
        raise AssertionError("unreachable")

    def _offered(self, conn: Connection, remote: mcp.types.Tool, prefix: str) -> McpTool | None:
        """``remote`` as a tool for the model, called asking for a task where its
        ``execution.taskSupport`` (2025-11-25) allows one and this connection can; None for a
        tool that requires a task this connection cannot ask for (left out, with a warning)."""
        support = None if remote.execution is None else remote.execution.task_support
        if support not in ("required", "optional"):
            return McpTool(self, remote, prefix + remote.name)
        from ._task_wire import augment_problem

        assert conn.client is not None
        client = conn.client
        problem = (
            augment_problem(client.session, client.server_capabilities)
            if self.tasks
            else "task support is off (McpServer(tasks=False))"
        )
        if problem is None:
            return McpTool(self, remote, prefix + remote.name, as_task=True)
        if support == "optional":
            return McpTool(self, remote, prefix + remote.name)
        _log.warning(
            "MCP server %r lists %r, which runs only as a task (execution.taskSupport "
            "'required'), but %s: the tool is left out",
            self.name,
            remote.name,
            problem,
        )
        return None

    # --- connection (on the MCP loop) -----------------------------------------------------

    @property
    def is_connected(self) -> bool:
        return self._conn is not None and self._conn.usable

    def _forget_if_forked(self) -> None:
        if self._pid != os.getpid():  # a forked child: the parent's connection is not ours
            self._conn, self._lock, self._pid = None, None, os.getpid()
            self._retired = set()

    async def _connected(self) -> Connection:
        self._forget_if_forked()
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            conn = self._conn
            if conn is not None and conn.usable:
                if not (self._needs_legacy and not conn.legacy):
                    return conn
                conn.retire()  # the calls on it finish there; new ones go to a new session
                self._retired.add(conn)
            conn = Connection()
            ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            conn.task = asyncio.create_task(self._hold(conn, ready))
            try:
                await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout)
            except BaseException as exc:  # failed, timed out or cancelled: stop the attempt
                conn.task.cancel()
                await asyncio.gather(conn.task, return_exceptions=True)
                if ready.done() and not ready.cancelled():
                    ready.exception()  # seen here; the error that matters is raised below
                if isinstance(exc, TimeoutError):
                    raise McpServerError(
                        f"MCP server {self.name!r} did not finish connecting within "
                        f"{self.connect_timeout:g} s"
                    ) from None
                raise
            self._conn = conn
            _OPEN.add(self)
            return conn

    async def _hold(self, conn: Connection, ready: asyncio.Future[None]) -> None:
        """Open the session, keep it until told to stop (or until it breaks), then close it."""
        try:
            async with self._client(conn) as client:
                conn.client = client
                ready.set_result(None)
                await conn.stop.wait()
        except BaseException as exc:  # a connection that breaks ends here, for any reason
            if not ready.done():
                ready.set_exception(
                    McpServerError(f"MCP server {self.name!r} is not reachable: {describe(exc)}")
                )
            if not isinstance(exc, Exception):
                raise
        finally:
            conn.alive = False
            conn.client = None
            self._retired.discard(conn)

    def _client(self, conn: Connection) -> Any:
        from contextlib import AsyncExitStack, asynccontextmanager

        from mcp import Client, StdioServerParameters

        from ._task_wire import TasksExtension

        async def on_elicit(ctx: Any, params: mcp.types.ElicitRequestParams) -> Any:
            from ._task_wire import related_task

            task = related_task(params)  # a 2025-11-25 task's question: to its tasks/result
            if task is not None:
                call = conn.task_calls.get(task)
            else:
                call = _CALL.get()
                if call is None and len(conn.calls) == 1:  # asked outside the call's asyncio task
                    call = next(iter(conn.calls))
            from mcp.types import INVALID_REQUEST, ErrorData

            if call is None:  # asked outside any call: refused, not answered for the user
                return ErrorData(code=INVALID_REQUEST, message="no tool call to ask for")
            try:
                return await call.ask(params)
            except QuestionWithdrawn:  # the run paused: the question stays unanswered until
                await conn.stop.wait()  # the server drops it (or the connection closes)
                return ErrorData(code=INVALID_REQUEST, message="the question was withdrawn")

        transport = self._transport
        common: dict[str, Any] = {
            "elicitation_callback": on_elicit,
            "read_timeout_seconds": self.timeout,
            "cache": None,
            "mode": "legacy" if self._needs_legacy else self.protocol,
            "extensions": [TasksExtension()] if self.tasks else [],
        }
        if isinstance(transport, _Stdio):
            from mcp.client.stdio import stdio_client

            params = StdioServerParameters(
                command=transport.command,
                args=list(transport.args),
                env=None if transport.env is None else dict(transport.env),
                cwd=transport.cwd,
            )
            # The server's stderr goes where ours goes now (the library's default is the
            # stream sys.stderr was when it was first imported: perhaps a capture since gone).
            return Client(stdio_client(params, errlog=_errlog()), **common)

        @asynccontextmanager
        async def http_client() -> Any:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            async with AsyncExitStack() as stack:
                assert isinstance(transport, _Http)
                http = await stack.enter_async_context(
                    create_mcp_http_client(headers=dict(transport.headers or {}))
                )
                await stack.enter_async_context(watch_session(conn, http))
                streams = streamable_http_client(transport.url, http_client=http)
                client = await stack.enter_async_context(Client(streams, **common))
                yield client

        return http_client()

    async def _call(
        self, name: str, arguments: dict[str, JsonValue], call: ActiveCall
    ) -> mcp.types.CallToolResult:
        """Call a tool (on the MCP loop); McpServerError naming the server if it is lost.

        Twice at most, the call is made again on a new session: when the HTTP server no longer
        knows the session (it restarted; the call was refused unrun), and (protocol "auto")
        when the tool asked a question mid-call, which only a handshake-era session carries."""
        for attempt in range(3):
            conn = await self._connected()
            try:
                return await self._call_on(conn, name, arguments, call)
            except _Again:
                if attempt == 2:
                    raise McpServerError(
                        f"MCP server {self.name!r} failed to run {name!r}: the session was "
                        "refused three times"
                    ) from None
        raise AssertionError("unreachable")

    async def _call_on(
        self, conn: Connection, name: str, arguments: dict[str, JsonValue], call: ActiveCall
    ) -> mcp.types.CallToolResult:
        from mcp.shared.exceptions import MCPError

        from ._task_wire import TaskStarted

        async with conn.turn():
            if conn.client is None or not conn.usable:  # ended while this call waited its turn
                raise _Again
            token = _CALL.set(call)
            conn.calls.add(call)
            try:
                return await conn.client.call_tool(name, arguments, progress_callback=call.progress)
            except TaskStarted:  # the server runs it as a task: the tool follows it from here
                raise
            except Exception as exc:
                if conn.session_gone:  # the server restarted: a new session for what follows
                    conn.stop.set()
                    if conn.call_refused:  # this call was refused unrun: it goes there too
                        raise _Again from exc
                    raise McpServerError(
                        f"MCP server {self.name!r} lost the session while {name!r} ran "
                        f"({describe(exc)}); the next call opens a new one"
                    ) from exc
                if needs_back_channel(exc) and self.protocol == "auto" and not conn.legacy:
                    self._needs_legacy = True
                    raise _Again from exc
                if isinstance(exc, MCPError) and UrlElicitationRequired.matches(exc):
                    raise UrlElicitationRequired(exc) from exc
                if is_lost(exc):
                    conn.stop.set()
                    raise McpServerError(
                        f"MCP server {self.name!r} is not reachable ({describe(exc)}); the next "
                        "call starts a new connection"
                    ) from exc
                if not isinstance(exc, MCPError):  # something unforeseen: start afresh next time
                    conn.stop.set()
                raise McpServerError(
                    f"MCP server {self.name!r} failed to run {name!r}: {describe(exc)}"
                ) from exc
            finally:
                conn.leave(call)
                _CALL.reset(token)

    async def _task_request(
        self, request: Any, result_type: Any, *, read_timeout: float | None = None
    ) -> Any:
        """Send a ``tasks/*`` request (connecting if need be), waiting ``read_timeout`` seconds at
        most (None: the server's ``timeout``). A refusal from the server stays an
        ``MCPError``; a server out of reach is McpServerError."""

        async def send(conn: Connection) -> Any:
            assert conn.client is not None
            session = conn.client.session
            return await session.send_request(request, result_type, read_timeout)

        return await run_in_thread(self._on_session(send, request.method))

    async def _start_task(
        self, name: str, arguments: dict[str, JsonValue], read_timeout: float | None
    ) -> Task:
        """Call tool ``name`` asking for a task (2025-11-25 task augmentation): the task."""
        from ._task_wire import start_augmented

        async def send(conn: Connection) -> Task:
            assert conn.client is not None
            return await start_augmented(conn.client.session, name, arguments, read_timeout)

        task: Task = await run_in_thread(self._on_session(send, "tools/call"))
        return task

    async def _task_result(
        self, task_id: str, call: ActiveCall, read_timeout: float | None
    ) -> mcp.types.CallToolResult:
        """``tasks/result`` of a 2025-11-25 task (on the MCP loop): the server holds it until
        the task ends, and sends the task's questions meanwhile; they go to ``call``."""
        from mcp_types import CallToolResult

        from ._task_wire import result_request

        async def send(conn: Connection) -> CallToolResult:
            assert conn.client is not None
            conn.task_calls[task_id] = call
            try:
                request = result_request(task_id)
                return await conn.client.session.send_request(request, CallToolResult, read_timeout)
            finally:
                conn.task_calls.pop(task_id, None)

        result: CallToolResult = await self._on_session(send, "tasks/result")
        return result

    async def _on_session(self, send: Callable[[Connection], Awaitable[Any]], method: str) -> Any:
        """``send(conn)`` on the open connection (on the MCP loop), errors sorted out: a
        refusal stays an ``MCPError``; a server out of reach is McpServerError."""
        from mcp.shared.exceptions import MCPError

        conn = await self._connected()
        if conn.client is None:
            raise McpServerError(f"MCP server {self.name!r} is not connected")
        try:
            return await send(conn)
        except MCPError as exc:
            if not is_lost(exc):
                raise
            conn.stop.set()
            raise McpServerError(
                f"MCP server {self.name!r} is not reachable ({describe(exc)})"
            ) from exc
        except Exception as exc:
            if conn.session_gone or is_lost(exc):
                conn.stop.set()
            raise McpServerError(
                f"MCP server {self.name!r} failed a {method} request ({describe(exc)})"
            ) from exc

    # --- closing --------------------------------------------------------------------------

    async def _close(self) -> None:
        self._forget_if_forked()
        conn, self._conn = self._conn, None
        _OPEN.discard(self)
        conns = [c for c in (conn, *self._retired) if c is not None]
        self._retired = set()
        for each in conns:
            each.stop.set()
        await asyncio.gather(*(c.task for c in conns if c.task), return_exceptions=True)

    async def aclose(self) -> None:
        """Close the connection (a stdio server's process ends); the next use opens a new one."""
        await run_in_thread(self._close())

    def close(self, timeout: float | None = None) -> None:
        """Close the connection, from sync code."""
        if self._conn is None and not self._retired:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            block_on(self._close(), timeout)
        else:  # called from a loop (perhaps the MCP one): do not block it
            call_in_thread(self._close())

    def __enter__(self) -> McpServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> McpServer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Again(Exception):
    """The call was not run on this session and goes to a new one."""


def _errlog() -> Any:
    """Where a stdio server's stderr goes: ours, if it is a real file, else the process's."""
    import sys

    stream = sys.stderr
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__
    return stream
