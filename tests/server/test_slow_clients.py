"""The served inbox cuts off clients that do not send a request's head in time, and holds a
bounded number of connections (uvicorn alone held 600 slow and 5,000 unfinished ones)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from interlude.server import create_app
from tests.support import free_port, started, wait_for
from tests.support.serving import in_thread

from .conftest import TOKENS

if TYPE_CHECKING:
    import uvicorn


@contextmanager
def guarded(tmp_path: Path, **options: object) -> Iterator[tuple[int, uvicorn.Server]]:
    from interlude.server import uvicorn_config

    port = free_port()
    asgi = create_app(f"sqlite:///{tmp_path / 's.db'}", tokens=TOKENS)
    config = uvicorn_config(asgi, port=port, log_level="warning", **options)  # type: ignore[arg-type]
    with in_thread(config) as server:
        yield port, server


def holding(server: uvicorn.Server, count: int) -> None:
    """Return once ``server`` holds ``count`` connections (those a test opened are accepted)."""
    held = server.server_state.connections
    wait_for(lambda: len(held) == count, what=f"the server to hold {count} connections")


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1024) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def test_a_request_head_must_arrive_in_time(tmp_path: Path) -> None:
    with guarded(tmp_path, header_timeout=0.5) as (port, _):
        idle, slow = _connect(port), _connect(port)
        slow.sendall(b"GET /openapi.json HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
        started = time.monotonic()
        assert _closed_within(idle, 3) and _closed_within(slow, 3)
        assert time.monotonic() - started < 2.5
        # a client that sends its head in time is served, also on a kept-alive connection
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
            assert http.get("/openapi.json").status_code == 200
            time.sleep(0.7)  # longer than the head timeout, shorter than keep-alive (5 s)
            assert http.get("/openapi.json").status_code == 200


def test_connections_beyond_the_limit_are_closed_at_once(tmp_path: Path) -> None:
    with guarded(tmp_path, max_connections=5, header_timeout=5) as (port, server):
        held = [_connect(port) for _ in range(5)]
        holding(server, 5)
        extra = _connect(port)
        assert _closed_within(extra, 2)
        assert not any(_closed_within(s, 0.05) for s in held)  # the extra one is refused
        for s in held:
            s.close()
        holding(server, 0)
        assert httpx.get(f"http://127.0.0.1:{port}/openapi.json").status_code == 200


def test_interlude_serve_takes_the_limits(tmp_path: Path) -> None:
    from interlude.sessions import SQLiteStore

    port = free_port()
    SQLiteStore(tmp_path / "s.db")  # serve opens a store that exists
    store = f"sqlite:///{tmp_path / 's.db'}"
    serve = [sys.executable, "-m", "interlude", "serve", "--store", store, "--port", str(port)]
    bad = subprocess.run([*serve, "--header-timeout", "0"], capture_output=True, text=True)
    assert bad.returncode != 0 and "--header-timeout" in bad.stderr + bad.stdout
    env_tokens = {"INTERLUDE_TOKENS": "a-token-of-24-characters=ana"}
    limits = ["--header-timeout", "0.5", "--max-connections", "50"]
    with started([*serve, *limits], port=port, env=env_tokens, what="interlude serve"):
        idle = _connect(port)
        assert _closed_within(idle, 3)
