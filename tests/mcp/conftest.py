"""A real MCP server (tests/mcp/server.py) over stdio and over streamable HTTP."""

from __future__ import annotations

import fcntl
import os
import shutil
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


def wait_listening(process: subprocess.Popen[bytes], port: int) -> None:
    """Wait until ``process`` accepts connections on ``port`` (60 s at most)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("the MCP test server exited at start")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("the MCP test server did not start listening in 60 s")


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
        wait_listening(self.process, self.port)

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


def require_service(problem: str | None) -> None:
    """Skip the calling test when ``problem`` names a missing server (fail instead when
    ``INTERLUDE_REQUIRE_SERVICES=1``, as CI sets), as tests/server/conftest.py does."""
    if problem is None:
        return
    if os.environ.get("INTERLUDE_REQUIRE_SERVICES") == "1":
        pytest.fail(f"INTERLUDE_REQUIRE_SERVICES=1 but {problem}")
    pytest.skip(problem)


EVERYTHING_VERSION = "2026.8.31"
"""The npm reference server the tests run (the TypeScript SDK's handshake-era server)."""


def _npm_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "interlude-tests", f"server-everything-{EVERYTHING_VERSION}")


@pytest.fixture(scope="session")
def everything_js() -> str:
    """The entry point of ``@modelcontextprotocol/server-everything`` from npm, installed once
    into a cache directory keyed by its version (skips, or fails in CI, without node or npm)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        require_service("node and npm are needed for @modelcontextprotocol/server-everything")
    prefix = _npm_cache()
    entry = prefix / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
    prefix.parent.mkdir(parents=True, exist_ok=True)
    # One install at a time: parallel test workers (pytest-xdist) share the cache directory.
    with open(prefix.parent / f"{prefix.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not entry.is_file():
            package = f"@modelcontextprotocol/server-everything@{EVERYTHING_VERSION}"
            done = subprocess.run(
                [str(npm), "install", "--prefix", str(prefix), "--no-audit", "--no-fund", package],
                capture_output=True,
                text=True,
                timeout=300,
            )
            if done.returncode != 0 or not entry.is_file():
                problem = f"npm could not install {package}: {done.stderr.strip()[-500:]}"
                require_service(problem)
    return str(entry)


@pytest.fixture
def everything(everything_js: str) -> Iterator[Callable[..., McpServer]]:
    """Makes stdio connections to server-everything; all are closed at the end."""
    made: list[McpServer] = []

    def make(**kwargs: Any) -> McpServer:
        server = McpServer.stdio("node", [everything_js, "stdio"], name="everything", **kwargs)
        made.append(server)
        return server

    yield make
    for server in made:
        server.close()


class EverythingHttp:
    """server-everything serving streamable HTTP from a subprocess (``node index.js
    streamableHttp``, on the port given by PORT), which can be restarted on the same port."""

    def __init__(self, entry: str) -> None:
        self.entry = entry
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "PORT": str(self.port)}
        self.process = subprocess.Popen(
            ["node", self.entry, "streamableHttp"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_listening(self.process, self.port)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def everything_http(everything_js: str) -> Iterator[EverythingHttp]:
    server = EverythingHttp(everything_js)
    server.start()
    yield server
    server.kill()


@pytest.fixture
def time_server() -> Iterator[Callable[..., McpServer]]:
    """Makes stdio connections to mcp-server-time (PyPI, the official Python SDK's reference
    time server, in the dev extra); all are closed at the end."""
    import importlib.util

    if importlib.util.find_spec("mcp_server_time") is None:
        require_service("mcp-server-time is not installed: pip install -e '.[dev]'")
    made: list[McpServer] = []

    def make(**kwargs: Any) -> McpServer:
        args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
        server = McpServer.stdio(sys.executable, args, name="time", **kwargs)
        made.append(server)
        return server

    yield make
    for server in made:
        server.close()


TASK_SERVER = str(Path(__file__).resolve().parents[2] / "examples" / "mcp_task_server.py")


class TaskHttp:
    """examples/mcp_task_server.py (a task-capable server on the official SDK) serving streamable
    HTTP from a subprocess: the tasks live there, whichever client process asks about them."""

    def __init__(self, log: ServerLog, env: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log = log
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, **self.log.env(), **self.env}
        self.process = subprocess.Popen(
            [sys.executable, TASK_SERVER, str(self.port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_listening(self.process, self.port)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def task_http(server_log: ServerLog) -> Iterator[Callable[..., TaskHttp]]:
    """Starts task servers (``env`` adds to their environment); all are killed at the end."""
    made: list[TaskHttp] = []

    def make(**env: str) -> TaskHttp:
        server = TaskHttp(server_log, env)
        server.start()
        made.append(server)
        return server

    yield make
    for server in made:
        server.kill()
