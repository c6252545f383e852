"""Opening a store from a URL: ``sqlite:///path``, ``file:///dir``, ``postgresql://...``."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Literal
from urllib.parse import quote, unquote

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from ._protocol import InboxStore

__all__ = ["open_store", "store_url"]

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_USE = "use sqlite:///relative.db, sqlite:////absolute.db, file:///absolute/dir or postgresql://..."


def open_store(url: str) -> InboxStore:
    """The store a URL names.

    SQLite URLs follow SQLAlchemy: after ``sqlite://`` comes ``/`` and the path, so three slashes
    start a relative path and four an absolute one (``sqlite:///data/s.db``,
    ``sqlite:////var/lib/s.db``). A SQLite URL may end in ``?synchronous=full`` to sync every
    commit to disk (see :class:`SQLiteStore`). ``file:`` URLs follow RFC 8089: they name an
    absolute directory, ``file:///var/lib/sessions`` (or ``file://localhost/...``,
    ``file:/...``), with ``%XX`` escapes decoded; a relative path cannot be written as a
    ``file:`` URL. A bare path ending in ``.db``/``.sqlite`` is a SQLite file. Also
    ``postgresql://user@host/db`` (or ``postgres://``) and ``memory:``.
    """
    if not isinstance(url, str) or not url:
        raise ConfigurationError(f"a store URL is a non-empty string, got {url!r}")
    if url in ("memory:", "memory://"):
        from ._memory import MemoryStore

        return MemoryStore()
    local = local_store_path(url)
    if local is not None:
        kind, path, full = local
        if kind == "sqlite":
            from ._sqlite import SQLiteStore

            return SQLiteStore(path, synchronous="full" if full else "normal")
        from ._file import FileStore

        return FileStore(path)
    from ._postgres import PostgresStore

    return PostgresStore(url)


def store_url(kind: str, location: str) -> str:
    """The URL of a ``sqlite`` or ``file`` store at ``location`` (absolute or relative path; a
    ``file`` store's relative path is made absolute, as ``file:`` URLs hold only those)."""
    if kind == "file":
        return "file://" + quote(os.path.abspath(location))
    return f"{kind}:///{location}"


def local_store_path(url: str) -> tuple[Literal["sqlite", "file"], str, bool] | None:
    """``(kind, path, synchronous_full)`` of a SQLite or file store URL, None for a
    ``postgresql://`` or ``memory:`` URL; ConfigurationError for anything else, or a malformed
    URL. Nothing is opened or created."""
    if url.startswith(("postgresql://", "postgres://")) or url in ("memory:", "memory://"):
        return None
    scheme, colon, rest = url.partition(":")
    if not colon or not _SCHEME.match(url) or len(scheme) == 1:  # no scheme (or C:\...)
        if url.endswith((".db", ".sqlite", ".sqlite3")):
            return "sqlite", url, False
        raise ConfigurationError(f"unknown store URL {url!r}: {_USE}")
    scheme = scheme.lower()
    if scheme == "sqlite":
        return ("sqlite", *_sqlite_path(url, rest))
    if scheme == "file":
        return "file", _file_path(url, rest), False
    if scheme in ("postgresql", "postgres"):
        raise ConfigurationError(f"malformed store URL {url!r}: write {scheme}://user@host/db")
    raise ConfigurationError(
        f"unknown store URL scheme {scheme!r} in {url!r}: use sqlite, file or postgresql"
    )


def _sqlite_path(url: str, rest: str) -> tuple[str, bool]:
    # SQLAlchemy: sqlite:///rel.db -> "rel.db"; sqlite:////abs.db -> "/abs.db"
    rest, _, query = rest.partition("?")
    if not rest.startswith("///") or rest == "///":
        raise ConfigurationError(
            f"malformed store URL {url!r}: write sqlite:///relative/path.db (three slashes) or "
            "sqlite:////absolute/path.db (four slashes)"
        )
    if query not in ("", "synchronous=normal", "synchronous=full"):
        raise ConfigurationError(
            f"unknown option {query!r} in store URL {url!r}: sqlite URLs take "
            "?synchronous=normal or ?synchronous=full"
        )
    return rest[3:], query == "synchronous=full"


def _file_path(url: str, rest: str) -> str:
    # RFC 8089: file:///abs, file://localhost/abs, file:/abs; a path is always absolute
    if "?" in rest or "#" in rest:
        raise ConfigurationError(f"store URL {url!r}: file URLs take no ?query or #fragment")
    if rest.startswith("//"):
        host, slash, path = rest[2:].partition("/")
        if host.lower() not in ("", "localhost"):
            raise ConfigurationError(
                f"store URL {url!r} names the host {host!r}: a file store must be on this "
                "machine (file:///absolute/dir or file://localhost/absolute/dir)"
            )
        path = slash + path
    elif rest.startswith("/"):
        path = rest
    else:
        raise ConfigurationError(
            f"malformed store URL {url!r}: a file URL holds an absolute path "
            "(file:///absolute/dir); for a relative one pass the directory's absolute path"
        )
    path = unquote(path)
    if path.strip("/") == "":
        raise ConfigurationError(f"store URL {url!r} has no directory (file:///absolute/dir)")
    return "/" + path.lstrip("/")
