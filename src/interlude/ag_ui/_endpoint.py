"""``POST /ag-ui/{agent}``: the HTTP side of the binding (authentication, the input, SSE)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from ._run import Runner

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import BaseRoute

    from ..operate import App, People
    from ..sessions import InboxStore

__all__ = ["create_endpoint", "server_routes"]

_RUNNING: set[asyncio.Task[None]] = set()  # runs whose client left: kept until they end

PATH = "/ag-ui/{agent}"


def create_endpoint(
    app: App,
    store: InboxStore | str,
    *,
    tokens: Mapping[str, Any],
    signing_key: bytes | str | None = None,
    path: str = PATH,
) -> Starlette:
    """An ASGI application serving ``app``'s agents, graphs and swarms over AG-UI at ``path``
    (``POST /ag-ui/{agent}``) on ``store`` (a store or a store URL): mount it in any ASGI
    server.

    ``tokens`` are the inbox's (``{token: name}`` or ``{token: {"name", "groups"}}``): a
    request without a known ``Authorization: Bearer`` token gets 401, and the token's name is
    who answers in the audit trail. With ``signing_key`` (the agents' key) a pause is
    verified before its questions are answered: a forged or unsigned one is refused.
    ``interlude serve`` serves the same route next to the inbox."""
    import contextlib

    from starlette.applications import Starlette

    from ..operate import Operator, People

    operator = Operator(app, store, signing_key=signing_key)
    routes = _routes(Runner(operator), People(tokens), path)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            operator.close()  # a store opened here from a URL

    return Starlette(routes=routes, lifespan=lifespan)


def server_routes(app: App | None, backend: object, auth: People) -> list[BaseRoute]:
    """The AG-UI route for ``create_app``: none without an App, a session store or the
    ``[ag-ui]`` extra (the inbox works without them)."""
    from ..operate import StoreBackend

    if app is None or not isinstance(backend, StoreBackend):
        return []
    try:
        import ag_ui.core  # noqa: F401
    except ImportError:
        return []
    from ..operate import Operator

    return _routes(Runner(Operator(app, backend.store, inbox=backend.inbox)), auth, PATH)


def _routes(runner: Runner, auth: People, path: str) -> list[BaseRoute]:
    from starlette.routing import Route

    async def run(request: Request) -> Response:
        return await _handle(request, runner, auth)

    return [Route(path, run, methods=["POST"], name="ag_ui")]


async def _handle(request: Request, runner: Runner, auth: People) -> Response:
    """401 without a token, 404 for a name the App does not register, 422 for an input
    that is not a ``RunAgentInput``; else the run's events as SSE."""
    from ag_ui.core import RunAgentInput
    from ag_ui.encoder import EventEncoder
    from pydantic import ValidationError
    from starlette.responses import JSONResponse, StreamingResponse

    approver = auth.bearer(request.headers.get("authorization"))
    if approver is None:
        return JSONResponse(
            {"error": "a bearer token is required"},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )
    name = request.path_params["agent"]
    if name not in runner.app:
        return JSONResponse({"error": f"no agent {name!r}"}, status_code=404)
    try:
        run = RunAgentInput.model_validate_json(await request.body())
    except ValidationError as exc:
        return JSONResponse(
            {
                "error": "the body is not an AG-UI RunAgentInput",
                "detail": exc.errors(include_context=False, include_input=False)[:5],
            },
            status_code=422,
        )
    encoder = EventEncoder(accept=request.headers.get("accept", "text/event-stream"))
    events = runner.events(name, run, approver.name, approver.groups)
    return StreamingResponse(
        _detached(encoder.encode(event) async for event in events),
        media_type=encoder.get_content_type(),
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _detached(chunks: AsyncIterator[str]) -> AsyncIterator[str]:
    """``chunks``, produced by a task of their own: a client that disconnects stops reading,
    not the run (an answered run carries on to its end, or its next pause, and is saved)."""
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    async def produce() -> None:
        try:
            async for chunk in chunks:
                queue.put_nowait(chunk)
        finally:
            queue.put_nowait(None)

    task = asyncio.create_task(produce())
    _RUNNING.add(task)
    task.add_done_callback(_RUNNING.discard)
    while (chunk := await queue.get()) is not None:
        yield chunk
