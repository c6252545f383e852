"""Where a test's store lives, for the tests that run on every kind of store (SQLite, the file
store, PostgreSQL): as ``open_store`` takes it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support import postgres

KINDS = ("sqlite", "file", "postgres")


def store_url(kind: str, folder: Path, add_finalizer: Callable[[Callable[[], None]], Any]) -> str:
    """A new store of ``kind``: a database file or a folder in ``folder``, or a schema of its
    own on the shared PostgreSQL server (the test skips without one), dropped by the clean-up
    given to ``add_finalizer`` (e.g. ``request.addfinalizer``)."""
    if kind == "sqlite":
        return f"sqlite:///{folder / 's.db'}"
    if kind == "file":
        return f"file://{folder / 'sessions'}"
    postgres.require_postgres()
    schema = postgres.unique_schema()
    add_finalizer(lambda: postgres.drop_schema(schema))
    return postgres.schema_url(schema)
