"""PostgreSQL for tests: the shared server (its DSN, a throwaway schema per store) and throwaway
clusters for tests that restart or stop the database.

``INTERLUDE_TEST_POSTGRES_DSN`` names the shared server (default: the local test database). It
is never restarted: a test that takes a database down starts its own :func:`cluster` (Debian's
PostgreSQL binaries, ``initdb`` into a temporary folder, a free port, its socket in that folder,
run as the ``postgres`` user when the tests run as root). Without a reachable server, the
binaries or psycopg, the tests skip (:func:`tests.support.require_service`: they fail in CI).
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .ports import free_port
from .services import require_service

if TYPE_CHECKING:
    from interlude.sessions import PostgresStore

DSN = os.environ.get("INTERLUDE_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")


def _no_driver() -> str | None:
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        return f"psycopg is not installed ({exc}): pip install 'interlude-agents[postgres]'"
    return None


# --- the shared server ------------------------------------------------------------------------


@functools.cache
def _server_problem() -> str | None:
    problem = _no_driver()
    if problem is not None:
        return problem
    import psycopg

    try:
        psycopg.connect(DSN, connect_timeout=3).close()
    except psycopg.Error as exc:
        return f"no PostgreSQL server at {DSN} ({str(exc).strip()})"
    return None


def require_postgres() -> None:
    """Skip the calling test when the shared server is unavailable (fail if services are
    required)."""
    require_service(_server_problem())


def unique_schema() -> str:
    return f"t_{uuid.uuid4().hex[:16]}"


def schema_url(schema: str) -> str:
    """A DSN (for ``open_store``) that reaches ``schema`` on the shared server."""
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


# --- throwaway clusters -----------------------------------------------------------------------


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


def _cluster_problem() -> str | None:
    if _bin_dir() is None:
        return "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/pg_ctl)"
    if os.geteuid() == 0:
        import pwd

        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run the cluster as"
    return _no_driver()


def require_cluster() -> None:
    """Skip the calling test when no throwaway cluster can be made (fail if services are
    required)."""
    require_service(_cluster_problem())


class Cluster:
    """One throwaway cluster: ``dsn`` reaches its ``postgres`` database over TCP."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.data = folder / "data"
        self.port = free_port()
        self.bin = _bin_dir()
        self.dsn = f"postgresql://postgres@127.0.0.1:{self.port}/postgres?connect_timeout=3"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        assert self.bin is not None
        cmd = [str(self.bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=120)

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")

    def ctl(self, action: str, *extra: str) -> None:
        """``pg_ctl action`` (start, stop, restart) on the cluster, waiting for it (``-w``:
        pg_ctl's own wait, until the server accepts connections, 60 s at most)."""
        opts = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            "pg_ctl", action, "-D", str(self.data), "-w", "-t", "60", "-o", opts,
            "-l", str(self.folder / "log"), *extra,
        )  # fmt: skip

    def restart(self, mode: str = "fast") -> None:
        self.ctl("restart", "-m", mode)

    def stop(self, mode: str = "fast") -> None:
        self.ctl("stop", "-m", mode)

    def start(self) -> None:
        self.ctl("start")


@contextmanager
def cluster() -> Iterator[Cluster]:
    """A started throwaway cluster, stopped and removed afterwards."""
    require_cluster()
    folder = Path(tempfile.mkdtemp(prefix="interlude-pg-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    c = Cluster(folder)
    try:
        c.init()
        c.start()
        yield c
    finally:
        c._run("pg_ctl", "stop", "-D", str(c.data), "-m", "immediate", check=False)
        shutil.rmtree(folder, ignore_errors=True)
