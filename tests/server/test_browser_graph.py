"""A real browser answers a graph node's question in the inbox; a worker resumes the graph.

Skipped with the reason when Chromium or Playwright is missing, except in CI
(``INTERLUDE_REQUIRE_SERVICES=1``).
"""

from __future__ import annotations

import asyncio
import hashlib
from concurrent.futures import ThreadPoolExecutor

from interlude import Inbox, Worker
from interlude.multiagent import Graph, node_path
from interlude.server import create_app
from tests.support.serving import serving

from .browser import ANSWER_TAKEN
from .conftest import TOKENS, chromium

TOKEN = next(t for t, name in TOKENS.items() if name == "ana")


def test_a_node_s_question_is_answered_in_chromium_and_the_graph_goes_on(store_url: str) -> None:
    executable = chromium()
    from playwright.sync_api import expect, sync_playwright

    from tests.multiagent import graph_app

    graph_app.CALLS.clear()
    graph = graph_app.app.start("trip", "trip-9", store_url)
    assert isinstance(graph, Graph)
    ids = {node_path(q)[0]: q.id for q in graph("Plan a trip").interrupts}
    short = hashlib.sha256(ids["budget"].encode()).hexdigest()[:8]
    asgi = create_app(store_url, graph_app.app, tokens=TOKENS, poll=0.1)
    with serving(asgi) as url, sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox"]
        )
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 640})
            page.goto(f"{url}/login")
            page.fill("#token", TOKEN)
            page.click("button[type=submit]")
            page.wait_for_url(f"{url}/")
            expect(page.locator("#pending")).to_contain_text("trip-9")
            expect(page.locator("#pending")).to_contain_text("asked by node budget")
            expect(page.locator("#pending")).to_contain_text("asked by node writer")

            page.click(f"a[href='/sessions/trip-9#q-{short}']")
            page.wait_for_url(f"{url}/sessions/trip-9*")
            question = page.locator(f"section#q-{short}")
            expect(question).to_contain_text("Spend 900 EUR?")
            expect(question.locator("code.node")).to_have_text("budget")
            question.locator("button.approve").click()
            expect(page.locator(".notice").first).to_contain_text(ANSWER_TAKEN)
        finally:
            browser.close()

    (recorded,) = Inbox(store_url).session("trip-9").recorded
    assert (recorded.interrupt_id, recorded.answer, recorded.by) == (ids["budget"], True, "ana")
    with ThreadPoolExecutor(1) as pool:
        worker = Worker(graph_app.app, store_url)
        assert pool.submit(asyncio.run, worker.run_once()).result(timeout=60) == 1
    graph = graph_app.app.open("trip-9", store_url)
    assert isinstance(graph, Graph) and graph.is_paused  # the writer still waits
    assert [node_path(q) for q in graph.interrupts] == [("writer",)]
    assert graph.record.order == ("research", "budget")
    assert graph_app.CALLS == {"research": 1, "writer": 1, "budget": 2}
