"""``/events``: a server-sent event stream that says when the list of waiting questions changes.

Every ``poll`` seconds the server compares the list's fingerprint (which questions wait, which
have expired, which are answered) with the last one sent, and sends ``event: pending`` with the
new fingerprint when it differs (and once on connecting). The list page reloads its table on
such an event. A stream ends after a few minutes, or when the server stops; the browser's
EventSource reconnects by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ._pages import pending_rows, request_approver

if TYPE_CHECKING:
    from ._state import ServerState

__all__ = ["event_routes"]


async def _stream(state: ServerState) -> AsyncIterator[str]:
    yield "retry: 2000\n\n"
    last = None
    end = time.monotonic() + state.stream_seconds
    while not state.stopping.is_set() and time.monotonic() < end:
        rows, digest = await pending_rows(state)
        if digest != last:
            last = digest
            data = json.dumps({"fingerprint": digest, "count": len(rows)})
            yield f"event: pending\ndata: {data}\n\n"
        else:
            yield ": still here\n\n"
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(state.stopping.wait(), state.poll)


async def events(request: Request) -> Response:
    state: ServerState = request.app.state.interlude
    approver = request_approver(request) or state.auth.bearer(request.headers.get("authorization"))
    if approver is None:
        return JSONResponse({"error": "sign in, or send Authorization: Bearer <token>"}, 401)
    return StreamingResponse(
        _stream(state),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def event_routes() -> list[Route]:
    return [Route("/events", events, methods=["GET"])]
