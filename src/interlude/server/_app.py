"""``create_app``: the inbox's ASGI application (API, HTML pages, events, optional worker)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.middleware import Middleware

from ..errors import ConfigurationError
from ._doors import DEFAULT_DOORS, Door
from ._limits import BODY_TIMEOUT

if TYPE_CHECKING:
    import jinja2
    from starlette.types import Scope

    from ..operate import App, InboxBackend
    from ..sessions import InboxStore
    from ._auth import Auth
    from ._state import ServerState

__all__ = ["create_app", "stop_streams"]


def create_app(
    store: InboxStore | str | InboxBackend,
    app: App | None = None,
    *,
    tokens: Mapping[str, str],
    worker: bool = False,
    poll: float = 0.5,
    secret: bytes | None = None,
    stream_seconds: float = 300.0,
    signing_key: bytes | str | None = None,
    doors: Sequence[Door] = DEFAULT_DOORS,
    public_url: str | None = None,
    body_timeout: float = BODY_TIMEOUT,
) -> Starlette:
    """The inbox on ``store`` (a store, a store URL, or an :class:`InboxBackend` such as
    ``interlude.temporal.TemporalInbox`` for paused Temporal workflows) as a Starlette
    application.

    ``tokens`` maps each secret token (16+ characters) to the approver name the audit records.
    With ``worker=True`` an :class:`~interlude.Worker` runs ``app``'s agents in the
    application's lifespan, polling every ``poll`` seconds, and stops on shutdown. ``secret``
    signs the session cookies and CSRF tokens (default: random per process, so a restart signs
    everyone out). ``stream_seconds`` bounds one ``/events`` stream. ``worker=True`` needs a
    store: Temporal workflows carry themselves on (their workers are ``interlude
    temporal-worker``). The application closes the backend when it stops. ``signing_key``
    (the agents' key) has every pause verified before its questions are shown or an answer is
    checked against them: a forged or unsigned pause is refused (409), its schema never used.
    ``doors`` are the other doors served beside the inbox (``server._doors.Door``: routes for
    the App, the backend and the tokens' people): by default AG-UI and A2A, with an App.
    ``public_url``, the URL the server is reached at from outside, is what the A2A cards name
    (without it, the address the server is bound to: never a request's ``Host`` header).

    A request with a body must name someone (a bearer token, a session cookie) before any of
    it is read (401; ``POST /login`` excepted), and the body must arrive within
    ``body_timeout`` seconds (408) and be at most 1 MiB (413). Signing out ends the cookie on
    the server too: a copy of it is refused afterwards.

    The worker is supervised: if it stops with an error it is logged at once and started again
    after a backoff; ``GET /healthz`` says whether the store answers and the worker runs (503
    when not), and the pages' header says so too. A store outage on any route is 503 with
    ``Retry-After`` and a JSON body.
    """
    import jinja2  # noqa: F401 - without jinja2, fail before the store is opened

    from ..errors import StoreUnavailableError
    from ._api import api_routes
    from ._auth import Auth
    from ._events import Hub, event_routes
    from ._health import health_routes, outage
    from ._pages import history_routes, page_routes
    from ._state import ServerState
    from ._undo import undo_routes

    backend = _backend(store, signing_key, app)
    _check_options(backend, app, worker=worker, poll=poll)
    _check_limits(public_url, body_timeout)
    auth = Auth(tokens, secret)
    state = ServerState(
        backend=backend,
        auth=auth,
        poll=poll,
        templates=_templates(),
        stream_seconds=stream_seconds,
    )
    state.hub = Hub(state)
    state.app = app
    routes = [*api_routes(), *event_routes(), *page_routes(), *health_routes(), *history_routes()]
    routes += undo_routes()
    people = auth.people
    starlette = Starlette(
        routes=[*routes, *(r for door in doors for r in door(app, backend, people, public_url))],
        middleware=_middleware(auth, body_timeout, doors),
        exception_handlers={StoreUnavailableError: outage},
        lifespan=_lifespan(state, backend, app, worker=worker, poll=poll),
    )
    starlette.state.interlude = state
    return starlette


def _middleware(auth: Auth, body_timeout: float, doors: Sequence[Door] = ()) -> list[Middleware]:
    """The request body's limits (who must be named first, how long, how large), then the
    sign-out that ends a session on the server."""
    from ._auth import SignOut
    from ._limits import BodyLimit

    return [
        Middleware(BodyLimit, timeout=body_timeout, admit=_admit(auth, doors)),
        Middleware(SignOut, auth=auth),
    ]


_OPEN_POSTS = frozenset({"/login"})
"""The paths a request with a body may take without naming anyone (the token is the body)."""


def _admit(auth: Auth, doors: Sequence[Door] = ()) -> Callable[[Scope], bool]:
    """Whether a request with a body may have it read: it names someone (a known bearer token
    or a valid session cookie), it goes to an open path (signing in), or a door ``admits`` it:
    a one-time answer link's signed path (checked before the body), or Slack's actions path,
    whose signature covers the body and is checked by the door before it parses anything
    (as ``/login``, such a body is read within the server's size and time limits)."""
    from starlette.datastructures import Headers

    admits: list[Callable[[str, Headers], bool]] = [
        check for door in doors if (check := getattr(door, "admits", None)) is not None
    ]

    def admit(scope: Scope) -> bool:
        path = scope["path"].removeprefix(scope.get("root_path", ""))
        if path in _OPEN_POSTS:
            return True
        headers = Headers(scope=scope)
        return any(check(path, headers) for check in admits) or auth.names_someone(headers)

    return admit


def _backend(
    store: InboxStore | str | InboxBackend,
    signing_key: bytes | str | None = None,
    app: App | None = None,
) -> InboxBackend:
    """``store`` as a backend: a store or a store URL goes in a :class:`StoreBackend` (with
    the App, which lets it check edits against the tools' own validation)."""
    from ..operate import InboxBackend, StoreBackend

    if isinstance(store, str) or not isinstance(store, InboxBackend):
        return StoreBackend(store, signing_key=signing_key, app=app)
    if isinstance(store, StoreBackend) and store.inbox.app is None:
        store.inbox.app = app
    return store


def _check_options(backend: InboxBackend, app: App | None, *, worker: bool, poll: float) -> None:
    """Refuse ``worker=True`` without a session store or without an App, and a ``poll`` that is
    not > 0."""
    from ..operate import StoreBackend

    if worker and not isinstance(backend, StoreBackend):
        raise ConfigurationError(
            "create_app(worker=True) runs a worker on a session store; workflows are carried "
            "on by their own workers (interlude temporal-worker)"
        )
    if worker and app is None:
        raise ConfigurationError("create_app(worker=True) needs the App whose agents it runs")
    if not poll > 0:
        raise ConfigurationError(f"poll is a number of seconds > 0, got {poll!r}")


def _check_limits(public_url: str | None, body_timeout: float) -> None:
    """Refuse a ``public_url`` that is not an http(s) URL and a ``body_timeout`` not > 0."""
    from urllib.parse import urlsplit

    if public_url is not None:
        parts = urlsplit(public_url)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query:
            raise ConfigurationError(
                f"public_url is the http(s) URL the server is reached at, got {public_url!r}"
            )
    if not body_timeout > 0:
        raise ConfigurationError(f"body_timeout is a number of seconds > 0, got {body_timeout!r}")


def _templates() -> jinja2.Environment:
    """The Jinja2 environment of the HTML pages (autoescaped, strict about undefined names)."""
    import jinja2

    from ._output import finalize

    return jinja2.Environment(
        loader=jinja2.PackageLoader("interlude.server", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=finalize,
    )


def _lifespan(
    state: ServerState, backend: InboxBackend, app: App | None, *, worker: bool, poll: float
) -> Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]:
    """The application's lifespan: it binds ``state`` to the serving loop, runs the worker (if
    ``worker``) until shutdown, then closes the backend."""
    from ..operate import StoreBackend

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        state.stopping = asyncio.Event()  # bound to the serving loop
        state.loop = asyncio.get_running_loop()
        task: asyncio.Task[None] | None = None
        if worker and app is not None and isinstance(backend, StoreBackend):
            from ..operate import Worker
            from ._health import Supervisor

            state.worker = Worker(app, backend.store, poll=poll)
            state.supervisor = Supervisor(state.worker, state.stopping)
            task = asyncio.create_task(state.supervisor.run())
        try:
            yield
        finally:
            state.stopping.set()
            if task is not None:
                await task
            await backend.aclose()

    return lifespan


def stop_streams(asgi: Starlette) -> None:
    """Tell an application made by :func:`create_app` that its server is stopping: its event
    streams end (and its worker stops) at once instead of holding the shutdown until the
    server's graceful timeout. Safe to call from a signal handler or another thread; the CLI's
    ``serve`` calls it on Ctrl-C / SIGTERM."""
    state = getattr(asgi.state, "interlude", None)
    if state is not None:
        state.stop()
