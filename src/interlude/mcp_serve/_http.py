"""``/mcp`` over streamable HTTP: the endpoint (bearer tokens, as the inbox's), the door
``interlude serve --mcp`` mounts next to the inbox, and an application serving it alone.

Every request must carry ``Authorization: Bearer <token>`` of one of the people the tokens
name (401 otherwise, before the MCP layer reads anything); the token's person is who answers,
in their groups. An MCP session (``Mcp-Session-Id``) is bound to the token that opened it: a
request with another token is answered as if the session did not exist.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ._calls import AgentCalls, Caller
from ._server import agent_server

if TYPE_CHECKING:
    from mcp.server import ServerRequestContext
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.routing import BaseRoute
    from starlette.types import Receive, Scope, Send

    from ..operate import App, Operator, People
    from ..sessions import InboxStore

__all__ = ["PATH", "McpEndpoint", "create_mcp_app", "mcp_door"]

PATH = "/mcp"


class McpEndpoint:
    """The ASGI application of ``/mcp``: the App's agents as MCP tools for ``people``.

    Its session manager (the SDK's, which holds the MCP sessions and their streams) runs in
    :meth:`running`, or, mounted where no lifespan of its own runs (a door of ``create_app``),
    from the first request until the serving loop ends."""

    def __init__(
        self,
        operator: Operator,
        people: People,
        *,
        public_url: str | None = None,
        descriptions: Mapping[str, str] | None = None,
    ) -> None:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        self.people = people
        self.public_url = public_url
        self.calls = AgentCalls(operator, descriptions)
        self.server = agent_server(self.calls, self._caller)
        self.manager: StreamableHTTPSessionManager = StreamableHTTPSessionManager(self.server)
        self._started: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the session manager for the block (an application's lifespan)."""
        async with self.manager.run():
            self._started = asyncio.get_running_loop().create_future()
            self._started.set_result(None)
            try:
                yield
            finally:
                await self.calls.settle()

    async def _start(self) -> None:
        """Start the session manager on the serving loop, once (the first request does)."""
        if self._started is None:
            self._started = asyncio.get_running_loop().create_future()
            self._task = asyncio.create_task(self._run(self._started))
        await asyncio.shield(self._started)

    async def _run(self, started: asyncio.Future[None]) -> None:
        try:
            async with self.manager.run():
                started.set_result(None)
                await asyncio.Event().wait()  # until the serving loop ends (cancelled)
        except BaseException as exc:
            if not started.done():
                started.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
            raise

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        from starlette.datastructures import Headers

        header = Headers(scope=scope).get("authorization")
        person = self.people.bearer(header)
        if person is None:
            await _unauthorized(scope, receive, send)
            return
        scope["user"] = _principal(person.name, header or "")
        await self._start()
        await self.manager.handle_request(scope, receive, send)

    def _caller(self, ctx: ServerRequestContext[Any]) -> Caller:
        """The request's bearer token's person (the endpoint let no other request in)."""
        from mcp.shared.exceptions import MCPError
        from mcp.types import INVALID_REQUEST

        request = ctx.request
        headers = getattr(request, "headers", None)
        person = self.people.bearer(headers.get("authorization") if headers else None)
        if person is None:
            raise MCPError(INVALID_REQUEST, "a bearer token is needed")
        return Caller(person.name, tuple(person.groups), self._inbox(request))

    def _inbox(self, request: Any) -> str | None:
        """The inbox's URL: the configured public URL, else the app's ``inbox_url``, else the
        address this server is bound to (never a request's ``Host`` header)."""
        if self.public_url:
            return self.public_url.rstrip("/")
        settings = self.calls.operator.app.notifications
        if settings is not None and settings.inbox_url:
            return settings.inbox_url.rstrip("/")
        scope = getattr(request, "scope", None)
        return None if scope is None else _bound_address(scope)


def _principal(name: str, header: str) -> Any:
    """The SDK's authenticated user for the token of ``header``: it binds each MCP session to
    the token that opened it (the token itself is not kept, only a digest)."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken

    digest = hashlib.sha256(header.encode("utf-8")).hexdigest()
    return AuthenticatedUser(AccessToken(token=digest, client_id=name, scopes=[], subject=digest))


async def _unauthorized(scope: Scope, receive: Receive, send: Send) -> None:
    from starlette.responses import JSONResponse

    response = JSONResponse(
        {"error": "a bearer token is needed (Authorization: Bearer <token>)"},
        status_code=401,
        headers={"WWW-Authenticate": "Bearer"},
    )
    await response(scope, receive, send)


def _bound_address(scope: Mapping[str, Any]) -> str:
    """``scheme://host:port`` of the socket the request came in on, and the server's root
    path: where the inbox is when no URL is configured."""
    scheme = scope.get("scheme", "http")
    host, port = scope.get("server") or ("localhost", None)
    if ":" in host:
        host = f"[{host}]"
    if port is not None and (scheme, port) not in (("http", 80), ("https", 443)):
        host = f"{host}:{port}"
    return f"{scheme}://{host}{scope.get('app_root_path', '')}"


def mcp_door(
    app: App | None, backend: object, people: People, public_url: str | None
) -> list[BaseRoute]:
    """The door ``create_app(doors=...)`` takes (``server._doors.Door``): ``/mcp`` serving the
    App's agents as MCP tools, for the inbox's people, on the inbox's store (its inbox checks
    signed pauses with the agents' key). None without an App or a session store."""
    from starlette.routing import Route

    from ..operate import Operator, StoreBackend

    if app is None or not isinstance(backend, StoreBackend):
        return []
    operator = Operator(app, backend.store, inbox=backend.inbox)
    if not AgentCalls(operator).names:
        return []
    endpoint = McpEndpoint(operator, people, public_url=public_url)
    return [Route(PATH, endpoint, name="mcp")]


def create_mcp_app(
    app: App,
    store: InboxStore | str,
    *,
    tokens: Mapping[str, Any],
    public_url: str | None = None,
    signing_key: bytes | str | None = None,
    descriptions: Mapping[str, str] | None = None,
) -> Starlette:
    """A Starlette application serving ``app``'s agents as MCP tools at ``/mcp`` (streamable
    HTTP) on ``store`` (a store or its URL); ``interlude serve --mcp`` serves the same next to
    the inbox.

    ``tokens`` are the inbox's (``{token: name}`` or ``{token: {"name", "groups"}}``): a
    request without a known bearer token gets 401, and the token's person answers the
    questions (in their groups). ``public_url`` is where the inbox is, for the links in
    results (default: the app's ``inbox_url``, else this server's address). With
    ``signing_key`` (the agents' key) a pause is verified before its questions are asked.
    ``descriptions`` are the tools' descriptions, by agent name."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    from ..operate import Operator, People

    people = People(tokens)
    if not people:
        raise ConfigurationError("create_mcp_app needs tokens: who may call the agents")
    operator = Operator(app, store, signing_key=signing_key)
    endpoint = McpEndpoint(operator, people, public_url=public_url, descriptions=descriptions)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        try:
            async with endpoint.running():
                yield
        finally:
            operator.close()  # a store opened here from a URL

    return Starlette(routes=[Route(PATH, endpoint, name="mcp")], lifespan=lifespan)
