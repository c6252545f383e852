"""What a request body may cost before the application sees it: the sender must name someone
(a bearer token or a session cookie) before any of it is read (401 otherwise, at once), it
must arrive within ``BODY_TIMEOUT`` seconds (408) and be at most ``MAX_BODY`` bytes (413,
without reading more than that into memory). Each refusal closes the connection, so a body
left unread is never taken for the next request."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BODY_TIMEOUT", "MAX_BODY", "BodyLimit"]

MAX_BODY = 1 << 20
"""The largest request body the server reads (1 MiB)."""
BODY_TIMEOUT = 30.0
"""Seconds a request's body has to arrive, counted from when the server starts reading it."""

_FORMS = (b"application/x-www-form-urlencoded", b"multipart/form-data")


class _TooLarge(Exception):
    """The body went past the limit while it was read."""


class BodyLimit:
    """ASGI middleware: refuses a request with a body (any method but GET, HEAD and OPTIONS)
    whose sender ``admit`` does not accept (401, the body unread; ``None`` accepts everyone),
    reads the body of the others up to ``limit`` bytes within ``timeout`` seconds (413 beyond
    the limit, at once when ``Content-Length`` says so; 408 when it is late), and hands the
    application the body read."""

    def __init__(
        self,
        app: ASGIApp,
        limit: int = MAX_BODY,
        timeout: float = BODY_TIMEOUT,
        admit: Callable[[Scope], bool] | None = None,
    ) -> None:
        self.app = app
        self.limit = limit
        self.timeout = timeout
        self.admit = admit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        if self.admit is not None and not self.admit(scope):
            await _refuse(scope, send, 401, _unknown(scope))
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await _refuse(scope, send, 413, f"the request body is larger than {self.limit} bytes")
            return
        try:
            async with asyncio.timeout(self.timeout):
                body = await self._read(receive)
        except TimeoutError:
            text = f"the request body did not arrive within {self.timeout:g} seconds"
            await _refuse(scope, send, 408, text)
            return
        except _TooLarge:
            await _refuse(scope, send, 413, f"the request body is larger than {self.limit} bytes")
            return
        if body is None:  # the client went away
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _read(self, receive: Receive) -> bytes | None:
        """The whole body (None if the client disconnected first)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def _form_post(scope: Scope) -> bool:
    """Whether the request is a browser's form post (a page's, not the API's)."""
    kind = dict(scope["headers"]).get(b"content-type", b"").lower()
    return not scope["path"].startswith("/api/") and kind.startswith(_FORMS)


def _unknown(scope: Scope) -> str:
    if _form_post(scope):
        return "sign in first"
    return "missing or wrong token: send Authorization: Bearer <token>"


async def _refuse(scope: Scope, send: Send, status: int, text: str) -> None:
    """Answer ``status`` with ``text`` (JSON ``{"error": text}`` unless the request is a
    page's form post) and close the connection."""
    headers = [(b"connection", b"close")]
    if _form_post(scope):
        body, kind = text.encode("utf-8"), b"text/plain; charset=utf-8"
    else:
        body, kind = json.dumps({"error": text}).encode("ascii"), b"application/json"
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="interlude"'))
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", kind),
                (b"content-length", str(len(body)).encode("ascii")),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
