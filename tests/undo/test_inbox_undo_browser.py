""" "Undo to here" in a real browser (Debian's Chromium, driven by Playwright) against a real
uvicorn: the session page's history row of m4 opens the plan, which lists the three
compensations; confirming runs them, once each, and the session page shows the undo. Skipped
with the reason when Chromium or Playwright is missing (except in CI)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the inbox tests need the [server] extra")

from interlude.sessions import SQLiteStore
from tests.server.browser import signed_in

from .test_cli_undo import UNDONE, app, booked
from .undo_agent import EFFECTS

ANA = "ana-token-0123456789abcdef"


@pytest.fixture(autouse=True)
def _no_effects() -> Iterator[None]:
    EFFECTS.clear()
    yield
    EFFECTS.clear()


def test_undo_to_here_shows_the_plan_then_undoes_once(tmp_path: Path) -> None:
    url = booked(tmp_path)
    with signed_in(url, app, ANA, {ANA: "ana"}) as (page, base):
        from playwright.sync_api import expect

        page.goto(f"{base}/sessions/trip-1")
        row = page.locator("tr.checkpoint").filter(has=page.locator("code", has_text="m4")).first
        expect(row).to_contain_text("tool result")
        row.locator("a.undo").click()
        page.wait_for_url(f"{base}/sessions/trip-1/undo?to=m4")
        expect(page.locator("tr.step td.compensation")).to_have_text(
            ["mail.undo", "car.undo", "cancel_hotel"]
        )
        expect(page.locator("#stands")).to_contain_text("stopped before its next step")
        assert EFFECTS == []  # the plan changes nothing

        page.click("button.undo")
        page.wait_for_url(f"{base}/sessions/trip-1*")
        assert "/undo" not in page.url
        expect(page.locator("body")).to_contain_text("ana undid c5 (mail) by mail.undo")
        expect(page.locator("body")).to_contain_text("ana undid c3 (hotel) by cancel_hotel")
        expect(page.locator("body")).to_contain_text("it stands at m4, where it was undone to")
        expect(page.locator("a.undo")).to_have_count(0)
    assert EFFECTS == UNDONE  # each compensation once, newest first
    with SQLiteStore(tmp_path / "s.db") as store:
        stored = asyncio.run(store.load("trip-1"))
    assert stored is not None and len(stored.messages) == 5
    assert [a["by"] for a in stored.audit if a["name"] == "undo"] == ["ana"] * 3
