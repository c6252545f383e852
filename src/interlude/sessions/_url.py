"""Opening a store from a URL: ``sqlite:///path``, ``file:///dir``, ``postgresql://...``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from ._protocol import SessionStore

__all__ = ["open_store", "store_url"]


def open_store(url: str) -> SessionStore:
    """The store a URL names.

    After ``sqlite://`` or ``file://`` comes ``/`` and the path, so three slashes start a relative
    path and four an absolute one (``sqlite:///data/s.db``, ``sqlite:////var/lib/s.db``), as in
    SQLAlchemy. A bare path ending in ``.db``/``.sqlite`` is a SQLite file. Also
    ``postgresql://user@host/db`` (or ``postgres://``) and ``memory:``. A SQLite URL may end in
    ``?synchronous=full`` to sync every commit to disk (see :class:`SQLiteStore`).
    """
    if not isinstance(url, str) or not url:
        raise ConfigurationError(f"a store URL is a non-empty string, got {url!r}")
    scheme, sep, rest = url.partition("://")
    if url in ("memory:", "memory://"):
        from ._memory import MemoryStore

        return MemoryStore()
    if not sep:
        if url.endswith((".db", ".sqlite", ".sqlite3")):
            scheme, rest = "sqlite", "/" + url
        else:
            raise ConfigurationError(
                f"unknown store URL {url!r}: use sqlite:///path.db, file:///dir or postgresql://..."
            )
    if scheme == "sqlite":
        from ._sqlite import SQLiteStore

        rest, _, query = rest.partition("?")
        if query not in ("", "synchronous=normal", "synchronous=full"):
            raise ConfigurationError(
                f"unknown option {query!r} in store URL {url!r}: sqlite URLs take "
                "?synchronous=normal or ?synchronous=full"
            )
        full = query == "synchronous=full"
        return SQLiteStore(_path(url, rest), synchronous="full" if full else "normal")
    if scheme == "file":
        from ._file import FileStore

        return FileStore(_path(url, rest))
    if scheme in ("postgresql", "postgres"):
        from ._postgres import PostgresStore

        return PostgresStore(url)
    raise ConfigurationError(
        f"unknown store URL scheme {scheme!r} in {url!r}: use sqlite, file or postgresql"
    )


def store_url(kind: str, location: str) -> str:
    """The URL of a ``sqlite`` or ``file`` store at ``location`` (absolute or relative path)."""
    return f"{kind}:///{location}"


def _path(url: str, rest: str) -> str:
    # sqlite:///rel.db -> rest "/rel.db" -> "rel.db"; sqlite:////abs.db -> "//abs.db" -> "/abs.db"
    if not rest.startswith("/") or rest == "/":
        raise ConfigurationError(f"store URL {url!r} has no path (sqlite:///file.db)")
    return rest[1:]
