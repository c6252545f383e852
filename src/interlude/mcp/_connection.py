"""One open MCP session (held by a task on the MCP loop), and what its failures mean."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import TYPE_CHECKING, Any

from ._tool import ActiveCall

if TYPE_CHECKING:
    import httpx2
    import mcp

__all__ = ["Connection", "describe", "is_lost", "needs_back_channel", "watch_session"]


class Connection:
    """One MCP session: its client, the calls in flight on it, and whether it can still be used.

    On the handshake-era protocol a server asks its questions with requests of its own that do
    not say which call they belong to, so such a connection runs one call at a time
    (:meth:`turn`): a question then always belongs to the call in flight. The current protocol
    carries a question inside the call's own answer, so calls run side by side there.
    """

    def __init__(self) -> None:
        self.client: mcp.Client | None = None
        self.stop = asyncio.Event()
        self.alive = True
        self.calls: set[ActiveCall] = set()
        self.task_calls: dict[str, ActiveCall] = {}
        """The 2025-11-25 tasks whose ``tasks/result`` is in flight, by id: the questions the
        server sends for one (marked with its id) go to that call."""
        self.task: asyncio.Task[None] | None = None
        self.session_gone = False
        """The HTTP server answered that it does not know this session (it restarted)."""
        self.call_refused = False
        """... and refused a ``tools/call`` for that reason (so that call did not run)."""
        self.retired = False
        """No new calls go here; it closes once the calls on it are done."""
        self._turn = asyncio.Lock()

    @property
    def legacy(self) -> bool:
        """Whether this session speaks the handshake-era protocol (``initialize``)."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        version = None if self.client is None else self.client.protocol_version
        return version not in MODERN_PROTOCOL_VERSIONS

    @property
    def usable(self) -> bool:
        return self.alive and not (self.stop.is_set() or self.session_gone or self.retired)

    def turn(self) -> AbstractAsyncContextManager[Any]:
        """Held around a call: one at a time on a handshake-era session, no wait otherwise."""
        return self._turn if self.legacy else nullcontext()

    def leave(self, call: ActiveCall) -> None:
        """A call on this connection is over."""
        self.calls.discard(call)
        if self.retired and not self.calls:
            self.stop.set()

    def retire(self) -> None:
        """Take no new calls; close once the calls in flight are done."""
        self.retired = True
        if not self.calls:
            self.stop.set()


@asynccontextmanager
async def watch_session(conn: Connection, http: httpx2.AsyncClient) -> AsyncIterator[None]:
    """Mark ``conn`` as gone when the server answers a request made in its session with "no
    such session": 404 (what the spec asks for; the Python SDK's answer), or 400 naming the
    session (what the TypeScript SDK's example servers, server-everything among them, answer)."""

    async def on_response(response: httpx2.Response) -> None:
        request = response.request
        if "mcp-session-id" not in request.headers or request.method == "DELETE":
            return
        if response.status_code == 400:
            body = await response.aread()
            if b"session" not in body[:2000].lower():
                return
        elif response.status_code != 404:
            return
        conn.session_gone = True
        if request.method == "POST" and _method(request.content) == "tools/call":
            conn.call_refused = True

    http.event_hooks["response"].append(on_response)
    yield


def _method(body: bytes) -> object:
    """The JSON-RPC method of a request's body (None if it is not one request)."""
    import json

    try:
        message = json.loads(body)
    except ValueError:
        return None
    return message.get("method") if isinstance(message, dict) else None


def needs_back_channel(exc: BaseException) -> bool:
    """Whether a call failed because the server tried to send a request of its own (such as
    ``ctx.elicit(...)`` in the official Python SDK) on a connection of the current protocol,
    which has no channel for them."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_REQUEST

    return (
        isinstance(exc, MCPError)
        and exc.code == INVALID_REQUEST
        and "no back-channel for server-initiated requests" in exc.message
    )


def is_lost(exc: BaseException) -> bool:
    """Whether an error means the connection is gone (rather than a refused request).

    The SDK reports a closed connection as JSON-RPC error -32000 "Connection closed"; the same
    code is the generic "server error" a server sends for a request it refuses (too large, say),
    which leaves the connection as it was."""
    import anyio
    import httpx2
    from mcp.shared.exceptions import MCPError
    from mcp.types import CONNECTION_CLOSED

    if isinstance(exc, BaseExceptionGroup):
        return any(is_lost(e) for e in exc.exceptions)
    if isinstance(exc, MCPError):
        return exc.code == CONNECTION_CLOSED and exc.message == "Connection closed"
    lost = (
        anyio.ClosedResourceError,
        anyio.BrokenResourceError,
        anyio.EndOfStream,
        OSError,
        httpx2.TransportError,
    )
    return isinstance(exc, lost)


def describe(exc: BaseException) -> str:
    """A one-line account of an error, looking inside exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
