"""The A2A endpoints as Starlette routes: ``/a2a/{agent}/`` (JSON-RPC) and its agent card."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from ._server import AgentTasks, served_names

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from ..operate import App, People
    from ..sessions import InboxStore
    from ._push import UrlCheck

__all__ = ["PREFIX", "a2a_routes", "create_a2a_app"]

PREFIX = "/a2a"
CARD_PATH = "/.well-known/agent-card.json"


def a2a_routes(
    app: App,
    store: InboxStore | str,
    *,
    tokens: Mapping[str, Any] | None,
    agents: Iterable[str] | None = None,
    descriptions: Mapping[str, str] | None = None,
    prefix: str = PREFIX,
    public_url: str | None = None,
    push_url_check: UrlCheck | None = None,
) -> list[BaseRoute]:
    """The A2A routes of ``app``'s agents (``agents``: some of them; default every agent,
    graphs and swarms are not served): ``{prefix}/{name}/`` takes JSON-RPC requests,
    ``{prefix}/{name}/.well-known/agent-card.json`` is its card.

    ``store`` (a store or its URL) holds the sessions, which are the tasks. ``tokens`` (as
    for the inbox, ``{token: name}``) makes every request need ``Authorization: Bearer
    <token>`` (401 otherwise; the card stays public and declares the scheme), and the audit
    names the token's person as who answered; ``None`` serves without authentication (tests,
    a loopback or a gateway that authenticates). ``descriptions`` gives the cards' texts.

    A card names the agent's URL under ``public_url``, the URL the server's root is reached at
    from outside (``https://agents.example.com``, with any path prefix a proxy adds); without
    it, under the address the server is bound to (the listening socket's, never the request's
    ``Host`` header, which any client sets).

    ``push_url_check`` screens the webhook URLs clients register for push notifications (an
    async ``url -> bool``, asked when one is registered and before each POST, which connects
    to the address resolved for it); default: http(s) URLs whose host resolves to public
    addresses only (see :mod:`._push`)."""
    from ..operate import People

    auth = None if tokens is None else People(tokens)
    return routes_for(
        app,
        store,
        auth,
        agents=agents,
        descriptions=descriptions,
        prefix=prefix,
        public_url=public_url,
        push_url_check=push_url_check,
    )


def routes_for(
    app: App,
    store: InboxStore | str,
    auth: People | None,
    *,
    agents: Iterable[str] | None = None,
    descriptions: Mapping[str, str] | None = None,
    prefix: str = PREFIX,
    public_url: str | None = None,
    push_url_check: UrlCheck | None = None,
) -> list[BaseRoute]:
    """:func:`a2a_routes` for ``auth``'s people (None: no authentication)."""
    from ..operate import check_queue

    base = _public_base(public_url)

    if isinstance(store, str):
        from ..sessions import open_store

        store = open_store(store)
    check_queue(store, "the A2A doors")
    routes: list[BaseRoute] = []
    for name in served_names(app, agents):
        handler = AgentTasks(app, name, store, auth, push_url_check=push_url_check)
        text = (descriptions or {}).get(name) or f"The Interlude agent {name!r}."
        routes.append(
            Mount(
                f"{prefix}/{name}",
                routes=[
                    Route(CARD_PATH, _card_endpoint(name, text, auth, base), methods=["GET"]),
                    Route("/", _rpc_endpoint(handler, auth), methods=["POST"]),
                ],
            )
        )
    return routes


def create_a2a_app(
    app: App,
    store: InboxStore | str,
    *,
    tokens: Mapping[str, Any] | None,
    agents: Iterable[str] | None = None,
    descriptions: Mapping[str, str] | None = None,
    public_url: str | None = None,
    push_url_check: UrlCheck | None = None,
) -> Starlette:
    """A Starlette application serving only the A2A routes (see :func:`a2a_routes`);
    ``interlude serve`` mounts the same routes next to the inbox."""
    from starlette.applications import Starlette

    return Starlette(
        routes=a2a_routes(
            app,
            store,
            tokens=tokens,
            agents=agents,
            descriptions=descriptions,
            public_url=public_url,
            push_url_check=push_url_check,
        )
    )


def _rpc_endpoint(handler: AgentTasks, auth: People | None) -> Any:
    from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher

    dispatcher = JsonRpcDispatcher(request_handler=handler)

    async def rpc(request: Request) -> Response:
        if auth is not None and auth.bearer(request.headers.get("authorization")) is None:
            return JSONResponse(
                {"error": "a bearer token is needed (Authorization: Bearer <token>)"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        return await dispatcher.handle_requests(request)

    return rpc


def _public_base(public_url: str | None) -> str | None:
    """``public_url`` without its trailing slash, checked (None stays None)."""
    if public_url is None:
        return None
    from urllib.parse import urlsplit

    from ..errors import ConfigurationError

    parts = urlsplit(public_url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query:
        raise ConfigurationError(
            f"public_url is the http(s) URL the server is reached at, got {public_url!r}"
        )
    return public_url.rstrip("/")


def _bound_address(scope: Mapping[str, Any]) -> str:
    """``scheme://host:port`` of the socket the request came in on (the ASGI ``server``),
    followed by the server's root path: what a card names when no public URL is set."""
    scheme = scope.get("scheme", "http")
    host, port = scope.get("server") or ("localhost", None)
    if ":" in host:
        host = f"[{host}]"
    if port is not None and (scheme, port) not in (("http", 80), ("https", 443)):
        host = f"{host}:{port}"
    root: str = scope.get("app_root_path", "")
    return f"{scheme}://{host}{root}"


def _card_endpoint(name: str, description: str, auth: People | None, base: str | None) -> Any:
    """The card of agent ``name``; its URL is ``base`` (or the bound address) followed by the
    agent's path under the application (its mount), never taken from the request's headers."""

    async def card(request: Request) -> Response:
        from a2a.server.request_handlers.response_helpers import agent_card_to_dict

        scope = request.scope
        mount = scope.get("root_path", "").removeprefix(scope.get("app_root_path", ""))
        url = f"{base or _bound_address(scope)}{mount}/"
        return JSONResponse(agent_card_to_dict(agent_card(name, description, url, auth)))

    return card


def agent_card(name: str, description: str, url: str, auth: People | None) -> Any:
    """The card of agent ``name`` served at ``url``: JSON-RPC, streaming (``message/stream``,
    ``tasks/resubscribe``) and push notifications, text or JSON in and out."""
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        HTTPAuthSecurityScheme,
        SecurityRequirement,
        SecurityScheme,
        StringList,
    )

    from .. import __version__

    card = AgentCard(
        name=name,
        description=description,
        version=__version__,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[AgentSkill(id=name, name=name, description=description, tags=["interlude"])],
    )
    if auth is not None:
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer"))
        )
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
    return card
