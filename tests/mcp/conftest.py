"""A real MCP server (tests/mcp/server.py) over stdio and over streamable HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the [mcp] extra is not installed")

from interlude.mcp import McpServer

SERVER = str(Path(__file__).with_name("server.py"))


class ServerLog:
    """What the server did: one line per tool run (the server appends them)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.write_text("")

    def lines(self) -> list[str]:
        return self.path.read_text().splitlines()

    def env(self) -> dict[str, str]:
        return {"MCP_TEST_LOG": str(self.path), "PATH": os.environ.get("PATH", "")}


@pytest.fixture
def server_log(tmp_path: Path) -> ServerLog:
    return ServerLog(tmp_path / "server.log")


@pytest.fixture
def stdio(server_log: ServerLog) -> Iterator[Callable[..., McpServer]]:
    """Makes stdio servers (each a subprocess once connected); all are closed at the end."""
    made: list[McpServer] = []

    def make(**kwargs: Any) -> McpServer:
        server = McpServer.stdio(
            sys.executable, [SERVER], name="notes", env=server_log.env(), **kwargs
        )
        made.append(server)
        return server

    yield make
    for server in made:
        server.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class HttpServer:
    """tests/mcp/server.py serving streamable HTTP from a subprocess (uvicorn)."""

    def __init__(self, log: ServerLog) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, **self.log.env()}
        self.process = subprocess.Popen(
            [sys.executable, SERVER, "http", str(self.port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("the MCP test server exited at start")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("the MCP test server did not start listening in 60 s")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def http(server_log: ServerLog) -> Iterator[HttpServer]:
    server = HttpServer(server_log)
    server.start()
    yield server
    server.kill()
