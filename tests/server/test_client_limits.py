"""What one client can hold of the served inbox (issue 35): its idle sockets count against a
budget of its own address, so another client is still answered; a request body must arrive in
time (408) and is read only for a request that names someone (401 at once otherwise)."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from interlude.server import create_app
from tests.support import free_port, wait_for
from tests.support.serving import in_thread

from . import inbox_app
from .conftest import ANA, TOKENS, bearer
from .test_slow_clients import _closed_within, _connect, holding

if TYPE_CHECKING:
    import uvicorn

ROOT = Path(__file__).resolve().parents[2]
OTHER = "127.0.0.2"
"""Another client: Linux routes all of 127.0.0.0/8 to the loopback interface."""


def _other_client_address() -> str:
    with socket.socket() as s:
        try:
            s.bind((OTHER, 0))
        except OSError:
            pytest.skip(f"{OTHER} is not a loopback address here (Linux routes 127/8 to lo)")
    return OTHER


@contextmanager
def served(
    store_url: str, *, app: dict[str, Any], server: dict[str, Any]
) -> Iterator[tuple[int, uvicorn.Server]]:
    """``create_app(**app)`` behind ``uvicorn_config(**server)`` on a free port."""
    from interlude.server import uvicorn_config

    port = free_port()
    asgi = create_app(store_url, inbox_app.app, tokens=TOKENS, **app)
    config = uvicorn_config(asgi, port=port, log_level="error", lifespan="on", **server)
    with in_thread(config) as uv:
        yield port, uv


def _answered_from(address: str, port: int, times: int) -> int:
    """How many of ``times`` API requests from ``address`` (each on a new connection) got
    their answer within 2 s."""
    answered = 0
    for _ in range(times):
        transport = httpx.HTTPTransport(local_address=address)
        try:
            with httpx.Client(transport=transport, timeout=2, headers=bearer()) as http:
                answered += http.get(f"http://127.0.0.1:{port}/api/pending").status_code == 200
        except httpx.TransportError:
            pass
    return answered


def _head(path: str, length: int, headers: dict[str, str]) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: inbox", f"Content-Length: {length}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


def _dribble(sock: socket.socket, seconds: float) -> tuple[bytes, float]:
    """Send a byte of body every 0.2 s for up to ``seconds``; what came back (until the server
    closed the connection) and after how long its first byte came."""
    sock.settimeout(0.2)
    started = time.monotonic()
    reply, first = b"", 0.0
    while time.monotonic() - started < seconds:
        if not reply:
            try:
                sock.sendall(b" ")
            except OSError:
                break
        try:
            got = sock.recv(4096)
        except TimeoutError:
            continue
        except ConnectionResetError:
            break
        if not got:
            break
        first = first or time.monotonic() - started
        reply += got
    return reply, first


def test_one_client_holding_idle_sockets_does_not_lock_out_another(store_url: str) -> None:
    other = _other_client_address()
    limits = {"max_connections": 20, "max_client_connections": 4, "header_timeout": 5}
    with served(store_url, app={}, server=limits) as (port, server):
        held = [_connect(port) for _ in range(4)]  # its budget
        holding(server, 4)
        beyond = [_connect(port) for _ in range(30)]  # more than the server holds in all
        assert all(_closed_within(s, 2) for s in beyond)
        assert not any(_closed_within(s, 0.05) for s in held)  # held until the head timeout
        started = time.monotonic()
        assert _answered_from(other, port, 10) == 10
        assert time.monotonic() - started < 3
        # the first client is still served once it sends requests on what it holds
        held[0].sendall(f"GET /api/pending HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ANA}"
                        "\r\n\r\n".encode())  # fmt: skip
        held[0].settimeout(3)
        assert held[0].recv(64).startswith(b"HTTP/1.1 200")
        for s in [*held, *beyond]:
            s.close()


def test_a_body_that_does_not_arrive_in_time_gets_408_and_the_connection_closed(
    store_url: str,
) -> None:
    iid = inbox_app.pause("ops", "s1", store_url)
    with served(store_url, app={"body_timeout": 1.0}, server={}) as (port, _):
        sock = _connect(port)
        sock.sendall(_head("/api/sessions/s1/answers", 200, bearer()))
        reply, after = _dribble(sock, 5)  # ends when the server closes the connection
        assert reply.startswith(b"HTTP/1.1 408"), reply
        assert b"did not arrive within 1 seconds" in reply
        assert 0.9 <= after < 2.0, after
        sock.close()
        # a body that arrives in time is read and answered
        r = httpx.post(
            f"http://127.0.0.1:{port}/api/sessions/s1/answers",
            json={"answers": {iid: True}},
            headers=bearer(),
        )
        assert r.status_code == 202, r.text


def test_a_post_that_names_nobody_is_refused_before_its_body_is_read(store_url: str) -> None:
    inbox_app.pause("ops", "s1", store_url)
    with served(store_url, app={"body_timeout": 3.0}, server={}) as (port, _):
        headers = {"Content-Type": "application/json"}
        wrong = {**headers, "Authorization": "Bearer not-a-token-0123456789"}
        for sent in (headers, wrong):
            sock = _connect(port)
            started = time.monotonic()
            sock.sendall(_head("/api/sessions/s1/answers", 1_000_000, sent) + b'{"answers"')
            reply, _ = _dribble(sock, 2)  # none of the rest is sent
            assert time.monotonic() - started < 1.0
            assert reply.startswith(b"HTTP/1.1 401"), reply
            assert b"www-authenticate: Bearer" in reply and b"connection: close" in reply
            sock.close()
        # a browser's form post without a session cookie: 401 too, in words
        sock = _connect(port)
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        sock.sendall(_head("/sessions/s1/answer", 500_000, form))
        reply, _ = _dribble(sock, 2)
        assert reply.startswith(b"HTTP/1.1 401") and reply.endswith(b"sign in first"), reply
        sock.close()
        # the same large post naming someone is admitted: its body is waited for (then 408)
        sock = _connect(port)
        sock.sendall(_head("/api/sessions/s1/answers", 1_000_000, {**headers, **bearer()}))
        sock.settimeout(1.0)
        with pytest.raises(TimeoutError):
            sock.recv(64)
        sock.close()


def test_interlude_serve_takes_the_client_limits_and_the_public_url(tmp_path: Path) -> None:
    other = _other_client_address()
    store = f"sqlite:///{tmp_path / 's.db'}"
    inbox_app.pause("ops", "s1", store)
    port = free_port()
    env = {**os.environ, "INTERLUDE_TOKENS": f"{ANA}=ana"}
    serve = [sys.executable, "-m", "interlude", "serve", "--store", store, "--port", str(port)]
    for bad in (["--max-client-connections", "0"], ["--public-url", "inbox.example"]):
        r = subprocess.run([*serve, *bad], capture_output=True, text=True, env=env, cwd=ROOT)
        assert r.returncode != 0 and bad[0] in r.stderr + r.stdout, r.stderr
    flags = ["--max-client-connections", "2", "--body-timeout", "1", "--json"]
    flags += ["--app", "tests.server.inbox_app:app", "--public-url", "https://inbox.example/"]
    proc = subprocess.Popen(
        [*serve, *flags], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["url"] == f"http://127.0.0.1:{port}"
        wait_for(lambda: _answered_from(other, port, 1) == 1, what="interlude serve")
        held = [_connect(port) for _ in range(2)]
        time.sleep(0.2)
        assert _closed_within(_connect(port), 2)  # a third from this address
        assert _answered_from(other, port, 5) == 5
        for s in held:
            s.close()
        time.sleep(0.2)
        sock = _connect(port)
        sock.sendall(_head("/api/sessions/s1/answers", 100, bearer()))
        reply, after = _dribble(sock, 5)
        assert reply.startswith(b"HTTP/1.1 408") and after < 2.0, reply
        sock.close()
        if importlib.util.find_spec("a2a") is not None:  # the A2A door names the public URL
            card = httpx.get(
                f"http://127.0.0.1:{port}/a2a/ops/.well-known/agent-card.json",
                headers={"Host": "evil.example"},
            ).json()
            assert card["supportedInterfaces"][0]["url"] == "https://inbox.example/a2a/ops/"
    finally:
        proc.terminate()
        proc.wait(15)
