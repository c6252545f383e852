"""Server processes the MCP tests watch by their process id: alive, gone, or named in a file."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support import wait_for


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, ended but not yet reaped, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def wait_gone(pid: int) -> bool:
    """Wait until process ``pid`` has ended; False if it still runs at the deadline."""
    try:
        wait_for(lambda: not alive(pid), what=f"process {pid} to end")
    except AssertionError:
        return False
    return True


def read_pid(path: Path) -> int:
    """The process id a server writes to ``path`` when it starts, once it is there."""
    wait_for(lambda: path.exists() and path.read_text(), what=f"a process id in {path}")
    return int(path.read_text())
