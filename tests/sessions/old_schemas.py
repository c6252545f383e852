"""PostgreSQL schemas as earlier releases left them: the migrations up to one, applied and
recorded as that release did, for the tests that migrate them with data in place."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.postgres import DSN, drop_schema, require_postgres, unique_schema

Execute = Callable[..., None]
"""``execute(statement, params=None)``: one statement on the schema (``{s}`` names it)."""


@contextmanager
def schema_at_migration(version: int) -> Iterator[tuple[str, Execute]]:
    """A new schema on the shared server at migration ``version`` (its tables, and the
    migrations table saying so), dropped afterwards: ``(schema, execute)``."""
    import psycopg
    from psycopg import sql

    from interlude.sessions._postgres import _MIGRATIONS

    require_postgres()
    schema = unique_schema()
    name = sql.Identifier(schema)
    try:
        with psycopg.connect(DSN, autocommit=True) as conn:

            def execute(statement: str, params: Any = None) -> None:
                conn.execute(sql.SQL(statement).format(s=name), params)  # type: ignore[arg-type]

            execute("CREATE SCHEMA {s}")
            execute(
                "CREATE TABLE {s}.interlude_migrations (version int PRIMARY KEY, "
                "applied_at timestamptz NOT NULL DEFAULT now())"
            )
            for done, statements in enumerate(_MIGRATIONS[:version], start=1):
                for statement in statements:
                    execute(statement)
                execute("INSERT INTO {s}.interlude_migrations VALUES (%s)", (done,))
            yield schema, execute
    finally:
        drop_schema(schema)
