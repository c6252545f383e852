"""A real browser (Debian's Chromium, driven by Playwright) on a session page: the "answer
recorded" banner goes once the run it waited for has ended (the page reloads itself), and
"Fork here" asks before it forks. Skipped with the reason when Chromium or Playwright is
missing (except in CI)."""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from . import history_app, inbox_app
from .browser import signed_in
from .conftest import TOKENS
from .test_browser import TOKEN, _work

if TYPE_CHECKING:
    from playwright.sync_api import Page


def _signed_in(store_url: str, app: Any) -> AbstractContextManager[tuple[Page, str]]:
    """A page of a headless Chromium signed in as ana to the inbox on ``store_url``."""
    return signed_in(store_url, app, TOKEN, TOKENS)


def test_the_answer_banner_goes_when_the_run_ends(store_url: str) -> None:
    from playwright.sync_api import expect

    inbox_app.pause("ops", "demo-1", store_url)
    with _signed_in(store_url, inbox_app.app) as (page, url):
        page.goto(f"{url}/sessions/demo-1")
        page.click("button.approve")
        banner = page.get_by_text("Your answer is recorded")
        expect(banner).to_be_visible()
        assert _work(store_url) == 1  # the run goes on and ends; the page sees it and reloads
        expect(page.locator("li", has_text="ana answered approve: true")).to_be_visible(
            timeout=10_000
        )
        expect(banner).to_have_count(0)
        assert "answered=" not in page.url
    assert inbox_app.RUNS == ["deploy web 1.2.3"]


def test_fork_here_asks_first(store_url: str) -> None:
    from playwright.sync_api import expect

    history_app.run_through("h1", store_url)
    with _signed_in(store_url, history_app.app) as (page, url):
        page.goto(f"{url}/sessions/h1")
        row = page.locator("tr.checkpoint").filter(has_text="approval: find(")
        row.get_by_text("Fork here").click()
        confirm = row.get_by_role("button", name="Fork a new session here")
        expect(confirm).to_be_visible()  # asked, not forked yet
        expect(row).to_contain_text("This session does not change")
        assert page.url == f"{url}/sessions/h1"
        expect(page.locator("details.fork[open]")).to_have_count(1)
        confirm.click()
        page.wait_for_url(re.compile(r".*/sessions/h1\.fork-[0-9a-f]+$"))
        expect(page.locator("h3", has_text="History")).to_be_visible()
        expect(
            page.locator("td", has_text="forked from 'h1' at 'v1:before_tool_call:")
        ).to_be_visible()
        expect(page.locator("section.question h4")).to_have_text(
            "May the agent run find with this input?"
        )  # the approval, asked again in the new session
