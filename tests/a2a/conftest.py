"""Fixtures of the A2A tests: a store, an app served over A2A, and a2a-sdk clients to it."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

if importlib.util.find_spec("a2a") is None:  # skip, or fail where services are required
    if os.environ.get("INTERLUDE_REQUIRE_SERVICES") == "1":
        raise RuntimeError("INTERLUDE_REQUIRE_SERVICES=1 but a2a-sdk (the [a2a] extra) is missing")
    pytest.skip("the [a2a] extra (a2a-sdk) is not installed", allow_module_level=True)

from a2a.client import Client


@pytest.fixture
def effects_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "effects.txt"
    monkeypatch.setenv("A2A_EFFECTS", str(path))
    return path


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'sessions.db'}"


@pytest.fixture
async def closing() -> AsyncIterator[list[Client]]:
    clients: list[Client] = []
    yield clients
    for client in clients:
        await client.close()
