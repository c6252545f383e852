"""The shared PostgreSQL server of the session-store tests: moved to
:mod:`tests.support.postgres`, named here too for the tests that import ``tests.sessions.pg``."""

from __future__ import annotations

from tests.support.postgres import (
    DSN,
    drop_schema,
    fresh_store,
    make_store,
    require_postgres,
    schema_url,
    unique_schema,
)

__all__ = [
    "DSN",
    "drop_schema",
    "fresh_store",
    "make_store",
    "require_postgres",
    "schema_url",
    "unique_schema",
]
