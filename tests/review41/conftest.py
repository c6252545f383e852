"""The DBOS fixtures (a throwaway database, a worker) for the review's DBOS test."""

from tests.dbos.conftest import dbos_url, worker

__all__ = ["dbos_url", "worker"]
