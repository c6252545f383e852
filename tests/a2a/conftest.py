"""Fixtures of the A2A tests: a store, an app served over A2A, and a2a-sdk clients to it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.extras import require_extras

require_extras("a2a", extra="a2a")

from a2a.client import Client  # noqa: E402


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
