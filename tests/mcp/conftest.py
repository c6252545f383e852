"""Fixtures of the MCP tests: tests/mcp/server.py (a notes server on the official SDK) over
stdio and streamable HTTP, the reference servers (@modelcontextprotocol/server-everything from
npm, mcp-server-time from PyPI) and examples/mcp_task_server.py.

A server the tests only talk to is started once per session (per pytest-xdist worker): each
test opens MCP sessions of its own to it, and its log is emptied for each test. A test about
the server's process (killed, restarted, started with other settings) starts its own."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import require_service
from tests.support.extras import require_extras
from tests.support.npm import npm_install

require_extras("mcp", extra="mcp")

from interlude.mcp import McpServer  # noqa: E402

from .servers import EVERYTHING_VERSION, SERVER, TASK_SERVER, HttpServer, ServerLog  # noqa: E402


def _made(factory: Callable[..., McpServer]) -> tuple[Callable[..., McpServer], list[McpServer]]:
    """``factory`` and the list of the servers it made (to close them all at the end)."""
    made: list[McpServer] = []

    def make(**kwargs: Any) -> McpServer:
        server = factory(**kwargs)
        made.append(server)
        return server

    return make, made


# --- tests/mcp/server.py -------------------------------------------------------------------


@pytest.fixture
def server_log(tmp_path: Path) -> ServerLog:
    """The log of this test's own servers (``stdio``, ``http``)."""
    return ServerLog(tmp_path / "server.log")


@pytest.fixture
def stdio(server_log: ServerLog) -> Iterator[Callable[..., McpServer]]:
    """Makes stdio servers of this test alone (each a subprocess once connected; ``kwargs``
    go to McpServer.stdio); all are closed at the end."""
    make, made = _made(
        lambda **kwargs: McpServer.stdio(
            sys.executable, [SERVER], name="notes", env=server_log.env(), **kwargs
        )
    )
    yield make
    for server in made:
        server.close()


@pytest.fixture(scope="session")
def _notes_stdio(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[McpServer, ServerLog]]:
    log = ServerLog(tmp_path_factory.mktemp("notes-stdio") / "server.log")
    server = McpServer.stdio(sys.executable, [SERVER], name="notes", env=log.env())
    yield server, log
    server.close()


@pytest.fixture
def notes_log(_notes_stdio: tuple[McpServer, ServerLog]) -> ServerLog:
    """The log of the session's stdio server (``notes``), emptied for this test."""
    _, log = _notes_stdio
    log.clear()
    return log


@pytest.fixture
def notes(_notes_stdio: tuple[McpServer, ServerLog], notes_log: ServerLog) -> McpServer:
    """The session's stdio server (default settings) for the tests that only call its tools:
    one process, however many tests use it; ``notes_log`` is its log, emptied for this test."""
    server, _ = _notes_stdio
    return server


@pytest.fixture
def http(server_log: ServerLog) -> Iterator[HttpServer]:
    """tests/mcp/server.py serving streamable HTTP to this test alone (to kill, restart)."""
    server = HttpServer([sys.executable, SERVER, "http", "{port}"], server_log).start()
    yield server
    server.kill()


@pytest.fixture(scope="session")
def _notes_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    log = ServerLog(tmp_path_factory.mktemp("notes-http") / "server.log")
    server = HttpServer([sys.executable, SERVER, "http", "{port}"], log).start()
    yield server
    server.kill()


@pytest.fixture
def notes_http(_notes_http: HttpServer) -> HttpServer:
    """tests/mcp/server.py serving streamable HTTP for the session, its log emptied for this
    test (which must not kill it)."""
    _notes_http.log.clear()
    return _notes_http


# --- @modelcontextprotocol/server-everything (npm) -------------------------------------------


@pytest.fixture(scope="session")
def everything_js() -> str:
    """The entry point of ``@modelcontextprotocol/server-everything`` from npm, installed once
    into a cache directory keyed by its version (skips, or fails in CI, without node or npm)."""
    entry = "@modelcontextprotocol/server-everything/dist/index.js"
    modules = npm_install(
        f"server-everything-{EVERYTHING_VERSION}",
        [f"@modelcontextprotocol/server-everything@{EVERYTHING_VERSION}"],
        entry,
    )
    return str(modules / entry)


@pytest.fixture(scope="session")
def _everything(
    everything_js: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HttpServer]:
    log = ServerLog(tmp_path_factory.mktemp("everything") / "server.log")
    server = HttpServer(["node", everything_js, "streamableHttp"], log).start()
    yield server
    server.kill()


@pytest.fixture
def everything(_everything: HttpServer) -> Iterator[Callable[..., McpServer]]:
    """Makes connections to the session's server-everything over streamable HTTP (one node
    process; each connection its own MCP session, which the server keeps apart); all are
    closed at the end."""
    make, made = _made(
        lambda **kwargs: McpServer.http(_everything.url, name="everything", **kwargs)
    )
    yield make
    for server in made:
        server.close()


@pytest.fixture
def everything_stdio(everything_js: str) -> Iterator[Callable[..., McpServer]]:
    """Makes stdio connections to server-everything (a node process each); all are closed at
    the end."""
    make, made = _made(
        lambda **kwargs: McpServer.stdio(
            "node", [everything_js, "stdio"], name="everything", **kwargs
        )
    )
    yield make
    for server in made:
        server.close()


@pytest.fixture
def everything_http(everything_js: str, server_log: ServerLog) -> Iterator[HttpServer]:
    """server-everything serving streamable HTTP to this test alone (to kill, restart)."""
    server = HttpServer(["node", everything_js, "streamableHttp"], server_log).start()
    yield server
    server.kill()


# --- mcp-server-time (PyPI) ------------------------------------------------------------------


@pytest.fixture
def time_server() -> Iterator[Callable[..., McpServer]]:
    """Makes stdio connections to mcp-server-time (PyPI, the official Python SDK's reference
    time server, in the dev extra); all are closed at the end."""
    if importlib.util.find_spec("mcp_server_time") is None:
        require_service("mcp-server-time is not installed: pip install -e '.[dev]'")
    args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
    make, made = _made(
        lambda **kwargs: McpServer.stdio(sys.executable, args, name="time", **kwargs)
    )
    yield make
    for server in made:
        server.close()


# --- examples/mcp_task_server.py -------------------------------------------------------------


@pytest.fixture(scope="session")
def _tasks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    log = ServerLog(tmp_path_factory.mktemp("tasks") / "server.log")
    server = HttpServer([sys.executable, TASK_SERVER, "{port}"], log).start()
    yield server
    server.kill()


@pytest.fixture
def tasks_server(_tasks: HttpServer) -> HttpServer:
    """examples/mcp_task_server.py (a task-capable server on the official SDK) serving
    streamable HTTP for the session with its default settings: the tasks live there, whichever
    client process asks about them. Its log is emptied for this test."""
    _tasks.log.clear()
    return _tasks


@pytest.fixture
def task_http(server_log: ServerLog) -> Iterator[Callable[..., HttpServer]]:
    """Starts task servers of this test alone (``env`` adds to their environment: the
    settings examples/mcp_task_server.py reads at start); all are killed at the end."""
    made: list[HttpServer] = []

    def make(**env: str) -> HttpServer:
        server = HttpServer([sys.executable, TASK_SERVER, "{port}"], server_log, env)
        made.append(server)
        return server.start()

    yield make
    for server in made:
        server.kill()
