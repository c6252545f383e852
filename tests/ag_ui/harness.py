"""The AG-UI tests' harness (fixtures in conftest.py): ``interlude serve --app
tests.ag_ui.app:app`` in a subprocess, and a Node process (client.cjs) that drives threads
through runs with ``@ag-ui/client``'s ``HttpAgent``."""

from __future__ import annotations

import json
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.support import free_port, started, wait_for

HERE = Path(__file__).parent
CLIENT = HERE / "client.cjs"
CLIENT_VERSION = "1.0.0"
"""The @ag-ui/client (and @ag-ui/core) release the tests drive the endpoint with."""
TOKEN = "agui-test-token-ana-0123456789"
OPS_TOKEN = "agui-test-token-bo-0123456789"


class Served:
    """``interlude serve --app tests.ag_ui.app:app`` on ``folder/s.db``, in a subprocess; the
    paid tool's runs are lines of ``folder/paid.log``. ``env`` adds to its environment (the
    variables tests/ag_ui/app.py reads). Several may serve one folder, one after another."""

    def __init__(self, folder: Path, **env: str) -> None:
        self.db = folder / "s.db"
        self.paid = folder / "paid.log"
        self.env = {"AGUI_LOG": str(self.paid), **env}
        self.port = free_port()
        self._running = ExitStack()
        self.process: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Served:
        """Start serving; return once the server accepts connections."""
        from interlude.sessions import SQLiteStore

        SQLiteStore(self.db).close()  # serve opens a store that exists
        tokens = self.db.with_name("tokens.json")
        tokens.write_text(json.dumps({TOKEN: "ana", OPS_TOKEN: {"name": "bo", "groups": ["ops"]}}))
        args = ["--store", f"sqlite:///{self.db}", "--app", "tests.ag_ui.app:app", "serve"]
        args += ["--port", str(self.port), "--tokens", str(tokens)]
        if self.env.get("AGUI_KEY"):
            args += ["--signing-key-env", "AGUI_KEY"]
        command = [sys.executable, "-m", "interlude", *args]
        running = self._running.enter_context(
            started(command, port=self.port, env=self.env, what="interlude serve")
        )
        self.process = running.process
        return self

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Stop the server with ``sig`` (SIGKILL unless given) and wait until it has ended."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(60)
        self._running.close()

    def paid_lines(self) -> list[str]:
        """The paid tool's runs so far (none when it never ran)."""
        return self.paid.read_text().splitlines() if self.paid.exists() else []


class Client:
    """client.cjs in one long-lived Node process: :meth:`drive` hands it a spec and reads what
    the runs saw, so Node starts and loads @ag-ui/client once, not once per drive. A drive
    that fails or hangs (60 s) stops the process; the next one starts another. What Node
    prints on stderr goes to ``folder/node.log``."""

    def __init__(self, node_modules: str, folder: Path) -> None:
        self.node_modules = node_modules
        self.env = {**os.environ, "AGUI_NODE_MODULES": node_modules}
        self.errors = folder / "node.log"
        self.process: subprocess.Popen[str] | None = None
        self.lines: queue.Queue[str] = queue.Queue()

    def _running(self) -> subprocess.Popen[str]:
        if self.process is None or self.process.poll() is not None:
            with open(self.errors, "w") as errors:
                self.process = subprocess.Popen(
                    ["node", str(CLIENT)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=errors,
                    text=True,
                    env=self.env,
                )
            self.lines = queue.Queue()
            threading.Thread(
                target=_read_lines, args=(self.process, self.lines), daemon=True
            ).start()
        return self.process

    def drive(
        self,
        url: str,
        thread: str,
        runs: list[dict[str, Any]],
        *,
        agent: str = "payer",
        token: str = TOKEN,
    ) -> list[dict[str, Any]]:
        """One HttpAgent on ``thread`` of ``url`` does ``runs`` in order; what each saw."""
        spec = {"url": f"{url}/ag-ui/{agent}", "token": token, "threadId": thread, "runs": runs}
        process = self._running()
        assert process.stdin is not None
        process.stdin.write(json.dumps(spec) + "\n")
        process.stdin.flush()
        try:
            answer = json.loads(self.lines.get(timeout=60))
        except queue.Empty:
            self.close()
            raise AssertionError(f"client.cjs gave no answer in 60 s: {self._errors()}") from None
        if "error" in answer:
            raise AssertionError(f"client.cjs failed: {answer['error']}")
        return list(answer["runs"])

    def command(self, url: str, thread: str, runs: list[dict[str, Any]]) -> list[str]:
        """The command that does ``runs`` (to the payer) in a Node process of its own."""
        spec = {"url": f"{url}/ag-ui/payer", "token": TOKEN, "threadId": thread, "runs": runs}
        return ["node", str(CLIENT), json.dumps(spec)]

    def _errors(self) -> str:
        return self.errors.read_text(errors="replace")[-3000:]

    def close(self) -> None:
        if self.process is not None:
            if self.process.stdin is not None:
                self.process.stdin.close()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
            self.process = None


def _read_lines(process: subprocess.Popen[str], lines: queue.Queue[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        lines.put(line)


def past(deadline: str) -> None:
    """Wait until ``deadline`` (an AG-UI ``expiresAt``, ISO 8601 in UTC) has passed."""
    at = datetime.fromisoformat(deadline).timestamp()
    wait_for(lambda: time.time() > at, what=f"the deadline {deadline}")


def stored(db: Path) -> str:
    """Everything in the SQLite store, as SQL text (compared before and after a refusal)."""
    with sqlite3.connect(db) as conn:
        return "\n".join(conn.iterdump())
