"""A headless Chromium (Debian's, driven by Playwright) signed in to an inbox served on a
loopback port: what the browser tests share. Skips with the reason when Chromium or Playwright
is missing (fails in CI)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from interlude.server import create_app
from tests.support.serving import serving

from .conftest import chromium

if TYPE_CHECKING:
    from playwright.sync_api import Page

ANSWER_TAKEN = re.compile(r"Your answer is recorded|Answered by \w+; a worker carries the run on")
"""The notice once a person's answer is recorded: the answer's own page says so, or, once that
page has reloaded itself (its session changed, and the event stream tells it at once), the
question says who answered. Which one a test sees depends on how fast the machine is."""


@contextmanager
def signed_in(
    store_url: str, app: Any, token: str, tokens: Mapping[str, Any]
) -> Iterator[tuple[Page, str]]:
    """A page signed in with ``token`` to the inbox of ``app`` on ``store_url``, and its URL."""
    executable = chromium()
    from playwright.sync_api import sync_playwright

    asgi = create_app(store_url, app, tokens=dict(tokens), poll=0.1)
    with serving(asgi) as url, sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox"]
        )
        try:
            page = browser.new_page()
            page.goto(f"{url}/login")
            page.fill("#token", token)
            page.click("button[type=submit]")
            page.wait_for_url(f"{url}/")
            yield page, url
        finally:
            browser.close()
