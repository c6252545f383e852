"""Fixtures of the AG-UI tests: @ag-ui/client from npm driven by one Node process, ``interlude
serve`` shared by the tests that only talk to it, or started per test for a test about the
process (killed, restarted, configured otherwise)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.npm import npm_install

from .harness import CLIENT_VERSION, Client, Served


@pytest.fixture(scope="session")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    """@ag-ui/client (installed once per version; skips, or fails in CI, without node or npm)
    in one Node process for the whole session."""
    node_modules = npm_install(
        f"ag-ui-client-{CLIENT_VERSION}",
        [f"@ag-ui/client@{CLIENT_VERSION}", f"@ag-ui/core@{CLIENT_VERSION}"],
        "@ag-ui/client/package.json",
    )
    running = Client(str(node_modules), tmp_path_factory.mktemp("agui-node"))
    yield running
    running.close()


@pytest.fixture(scope="session")
def _shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = Served(tmp_path_factory.mktemp("agui-served")).start()
    yield served
    served.kill()


@pytest.fixture
def served(_shared_server: Served) -> Served:
    """``interlude serve`` for the session, its paid log emptied for this test. Its store
    holds every test's threads: each test has threads of its own (``thread``)."""
    _shared_server.paid.unlink(missing_ok=True)
    return _shared_server


@pytest.fixture
def thread() -> str:
    """A thread id no other test uses."""
    return f"th-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    """Starts ``interlude serve`` processes of this test alone, one after another on one store
    (``tmp_path/s.db``); ``env`` adds to their environment. All are killed at the end."""
    made: list[Served] = []

    def start(**env: str) -> Served:
        served = Served(tmp_path, **env)
        made.append(served)
        return served.start()

    yield start
    for served in made:
        served.kill()
