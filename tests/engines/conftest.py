"""The conformance kit's engines: embedded SQLite (a file per test), embedded PostgreSQL (a
schema per test on the shared server), Temporal (the dev server of tests/temporal, a worker in
this process) and DBOS (a throwaway database per module, a worker process). A missing service
skips its cells, or fails them under ``INTERLUDE_REQUIRE_SERVICES=1`` (as ``.ci/run`` sets).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import pytest

from tests.sessions.stores import store_url
from tests.support import Started
from tests.temporal.conftest import temporal_address  # noqa: F401 (the dev server fixture)

from .agents import RUNS
from .engines import Embedded, Engine, OnDBOS, OnTemporal, dbos_worker

ENGINES = ["sqlite", "postgres", "temporal", "dbos"]


@pytest.fixture(scope="session", autouse=True)
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Where every engine's tools record their runs (workers started later inherit it)."""
    root = tmp_path_factory.mktemp("engine-runs")
    before = os.environ.get(RUNS)
    os.environ[RUNS] = str(root)
    yield root
    if before is None:
        os.environ.pop(RUNS, None)
    else:
        os.environ[RUNS] = before


@contextmanager
def fresh_dbos_database() -> Iterator[str]:
    """A new database for a DBOS system database, dropped afterwards."""
    import psycopg

    from interlude.dbos import close_clients
    from tests.dbos.conftest import _server_url, require_dbos
    from tests.support.postgres import DSN

    require_dbos()
    name = f"interlude_engines_{uuid.uuid4().hex[:12]}"
    try:
        yield _server_url(name)
    finally:
        close_clients()
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def dbos_served(runs_root: Path) -> Iterator[tuple[str, Started]]:
    """The module's DBOS database and a worker of the App on it."""
    with fresh_dbos_database() as url, dbos_worker(url, f"w-{uuid.uuid4().hex[:6]}") as running:
        yield url, running


async def make_engine(
    name: str, request: pytest.FixtureRequest, tmp_path: Path, service: object = None
) -> Engine:
    if name in ("sqlite", "postgres"):
        folder = tmp_path / f"store-{name}"
        folder.mkdir(parents=True, exist_ok=True)
        return Embedded(name, store_url(name, folder, request.addfinalizer))
    if name == "temporal":
        from temporalio.client import Client

        address = str(service)
        engine = OnTemporal(await Client.connect(address), address)
        await engine.serve(f"q-{uuid.uuid4().hex[:8]}")
        return engine
    url, _ = cast("tuple[str, Started]", service)
    return OnDBOS(url, fresh_dbos_database)


@pytest.fixture(params=ENGINES)
def engine_service(request: pytest.FixtureRequest) -> tuple[str, object]:
    """The engine's name and its service (resolved here, outside any event loop: the dev
    server's fixture runs one of its own)."""
    name = request.param
    if name == "temporal":
        return name, request.getfixturevalue("temporal_address")
    if name == "dbos":
        return name, request.getfixturevalue("dbos_served")
    return name, None


@pytest.fixture
async def engine(
    engine_service: tuple[str, object], request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Engine]:
    name, service = engine_service
    made = await make_engine(name, request, tmp_path, service)
    try:
        yield made
    finally:
        await made.close()


@pytest.fixture
async def reference(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Engine]:
    """Embedded SQLite: what every engine's record is compared with."""
    made = await make_engine("sqlite", request, tmp_path / "reference")
    try:
        yield made
    finally:
        await made.close()
