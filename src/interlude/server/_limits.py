"""A cap on request bodies: 413 for a body over ``MAX_BODY`` bytes, without reading more of it
than the cap into memory."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["MAX_BODY", "BodyLimit"]

MAX_BODY = 1 << 20
"""The largest request body the server reads (1 MiB)."""


class BodyLimit:
    """ASGI middleware: reads a request's body up to ``limit`` bytes, answers 413 beyond
    (at once when ``Content-Length`` says so), and hands the application the body read."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await self._too_large(scope, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._too_large(scope, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, send: Send) -> None:
        text = f"the request body is larger than {self.limit} bytes"
        if scope["path"].startswith("/api/"):
            body, kind = json.dumps({"error": text}).encode("ascii"), b"application/json"
        else:
            body, kind = text.encode("ascii"), b"text/plain; charset=utf-8"
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", kind),
                    (b"content-length", str(len(body)).encode("ascii")),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
