"""A real browser: headless Chromium (Debian's, driven by Playwright) answers in the inbox.

Skipped with the reason when Chromium or Playwright is missing, except in CI
(``INTERLUDE_REQUIRE_SERVICES=1``), where ``.ci/run`` installs Chromium. With
``INTERLUDE_SCREENSHOT=1`` the README's demo, served, is saved to ``docs/inbox.png``.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from interlude import Inbox, Worker
from interlude.server import create_app
from tests.support.serving import serving

from . import inbox_app
from .browser import ANSWER_TAKEN
from .conftest import TOKENS, chromium

ROOT = Path(__file__).resolve().parents[2]
TOKEN = next(t for t, name in TOKENS.items() if name == "ana")


def test_a_person_approves_in_chromium_and_the_tool_runs_once(store_url: str) -> None:
    executable = chromium()
    from playwright.sync_api import expect, sync_playwright

    iid = inbox_app.pause("ops", "demo-1", store_url)
    refund = inbox_app.pause("refunds", "refund-7", store_url)
    asgi = create_app(store_url, inbox_app.app, tokens=TOKENS, poll=0.1)
    with serving(asgi) as url, sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox"]
        )
        try:
            context = browser.new_context(viewport={"width": 1100, "height": 640})
            page = context.new_page()
            page.goto(f"{url}/")
            assert page.url == f"{url}/login"  # no data without signing in
            page.fill("#token", TOKEN)
            page.click("button[type=submit]")
            page.wait_for_url(f"{url}/")
            expect(page.locator("#pending")).to_contain_text("demo-1")
            expect(page.locator("#pending")).to_contain_text("refund-7")
            expect(page.locator("header")).to_contain_text("signed in as ana")

            page.click("a[href='/sessions/demo-1#q-" + _short(iid) + "']")
            page.wait_for_url(f"{url}/sessions/demo-1*")
            expect(page.locator("section.question pre").first).to_contain_text('"service": "web"')
            page.click("button.approve")
            expect(page.locator(".notice").first).to_contain_text(ANSWER_TAKEN)

            (recorded,) = Inbox(store_url).session("demo-1").recorded
            assert (recorded.interrupt_id, recorded.answer, recorded.by) == (iid, True, "ana")
            assert inbox_app.RUNS == []
            assert _work(store_url) == 1
            assert inbox_app.RUNS == ["deploy web 1.2.3"]

            # The list page learns it from the event stream: demo-1 leaves the list. (A page of
            # its own: the session page may be reloading itself now that its run went on, and
            # a navigation there could be cut short by that reload.)
            page = context.new_page()
            page.goto(f"{url}/")
            expect(page.locator("#pending")).not_to_contain_text("demo-1")
            inbox_app.pause("ops", "demo-2", store_url)  # a new question arrives, live
            expect(page.locator("#pending")).to_contain_text("demo-2", timeout=10_000)

            # An open session page updates when its question is answered elsewhere.
            page.goto(f"{url}/sessions/refund-7")
            expect(page.locator("section.question h4")).to_contain_text("refund")
            Inbox(store_url).record("refund-7", {refund: {"approve": True, "cap": 900}}, by="bo")
            expect(page.locator("section.question")).to_contain_text(
                "Answered by bo", timeout=10_000
            )
        finally:
            browser.close()
    assert _work(store_url) == 1  # bo's answer to refund-7
    assert inbox_app.RUNS[0] == "deploy web 1.2.3" and len(inbox_app.RUNS) == 2


def _work(store_url: str) -> int:
    """One worker pass, in a thread of its own (Playwright's loop runs in this one)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        worker = Worker(inbox_app.app, store_url)
        return pool.submit(asyncio.run, worker.run_once()).result(timeout=60)


def _short(interrupt_id: str) -> str:
    import hashlib

    return hashlib.sha256(interrupt_id.encode()).hexdigest()[:8]


def test_the_readme_s_demo_in_the_inbox(tmp_path: Path) -> None:
    """What the README's browser line shows: the demo's question, titled by what it asks (with
    INTERLUDE_SCREENSHOT=1 this is the README's picture, docs/inbox.png)."""
    executable = chromium()
    from playwright.sync_api import expect, sync_playwright

    from interlude.cli._demo import NAME, PROMPT
    from interlude.cli._demo import app as demo_app

    store_url = f"sqlite:///{tmp_path / 'demo.db'}"
    demo_app.start(NAME, "demo-1", store_url)(PROMPT)
    asgi = create_app(store_url, demo_app, tokens=TOKENS, poll=0.1)
    with serving(asgi) as url, sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox"]
        )
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 420})
            page.goto(f"{url}/login")
            page.fill("#token", TOKEN)
            page.click("button[type=submit]")
            page.wait_for_url(f"{url}/")
            expect(page.locator("#pending")).to_contain_text("May the agent run delete_files?")
            expect(page.locator("#pending")).to_contain_text("demo-1")
            if os.environ.get("INTERLUDE_SCREENSHOT") == "1":
                page.screenshot(path=str(ROOT / "docs" / "inbox.png"), full_page=True)
        finally:
            browser.close()
