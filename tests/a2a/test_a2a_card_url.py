"""The agent card names the URL it is served at from the server's configuration, never from
the request's ``Host`` header (issue 35): a raw request saying ``Host: evil.example`` to a
real uvicorn gets the public URL, or the address the server is bound to."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from interlude.a2a import create_a2a_app
from interlude.errors import ConfigurationError
from interlude.server import create_app
from tests.support.serving import serving

from .apps import build_app
from .wire import TOKENS

CARD = "/a2a/ops/.well-known/agent-card.json"


@contextmanager
def served(asgi: Any) -> Iterator[int]:
    """``asgi`` on a real uvicorn on a free loopback port, until the block ends: its port."""
    with serving(asgi, log_level="error") as url:
        yield int(url.rsplit(":", 1)[1])


def card_url(port: int, host: str = "evil.example") -> str:
    """The URL the card names, asked for with a raw request carrying ``Host: host``."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        head = f"GET {CARD} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        sock.sendall(head.encode("ascii"))
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    status, _, body = reply.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 200"), reply
    url: str = json.loads(body)["supportedInterfaces"][0]["url"]
    return url


def test_without_a_public_url_the_card_names_the_bound_address(db: str) -> None:
    with served(create_a2a_app(build_app(), db, tokens=TOKENS)) as port:
        assert card_url(port) == f"http://127.0.0.1:{port}/a2a/ops/"
        assert card_url(port, f"127.0.0.1:{port}") == f"http://127.0.0.1:{port}/a2a/ops/"


def test_the_card_names_the_public_url(db: str) -> None:
    public = "https://agents.example.com/team/"  # a proxy's prefix kept, one slash
    with served(create_a2a_app(build_app(), db, tokens=TOKENS, public_url=public)) as port:
        assert card_url(port) == "https://agents.example.com/team/a2a/ops/"


def test_interlude_serve_s_cards_name_its_public_url(db: str) -> None:
    asgi = create_app(db, build_app(), tokens=TOKENS, public_url="https://inbox.example")
    with served(asgi) as port:
        assert card_url(port) == "https://inbox.example/a2a/ops/"
    with served(create_app(db, build_app(), tokens=TOKENS)) as port:
        assert card_url(port) == f"http://127.0.0.1:{port}/a2a/ops/"


@pytest.mark.parametrize("bad", ["agents.example.com", "ftp://agents.example.com", "https://"])
def test_a_public_url_that_is_not_one_is_refused(db: str, bad: str) -> None:
    with pytest.raises(ConfigurationError, match="public_url"):
        create_a2a_app(build_app(), db, tokens=TOKENS, public_url=bad)
    with pytest.raises(ConfigurationError, match="public_url"):
        create_app(db, build_app(), tokens=TOKENS, public_url=bad)
