"""The official ``mcp`` client against Interlude's MCP door: the inbox with ``/mcp`` served by
a real uvicorn in a thread, a connected ``ClientSession`` (with or without an elicitation
callback), and a scripted person who fills in the forms."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ElicitRequestFormParams, ElicitResult

from interlude.mcp_serve import mcp_door
from interlude.server import create_app
from tests.support.serving import serving

from . import mcp_app

ANA = "ana-token-0123456789abcdef"
BO = "bo-token-0123456789abcdef"
TOKENS: dict[str, Any] = {ANA: {"name": "ana", "groups": ["ops"]}, BO: "bo"}


@contextmanager
def served(store: Any, **options: Any) -> Iterator[str]:
    """The inbox on ``store`` with the test app's agents at ``/mcp``; yields its base URL."""
    asgi = create_app(store, mcp_app.app, tokens=TOKENS, doors=[mcp_door], **options)
    with serving(asgi) as url:
        yield url


def http(token: str) -> httpx2.AsyncClient:
    """An HTTP client that sends ``token`` (the MCP transport's default timeouts)."""
    return httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=300)
    )


@asynccontextmanager
async def connected(url: str, token: str, person: Any = None) -> AsyncIterator[ClientSession]:
    """A ``ClientSession`` on ``url``'s ``/mcp`` (handshake-era: ``initialize``), sending
    ``token``; with ``person`` it declares elicitation and ``person`` fills in the forms."""
    async with (
        http(token) as client,
        streamable_http_client(f"{url}/mcp", http_client=client) as (read, write),
        ClientSession(read, write, elicitation_callback=person) as session,
    ):
        await session.initialize()
        yield session


class Person:
    """An elicitation callback: gives ``replies`` in turn (an ``ElicitResult``, or a coroutine
    function of the form's params that returns one) and keeps the forms it was shown."""

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.forms: list[ElicitRequestFormParams] = []

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        assert isinstance(params, ElicitRequestFormParams), params
        self.forms.append(params)
        assert self.replies, f"asked once more than scripted: {params.message!r}"
        reply = self.replies.pop(0)
        if callable(reply):
            reply = await reply(params)
        assert isinstance(reply, ElicitResult)
        return reply


def accept(**content: Any) -> ElicitResult:
    return ElicitResult(action="accept", content=content)


DECLINE = ElicitResult(action="decline")
CANCEL = ElicitResult(action="cancel")
