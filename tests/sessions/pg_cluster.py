"""A throwaway PostgreSQL cluster for tests that restart or stop the database.

The machine's shared server is never restarted: each test that needs to takes down a database
starts its own cluster (Debian's PostgreSQL binaries, ``initdb`` into a temporary folder, a free
port, its socket in that folder), run as the ``postgres`` user when the tests run as root.
Without the binaries the tests skip, unless ``INTERLUDE_REQUIRE_SERVICES=1``, which makes them
fail instead (as ``pg.require_postgres`` does for the shared server).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


def _problem() -> str | None:
    if _bin_dir() is None:
        return "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/pg_ctl)"
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run the cluster as"
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        return f"psycopg is not installed ({exc})"
    return None


def require_cluster() -> None:
    """Skip the calling test when no throwaway cluster can be made (fail if services are
    required)."""
    problem = _problem()
    if problem is None:
        return
    if os.environ.get("INTERLUDE_REQUIRE_SERVICES") == "1":
        pytest.fail(f"INTERLUDE_REQUIRE_SERVICES=1 but {problem}")
    pytest.skip(problem)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """One throwaway cluster: ``dsn`` reaches its ``postgres`` database over TCP."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.data = folder / "data"
        self.port = _free_port()
        self.bin = _bin_dir()
        self.dsn = f"postgresql://postgres@127.0.0.1:{self.port}/postgres?connect_timeout=3"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        assert self.bin is not None
        cmd = [str(self.bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=60)

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")

    def ctl(self, action: str, *extra: str) -> None:
        """``pg_ctl action`` (start, stop, restart) on the cluster, waiting for it."""
        opts = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            "pg_ctl", action, "-D", str(self.data), "-w", "-t", "30", "-o", opts,
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


def wait_until(predicate: object, timeout: float, every: float = 0.05) -> bool:
    """Poll ``predicate()`` until it is true or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return True
        time.sleep(every)
    return bool(callable(predicate) and predicate())
