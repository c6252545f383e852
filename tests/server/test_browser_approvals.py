"""A real browser (Debian's Chromium, driven by Playwright) answers a tool approval with an
edited input through the form, and sees the votes so far on a question that needs two people.
Skipped with the reason when Chromium or Playwright is missing (except in CI)."""

from __future__ import annotations

import asyncio

from interlude import Inbox, Worker

from . import approvals_app as A
from .browser import ANSWER_TAKEN, signed_in

ANA = "ana-token-0123456789abcdef"
TOKENS = {ANA: {"name": "ana", "groups": ["ops"]}}


def test_approve_an_edited_call_and_see_the_votes(store_url: str) -> None:
    from playwright.sync_api import expect

    A.RUNS.clear()
    A.pause("payments", "pay-1", store_url)
    deploy = A.pause("deploys", "deploy-1", store_url)
    Inbox(store_url).record("deploy-1", {deploy: True}, by="bo", groups=["ops"])
    assert _work(store_url) == 1  # bo's vote counted: 1 of 2
    with signed_in(store_url, A.app, ANA, TOKENS) as (page, url):
        page.goto(f"{url}/sessions/deploy-1")
        expect(page.locator(".votes")).to_have_text("1 of 2 approvals: bo")

        page.goto(f"{url}/sessions/pay-1")
        box = page.locator("textarea.approval-input")
        expect(box).to_have_value('{\n  "amount": 120,\n  "to": "acme"\n}')
        box.fill('{"amount": 95, "to": "acme"}')
        page.select_option("select[name=remember]", "run")
        page.fill("textarea[name=note]", "only 95 this month")
        page.click("button.approve")
        expect(page.locator(".notice").first).to_contain_text(ANSWER_TAKEN)
    (recorded,) = Inbox(store_url).session("pay-1").recorded
    assert recorded.by == "ana"
    assert recorded.answer == {
        "approve": True,
        "input": {"amount": 95, "to": "acme"},
        "remember": "run",
        "note": "only 95 this month",
    }
    assert _work(store_url) == 1
    assert A.RUNS == ["pay 95 to acme"]  # exactly the edited call, once


def _work(store_url: str) -> int:
    """One worker pass, in a thread of its own (Playwright's loop runs in this one)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        worker = Worker(A.app, store_url)
        return pool.submit(asyncio.run, worker.run_once()).result(timeout=60)
