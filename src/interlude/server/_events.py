"""``/events``: a server-sent event stream that says when the list of waiting questions changes.

One poller per application (started with the first stream, stopped when the last one ends)
computes the list's fingerprint (which questions wait, which have expired, which are answered)
every ``poll`` seconds and, when it differs from the last one, hands it to every open stream,
which sends ``event: pending`` with it (and once on connecting). The list page reloads its table
on such an event. A stream ends after a few minutes, or at once when the server stops; the
browser's EventSource reconnects by itself. An approver may hold at most ``MAX_STREAMS`` streams
at a time (429 beyond).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ._output import JSON
from ._pages import pending_rows, request_approver

if TYPE_CHECKING:
    from ._state import ServerState

__all__ = ["MAX_STREAMS", "Hub", "event_routes"]

MAX_STREAMS = 10
"""How many event streams one approver may hold open at a time."""

KEEPALIVE = 15.0
"""Seconds between comments on an idle stream (so proxies keep it open)."""

log = logging.getLogger("interlude.server")


class _Subscriber:
    __slots__ = ("approver", "closed", "data", "event")

    def __init__(self, approver: str) -> None:
        self.approver = approver
        self.data: str | None = None
        self.closed = False
        self.event = asyncio.Event()

    def send(self, data: str | None) -> None:
        """Hand the stream the latest data (None: the server stops, end the stream)."""
        if data is None:
            self.closed = True
        else:
            self.data = data
        self.event.set()


class TooManyStreams(Exception):
    pass


class Hub:
    """The one poller of an application and the streams it feeds."""

    def __init__(self, state: ServerState, max_streams: int = MAX_STREAMS) -> None:
        self._state = state
        self._max = max_streams
        self._subscribers: set[_Subscriber] = set()
        self._per_approver: Counter[str] = Counter()
        self._task: asyncio.Task[None] | None = None
        self._last: str | None = None

    @property
    def streams(self) -> int:
        return len(self._subscribers)

    @property
    def polling(self) -> bool:
        return self._task is not None

    def subscribe(self, approver: str) -> _Subscriber:
        """A new stream's subscription (TooManyStreams when ``approver`` holds the most)."""
        if self._per_approver[approver] >= self._max:
            raise TooManyStreams(approver)
        sub = _Subscriber(approver)
        self._subscribers.add(sub)
        self._per_approver[approver] += 1
        if self._state.stopping.is_set():
            sub.send(None)
        elif self._task is None:
            self._last = None
            self._task = asyncio.create_task(self._run())
        elif self._last is not None:
            sub.send(self._last)
        return sub

    def unsubscribe(self, sub: _Subscriber) -> None:
        if sub in self._subscribers:
            self._subscribers.discard(sub)
            self._per_approver[sub.approver] -= 1
            if not self._per_approver[sub.approver]:
                del self._per_approver[sub.approver]

    async def _run(self) -> None:
        state = self._state
        try:
            while self._subscribers and not state.stopping.is_set():
                try:
                    rows, digest = await pending_rows(state)
                except Exception:
                    log.exception("the event stream could not read the pending questions")
                else:
                    data = json.dumps({"fingerprint": digest, "count": len(rows)})
                    if data != self._last:
                        self._last = data
                        for sub in list(self._subscribers):
                            sub.send(data)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(state.stopping.wait(), state.poll)
            if state.stopping.is_set():
                for sub in list(self._subscribers):
                    sub.send(None)
        finally:
            self._task = None  # no await between the last check and here: no subscriber missed


async def _stream(state: ServerState, sub: _Subscriber) -> AsyncIterator[str]:
    yield "retry: 2000\n\n"
    end = time.monotonic() + state.stream_seconds
    while not sub.closed:
        left = end - time.monotonic()
        if left <= 0:
            break
        try:
            await asyncio.wait_for(sub.event.wait(), min(left, KEEPALIVE))
        except TimeoutError:
            if time.monotonic() < end:
                yield ": still here\n\n"
            continue
        sub.event.clear()
        if sub.closed:
            break
        if sub.data is not None:
            data, sub.data = sub.data, None
            yield f"event: pending\ndata: {data}\n\n"


class _EventStream(StreamingResponse):
    """The stream of one subscriber, unsubscribed however the response ends."""

    def __init__(self, hub: Hub, sub: _Subscriber, state: ServerState) -> None:
        super().__init__(
            _stream(state, sub),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )
        self._hub = hub
        self._sub = sub

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._hub.unsubscribe(self._sub)


async def events(request: Request) -> Response:
    state: ServerState = request.app.state.interlude
    approver = request_approver(request) or state.auth.bearer(request.headers.get("authorization"))
    if approver is None:
        return JSON({"error": "sign in, or send Authorization: Bearer <token>"}, 401)
    if state.stopping.is_set():
        return JSON({"error": "the server is stopping"}, 503)
    try:
        sub = state.hub.subscribe(approver.name)
    except TooManyStreams:
        return JSON(
            {"error": f"{approver.name} holds {MAX_STREAMS} event streams already: close one"},
            429,
            headers={"Retry-After": "5"},
        )
    return _EventStream(state.hub, sub, state)


def event_routes() -> list[Route]:
    return [Route("/events", events, methods=["GET"])]
