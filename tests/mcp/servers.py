"""The MCP tests' servers: tests/mcp/server.py (stdio, or streamable HTTP with ``http PORT``),
examples/mcp_task_server.py, and server-everything's version; each server's log of tool runs,
and a server process a test can kill and start again on the same port."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from tests.support import Started, free_port, started
from tests.support.processes import ROOT

SERVER = str(Path(__file__).with_name("server.py"))
HOSTILE = str(Path(__file__).with_name("hostile_server.py"))
TASK_SERVER = str(ROOT / "examples" / "mcp_task_server.py")
EVERYTHING_VERSION = "2026.8.31"
"""The npm reference server the tests run (the TypeScript SDK's handshake-era server)."""


class ServerLog:
    """What a server did: one line per tool run (the server appends them to the file named
    by ``MCP_TEST_LOG``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.write_text("")

    def lines(self) -> list[str]:
        return self.path.read_text().splitlines()

    def clear(self) -> None:
        self.path.write_text("")

    def env(self) -> dict[str, str]:
        return {"MCP_TEST_LOG": str(self.path)}


class HttpServer:
    """A server process serving streamable HTTP at ``url`` (``/mcp`` on a free port, which
    ``{port}`` in ``argv`` and ``$PORT`` name), which a test may kill and start again on the
    same port. ``log`` is where its tool runs go (if it keeps a log: tests/mcp/server.py and
    examples/mcp_task_server.py do, server-everything does not)."""

    def __init__(self, argv: list[str], log: ServerLog, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.argv = [a.replace("{port}", str(self.port)) for a in argv]
        self.log = log
        self.env = {**(env or {}), **log.env(), "PORT": str(self.port)}
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.running: Started | None = None
        self._stack = ExitStack()

    def start(self) -> HttpServer:
        """Start it; return once it accepts connections."""
        what = f"{Path(self.argv[1]).name} on port {self.port}"
        self.running = self._stack.enter_context(
            started(self.argv, port=self.port, env=self.env, what=what)
        )
        return self

    def kill(self) -> None:
        """SIGKILL it and wait until it has ended."""
        if self.running is not None and self.running.process.poll() is None:
            self.running.process.kill()
            self.running.process.wait(60)
        self._stack.close()
        self.running = None
