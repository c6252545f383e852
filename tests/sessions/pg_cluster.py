"""Throwaway PostgreSQL clusters: moved to :mod:`tests.support.postgres`, named here too for the
tests that import ``tests.sessions.pg_cluster``."""

from __future__ import annotations

from collections.abc import Callable

from tests.support import wait_for
from tests.support.postgres import Cluster, cluster, require_cluster

__all__ = ["Cluster", "cluster", "require_cluster", "wait_until"]


def wait_until(predicate: Callable[[], object], timeout: float, every: float = 0.05) -> bool:
    """Whether ``predicate()`` became true within ``timeout`` seconds (a condition wait:
    :func:`tests.support.wait_for` with a bool instead of an AssertionError)."""
    try:
        wait_for(predicate, what="the condition", timeout=timeout, every=every)
    except AssertionError:
        return False
    return True
