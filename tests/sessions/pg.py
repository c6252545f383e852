"""PostgreSQL for the session-store tests: the server's DSN, a throwaway schema per store, a skip.

``INTERLUDE_TEST_POSTGRES_DSN`` names the server (default: the local test database). Without a
reachable server (or without psycopg) the tests skip, unless ``INTERLUDE_REQUIRE_SERVICES=1``,
which makes them fail instead (as CI should).
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from interlude.sessions import PostgresStore

DSN = os.environ.get("INTERLUDE_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")


@functools.cache
def _problem() -> str | None:
    try:
        import psycopg
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        return f"psycopg is not installed ({exc}): pip install 'interlude-agents[postgres]'"
    try:
        psycopg.connect(DSN, connect_timeout=3).close()
    except psycopg.Error as exc:
        return f"no PostgreSQL server at {DSN} ({str(exc).strip()})"
    return None


def require_postgres() -> None:
    """Skip the calling test when PostgreSQL is unavailable (fail if services are required)."""
    problem = _problem()
    if problem is None:
        return
    if os.environ.get("INTERLUDE_REQUIRE_SERVICES") == "1":
        pytest.fail(f"INTERLUDE_REQUIRE_SERVICES=1 but {problem}")
    pytest.skip(problem)


def unique_schema() -> str:
    return f"t_{uuid.uuid4().hex[:16]}"


def schema_url(schema: str) -> str:
    """A DSN (for ``open_store``) that reaches ``schema`` on the test server."""
    return f"{DSN}{'&' if '?' in DSN else '?'}schema={schema}"


def drop_schema(schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def make_store(add_finalizer: Callable[[Callable[[], None]], Any], **kw: Any) -> PostgresStore:
    """A store on a new schema; ``add_finalizer`` (e.g. ``request.addfinalizer``) gets the
    clean-up that closes it and drops the schema."""
    from interlude.sessions import PostgresStore

    require_postgres()
    schema = kw.pop("schema", None) or unique_schema()
    store = PostgresStore(DSN, schema=schema, **kw)

    def clean_up() -> None:
        store.close()
        drop_schema(schema)

    add_finalizer(clean_up)
    return store


@contextmanager
def fresh_store(**kw: Any) -> Iterator[PostgresStore]:
    """``with fresh_store() as store:`` a store on a new schema, dropped afterwards."""
    clean_ups: list[Callable[[], None]] = []
    try:
        yield make_store(clean_ups.append, **kw)
    finally:
        for clean_up in clean_ups:
            clean_up()
