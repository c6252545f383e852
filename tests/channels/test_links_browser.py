"""One-time answer links in a real browser (Debian's Chromium, driven by Playwright) against a
real uvicorn: opening an Approve link shows the call and answers nothing, pressing the button
answers once and the worker runs the tool once; the link then says it is spent; a typed
question's link opens its form. Skipped with the reason when Chromium or Playwright is missing
(except in CI)."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("starlette", reason="the link tests need the [server] extra")

from interlude import Inbox, Worker
from tests.support import require_service
from tests.support.serving import serving

from .test_links import ANA, RUNS, app, inbox_app, link, pause

if TYPE_CHECKING:
    from playwright.sync_api import Page


@pytest.fixture
def store(tmp_path: Path) -> Iterator[str]:
    RUNS.clear()
    yield f"sqlite:///{tmp_path / 'links.db'}"
    RUNS.clear()


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        require_service("no chromium on PATH (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        require_service("playwright is not installed (pip install playwright)")
    assert path is not None
    return path


@contextmanager
def _browser(store_url: str) -> Iterator[tuple[Page, str]]:
    """A page of a headless Chromium (signed in nowhere) and the URL of the inbox serving
    the links door."""
    executable = _chromium()
    from playwright.sync_api import sync_playwright

    with serving(inbox_app(store_url)) as url, sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox"]
        )
        try:
            yield browser.new_page(), url
        finally:
            browser.close()


def _work(store_url: str) -> int:
    """One worker pass, in a thread of its own (Playwright's loop runs in this one)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, Worker(app, store_url).run_once()).result(timeout=60)


def test_a_browser_approves_with_a_link_once(store: str) -> None:
    from playwright.sync_api import expect

    iid = pause("payments", "pay-b1", store)
    path = link(store, "pay-b1", iid, ANA, choice=True)
    with _browser(store) as (page, url):
        response = page.goto(url + path)
        assert response is not None and response.status == 200
        expect(page.locator("#heading")).to_have_text("Confirm your answer")
        expect(page.locator("#question pre")).to_contain_text('"amount": 120')
        expect(page.locator("#as")).to_contain_text("This link answers as ana (ops), once")
        assert Inbox(store).session("pay-b1").recorded == []  # opening it answered nothing

        page.click("#choice")
        expect(page.locator("#heading")).to_have_text("Answer recorded")
        expect(page.locator("#taken")).to_contain_text("ana: Your answer is recorded")
        (answer,) = Inbox(store).session("pay-b1").recorded
        assert (answer.by, answer.answer) == ("ana", True)

        page.go_back()  # the link's page again: no form now (pages are never cached)
        expect(page.locator("#error")).to_contain_text("ana has answered this question already")
        expect(page.locator("#choice")).to_have_count(0)
        assert _work(store) == 1
        assert RUNS == ["pay 120 to acme"]

        spent = page.goto(url + path)
        assert spent is not None and spent.status == 409
        expect(page.locator("#heading")).to_have_text("This question no longer waits")
        expect(page.locator("#error")).to_contain_text("answered by ana")
    assert _work(store) == 0
    assert RUNS == ["pay 120 to acme"]  # once


def test_a_browser_answers_a_typed_question_through_its_link(store: str) -> None:
    from playwright.sync_api import expect

    iid = pause("refunds", "refund-b1", store)
    path = link(store, "refund-b1", iid, ANA)
    with _browser(store) as (page, url):
        page.goto(url + path)
        expect(page.locator("#heading")).to_have_text("Answer this question")
        expect(page.locator("#question h3")).to_have_text("Refund up to how much?")
        page.fill("input[name='f.cap']", "40")
        page.click("#answer button.approve")
        expect(page.locator("#heading")).to_have_text("Answer recorded")
    assert [(r.by, r.answer) for r in Inbox(store).session("refund-b1").recorded] == [
        ("ana", {"cap": 40})
    ]
    assert _work(store) == 1
    assert RUNS == ["capped at 40", "refund o-7"]
