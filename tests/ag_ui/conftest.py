"""Fixtures of the AG-UI tests: @ag-ui/client installed from npm, ``interlude serve``."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from agui_harness import CLIENT_VERSION, Served, require_service


def _npm_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "interlude-tests", f"ag-ui-client-{CLIENT_VERSION}")


@pytest.fixture(scope="session")
def node_modules() -> str:
    """The node_modules folder holding @ag-ui/client, installed once per version (skips, or
    fails in CI, without node or npm)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        require_service("node and npm are needed for @ag-ui/client")
    prefix = _npm_cache()
    entry = prefix / "node_modules/@ag-ui/client/package.json"
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with open(prefix.parent / f"{prefix.name}.lock", "w") as lock:  # one install at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not entry.is_file():
            packages = [f"@ag-ui/client@{CLIENT_VERSION}", f"@ag-ui/core@{CLIENT_VERSION}"]
            npm_install = [str(npm), "install", "--prefix", str(prefix), "--no-audit"]
            done = subprocess.run(
                [*npm_install, "--no-fund", *packages],
                capture_output=True,
                text=True,
                timeout=300,
            )
            if done.returncode != 0 or not entry.is_file():
                require_service(f"npm could not install @ag-ui/client: {done.stderr[-500:]}")
    return str(prefix / "node_modules")


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    """Starts ``interlude serve`` processes (all killed at the end) on ``tmp_path/s.db``."""
    made: list[Served] = []

    def start(**env: str) -> Served:
        served = Served(tmp_path / "s.db", {"AGUI_LOG": str(tmp_path / "paid.log"), **env})
        made.append(served.start())
        return served

    yield start
    for served in made:
        served.kill()
