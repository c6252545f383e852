"""Fixtures of the move tests: the Temporal dev server of tests/temporal (one per session)."""

from tests.temporal.conftest import env, temporal_address  # noqa: F401
