"""Node packages from npm, installed once per version into a cache folder that every run and
every pytest-xdist worker shares (``~/.cache/interlude-tests``, or under ``$XDG_CACHE_HOME``).
Without node and npm, or when npm fails, the calling test skips (fails in CI)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from .services import require_service

__all__ = ["CACHE", "npm_install"]

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "interlude-tests")
"""Where the installs are kept, one folder each."""


def npm_install(folder: str, packages: Sequence[str], marker: str) -> Path:
    """The ``node_modules`` folder holding ``packages`` (``name@version``), installed into
    ``CACHE/folder`` unless ``node_modules/marker`` (a file of the last package) shows they
    are there. Name ``folder`` after the versions, so that a new version is a new install.
    One install at a time: a lock file keeps parallel workers from installing together."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        require_service(f"node and npm are needed for {', '.join(packages)}")
    prefix = CACHE / folder
    modules = prefix / "node_modules"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{folder}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (modules / marker).is_file():
            done = subprocess.run(
                [
                    str(npm),
                    "install",
                    "--prefix",
                    str(prefix),
                    "--no-audit",
                    "--no-fund",
                    *packages,
                ],
                capture_output=True,
                text=True,
                timeout=300,
            )
            if done.returncode != 0 or not (modules / marker).is_file():
                require_service(
                    f"npm could not install {', '.join(packages)}: {done.stderr.strip()[-500:]}"
                )
    return modules
