"""Fixtures of the inbox tests: a SQLite store with paused sessions, tokens, a test client."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the server tests need the [server] extra")

from starlette.testclient import TestClient

from interlude.server import create_app
from tests.support import require_service

from . import inbox_app

ANA = "ana-token-0123456789abcdef"
BO = "bo-token-0123456789abcdef"
TOKENS = {ANA: "ana", BO: "bo"}


def chromium() -> str:
    """The Chromium binary and Playwright (skip, or fail in CI, when either is missing)."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        require_service("no chromium on PATH (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        require_service("playwright is not installed (pip install playwright)")
    assert path is not None
    return path


@pytest.fixture(autouse=True)
def _clear_runs() -> Iterator[None]:
    inbox_app.RUNS.clear()
    yield
    inbox_app.RUNS.clear()


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'inbox.db'}"


@pytest.fixture
def client(store_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(store_url, inbox_app.app, tokens=TOKENS, poll=0.05)) as c:
        yield c


def bearer(token: str = ANA) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
