"""Fixtures of the interrupt suite: both executors, and same-agent vs JSON round trip."""

import pytest


@pytest.fixture(params=["concurrent", "sequential"])
def executor(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(params=[False, True], ids=["same-agent", "json-roundtrip"])
def fresh(request: pytest.FixtureRequest) -> bool:
    """False: resume the paused agent itself. True: resume a new agent that imported its state."""
    return request.param
