"""The options a PostgresStore opens with: its DSN (a ``schema=`` parameter taken out), its
schema name and pool sizes checked; and passwords redacted from the DSNs that errors show."""

from __future__ import annotations

import re
from urllib.parse import unquote

from ..errors import ConfigurationError

__all__ = ["options", "redact"]

_SCHEMA = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def redact(text: str) -> str:
    """``text`` (a DSN or an error naming one) with any password replaced by ``***``."""
    text = re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", text)
    return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]+)", r"\1***", text, flags=re.I)


def _split_schema(dsn: str, schema: str) -> tuple[str, str]:
    """Take a ``schema=`` query parameter (unknown to libpq) out of a postgresql:// URL, so that
    ``open_store`` URLs can name the schema; it must agree with an explicit ``schema``."""
    base, sep, query = dsn.partition("?")
    if not sep or not base.startswith(("postgresql://", "postgres://")):
        return dsn, schema
    pairs = [p for p in query.split("&") if p]
    named = [unquote(p[len("schema=") :]) for p in pairs if p.startswith("schema=")]
    if not named:
        return dsn, schema
    if schema not in ("interlude", named[-1]):
        raise ConfigurationError(f"the DSN names schema {named[-1]!r} but schema={schema!r}")
    rest = "&".join(p for p in pairs if not p.startswith("schema="))
    return base + ("?" + rest if rest else ""), named[-1]


def options(dsn: object, schema: str, min_size: int, max_size: int) -> tuple[str, str]:
    """The DSN (without a ``schema`` parameter) and the schema a store is opened with;
    ConfigurationError for a DSN that is not text, a bad schema name or bad pool sizes."""
    if not isinstance(dsn, str):
        raise ConfigurationError(f"a PostgreSQL DSN is a string, got {dsn!r}")
    dsn, schema = _split_schema(dsn, schema)
    if not isinstance(schema, str) or not _SCHEMA.fullmatch(schema):
        raise ConfigurationError(
            f"invalid schema name {schema!r}: use 1-63 letters, digits or '_', not "
            "starting with a digit"
        )
    if not 0 <= min_size <= max_size or max_size < 1:
        raise ConfigurationError(
            f"pool sizes min_size={min_size!r}, max_size={max_size!r}: need "
            "0 <= min_size <= max_size and max_size >= 1"
        )
    return dsn, schema
