"""Fixtures of the AG-UI tests: the endpoint on a store, and the official client under Node."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.conftest import require_service

ANA = "ana-token-0123456789abcdef"
BO = "bo-token-0123456789abcdef"
TOKENS: dict[str, Any] = {ANA: "ana", BO: {"name": "bo", "groups": ["interns"]}}
CLIENT_VERSION = "1.0.0"
"""The version of @ag-ui/client (and @ag-ui/core) the tests drive the endpoint with."""
DRIVER = Path(__file__).with_name("drive.mjs")


def events_of(text: str) -> list[dict[str, Any]]:
    """The AG-UI events of a server-sent event stream's text."""
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "runs.txt"
    monkeypatch.setenv("INTERLUDE_TEST_RUNS", str(path))
    return path


def ran(runs: Path) -> list[str]:
    return runs.read_text().splitlines() if runs.exists() else []


@pytest.fixture(scope="session")
def ag_ui_client() -> Path:
    """A folder holding @ag-ui/client from npm (installed once per version into
    ~/.cache/interlude-tests) and the tests' driver script beside it."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        require_service("node and npm are needed to drive the endpoint with @ag-ui/client")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    prefix = Path(base, "interlude-tests", f"ag-ui-client-{CLIENT_VERSION}")
    entry = prefix / "node_modules/@ag-ui/client/package.json"
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with open(prefix.parent / f"{prefix.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # pytest-xdist workers share the cache
        if not entry.is_file():
            packages = [f"@ag-ui/client@{CLIENT_VERSION}", f"@ag-ui/core@{CLIENT_VERSION}"]
            done = subprocess.run(
                [
                    str(npm),
                    "install",
                    "--prefix",
                    str(prefix),
                    "--no-audit",
                    "--no-fund",
                    *packages,
                ],
                capture_output=True,
                text=True,
                timeout=300,
            )
            if done.returncode != 0 or not entry.is_file():
                require_service(f"npm could not install {packages}: {done.stderr[-500:]}")
        shutil.copyfile(DRIVER, prefix / DRIVER.name)  # imports resolve next to node_modules
    return prefix


@pytest.fixture
def drive(ag_ui_client: Path) -> Iterator[Any]:
    """Runs one AG-UI run with @ag-ui/client's HttpAgent in a new Node process: returns what
    the client saw (the events' types, its result, its pending interrupts, or its error)."""

    def run(url: str, thread: str, *, prompt: str | None = None, **command: Any) -> Any:
        command = {"url": url, "token": ANA, "threadId": thread, "prompt": prompt, **command}
        done = subprocess.run(
            ["node", str(ag_ui_client / DRIVER.name), json.dumps(command)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ag_ui_client,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    yield run


def post(client: httpx.Client, body: dict[str, Any], token: str = ANA) -> list[dict[str, Any]]:
    response = client.post("/ag-ui/ops", json=body, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    return events_of(response.text)
