"""The rule for tests that need something outside Python (a server, a browser, Node.js): on a
user's machine they skip, saying what is missing; with ``INTERLUDE_REQUIRE_SERVICES=1`` (as
``.ci/run`` sets) they fail instead, so CI always runs them."""

from __future__ import annotations

import os

import pytest

REQUIRED = os.environ.get("INTERLUDE_REQUIRE_SERVICES") == "1"
"""Whether a missing service fails the test rather than skipping it."""


def require_service(problem: str | None) -> None:
    """Skip the calling test when ``problem`` names a missing service (fail when required)."""
    if problem is None:
        return
    if REQUIRED:
        pytest.fail(f"INTERLUDE_REQUIRE_SERVICES=1 but {problem}")
    pytest.skip(problem)
