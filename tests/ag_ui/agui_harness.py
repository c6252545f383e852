"""The AG-UI tests' harness (fixtures in conftest.py): ``interlude serve --app agui_app:app`` in
a subprocess, and a Node script (client.cjs) that drives a thread through runs with
``@ag-ui/client``'s ``HttpAgent``."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
CLIENT_VERSION = "1.0.0"
"""The @ag-ui/client (and @ag-ui/core) release the tests drive the endpoint with."""
TOKEN = "agui-test-token-ana-0123456789"
OPS_TOKEN = "agui-test-token-bo-0123456789"


def require_service(problem: str | None) -> None:
    """Skip the calling test when ``problem`` names something missing (fail instead when
    ``INTERLUDE_REQUIRE_SERVICES=1``, as CI sets)."""
    if problem is None:
        return
    if os.environ.get("INTERLUDE_REQUIRE_SERVICES") == "1":
        pytest.fail(f"INTERLUDE_REQUIRE_SERVICES=1 but {problem}")
    pytest.skip(problem)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Served:
    """``interlude serve --app agui_app:app`` on a SQLite file, in a subprocess."""

    db: Path
    env: dict[str, str]
    port: int = field(default_factory=_free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Served:
        from interlude.sessions import SQLiteStore

        SQLiteStore(self.db).close()  # serve opens a store that exists
        tokens = self.db.with_name("tokens.json")
        tokens.write_text(json.dumps({TOKEN: "ana", OPS_TOKEN: {"name": "bo", "groups": ["ops"]}}))
        args = ["--store", f"sqlite:///{self.db}", "--app", "agui_app:app", "serve"]
        args += ["--port", str(self.port), "--tokens", str(tokens)]
        if self.env.get("AGUI_KEY"):
            args += ["--signing-key-env", "AGUI_KEY"]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "interlude", *args],
            cwd=HERE,
            env={**os.environ, **self.env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode() if self.process.stderr else ""
                raise AssertionError(f"interlude serve exited: {err[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.1)
        raise AssertionError("interlude serve did not start listening")

    def kill(self, sig: int = 9) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=30)


def drive(
    node_modules: str,
    url: str,
    thread: str,
    runs: list[dict[str, Any]],
    *,
    agent: str = "payer",
    token: str = TOKEN,
) -> list[dict[str, Any]]:
    """Run client.cjs: one HttpAgent on ``thread`` does ``runs`` in order; what each saw."""
    spec = {"url": f"{url}/ag-ui/{agent}", "token": token, "threadId": thread, "runs": runs}
    done = subprocess.run(
        ["node", str(HERE / "client.cjs"), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "AGUI_NODE_MODULES": node_modules},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return list(json.loads(done.stdout))


def stored(db: Path) -> str:
    """Everything in the SQLite store, as SQL text (compared before and after a refusal)."""
    with sqlite3.connect(db) as conn:
        return "\n".join(conn.iterdump())
