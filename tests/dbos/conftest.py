"""DBOS tests: a throwaway PostgreSQL database per test module (the DBOS system database,
dropped afterwards), workers in processes of their own (``worker_main``: killed by the crash
tests), and the test process as the client (it never launches DBOS).

Without dbos or the PostgreSQL server the tests skip, unless ``INTERLUDE_REQUIRE_SERVICES=1``
(as ``.ci/run`` sets), which makes them fail instead."""

from __future__ import annotations

import os
import signal
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.support import Started, require_service, started, wait_for
from tests.support.postgres import DSN, require_postgres


def require_dbos() -> None:
    try:
        import dbos  # noqa: F401
    except ImportError as exc:
        require_service(f"dbos is not installed ({exc}): pip install 'interlude-agents[dbos]'")
    require_postgres()


def _server_url(database: str) -> str:
    base, _, query = DSN.partition("?")
    root = base.rsplit("/", 1)[0]
    return f"{root}/{database}" + (f"?{query}" if query else "")


@pytest.fixture(scope="module")
def dbos_url() -> Iterator[str]:
    """A new database for this module's DBOS system database (dropped at the end)."""
    require_dbos()
    import psycopg

    name = f"interlude_dbos_{uuid.uuid4().hex[:12]}"
    try:
        yield _server_url(name)
    finally:
        from interlude.dbos import close_clients

        close_clients()
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def dbos_worker(url: str, executor_id: str) -> Iterator[Started]:
    """A worker process serving tests/dbos/agents.py's App, once it is ready."""
    argv = [sys.executable, "-m", "tests.dbos.worker_main", url, executor_id]
    with started(argv) as running:
        wait_for(
            lambda: "ready" in running.output(),
            what=f"the DBOS worker {executor_id}",
            process=running.process,
        )
        yield running


def kill(running: Started) -> None:
    """SIGKILL the worker (no clean-up of any kind) and wait for it to be gone."""
    os.kill(running.process.pid, signal.SIGKILL)
    running.process.wait(30)


@pytest.fixture(scope="module")
def worker(dbos_url: str) -> Iterator[Started]:
    """One worker for the module's tests."""
    with dbos_worker(dbos_url, f"w-{uuid.uuid4().hex[:6]}") as running:
        yield running
