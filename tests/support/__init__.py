"""What the tests share: outside services (skip, or fail in CI), free ports, waiting on a
condition with a deadline, server processes started and stopped, uvicorn in a thread.

Import from here (``from tests.support import free_port, started``), never copy: a helper that
two test folders need lives in this package.
"""

from __future__ import annotations

from .ports import free_port
from .processes import Started, started
from .services import REQUIRED, require_service
from .waiting import until, wait_for, wait_for_port

__all__ = [
    "REQUIRED",
    "Started",
    "free_port",
    "require_service",
    "started",
    "until",
    "wait_for",
    "wait_for_port",
]
