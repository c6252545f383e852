"""``interlude serve --app tests.ag_ui.graph_app:app`` in a subprocess, for the AG-UI graph
tests (tests/ag_ui/harness.py's ``Served`` serves the agents' app): the tools' side effects
are lines of ``folder/done.log``, the sessions in ``folder/s.db``."""

from __future__ import annotations

import json
import signal
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from tests.support import free_port, started

from .harness import TOKEN

APP = "tests.ag_ui.graph_app:app"


class GraphServed:
    """The graph app served on ``folder/s.db`` (several may serve one folder, in turn)."""

    def __init__(self, folder: Path) -> None:
        self.db = folder / "s.db"
        self.done = folder / "done.log"
        self.port = free_port()
        self._running = ExitStack()
        self.process: Any = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> GraphServed:
        """Start serving; return once the server accepts connections."""
        from interlude.sessions import SQLiteStore

        SQLiteStore(self.db).close()  # serve opens a store that exists
        tokens = self.db.with_name("tokens.json")
        tokens.write_text(json.dumps({TOKEN: "ana"}))
        args = ["--store", f"sqlite:///{self.db}", "--app", APP, "serve"]
        args += ["--port", str(self.port), "--tokens", str(tokens)]
        command = [sys.executable, "-m", "interlude", *args]
        env = {"AGUI_LOG": str(self.done)}
        running = self._running.enter_context(
            started(command, port=self.port, env=env, what="interlude serve (graphs)")
        )
        self.process = running.process
        return self

    def kill(self) -> None:
        """SIGKILL the server and wait until it has ended."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(60)
        self._running.close()

    def done_lines(self) -> list[str]:
        """The tools' side effects so far."""
        return self.done.read_text().splitlines() if self.done.exists() else []

    def post(self, graph: str, thread: str, **body: Any) -> list[dict[str, Any]]:
        """One run over plain HTTP (no AG-UI client): the SSE events it streamed."""
        data = {"threadId": thread, "runId": f"run-{thread}", "messages": [], **body}
        headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "text/event-stream"}
        response = httpx.post(f"{self.url}/ag-ui/{graph}", json=data, headers=headers, timeout=60)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = response.text.splitlines()
        return [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
