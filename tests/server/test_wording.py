"""The inbox words a question for a person: titled by its question, a text reason as a
sentence, and a required choice never chosen for them."""

from __future__ import annotations

import html
from typing import Literal

from pydantic import BaseModel
from starlette.testclient import TestClient

from interlude import Agent
from interlude.hooks import BeforeInvocationEvent
from interlude.testing import ScriptedModel

from .test_pages import login


class Verdict(BaseModel):
    decision: Literal["approve", "reject"]
    note: str = ""


def _ask(store_url: str, session_id: str, reason: object, response_type: object) -> None:
    agent = Agent(ScriptedModel(["ok"]), session=store_url, session_id=session_id)
    agent.hooks.add_callback(
        BeforeInvocationEvent,
        lambda e: e.interrupt("approve_refund", reason, response_type=response_type),
    )
    assert agent("go").stop_reason == "interrupt"


def test_a_question_is_titled_by_what_it_asks(client: TestClient, store_url: str) -> None:
    reason = {"question": "Refund 1999 cents on order 42?", "order": "42"}
    _ask(store_url, "s1", reason, Verdict)
    _ask(store_url, "s2", "The report is late; send it anyway?", bool)
    login(client)
    listed = client.get("/").text
    assert "Refund 1999 cents on order 42?" in listed and "send it anyway?" in listed
    page = html.unescape(client.get("/sessions/s1").text)
    assert "<h4>Refund 1999 cents on order 42?</h4>" in page
    assert "Details:" in page and '"order": "42"' in page  # the rest, as details
    assert '"question": "Refund' not in page
    assert '<option value="" disabled selected>choose...</option>' in page
    assert 'value="approve" selected' not in page and " required>" in page
    text = client.get("/sessions/s2").text
    assert "<h4>The report is late; send it anyway?</h4>" in text and "Details:" not in text


def test_a_stale_page_s_answer_says_who_answered_first(client: TestClient, store_url: str) -> None:
    """Two approvers have the page open; the second's answer (recorded, or already applied by
    the worker) is refused with the first approver's name."""
    import asyncio

    from interlude import Inbox, Worker

    from . import inbox_app
    from .conftest import BO, bearer

    iid = inbox_app.pause("ops", "s3", store_url)
    Inbox(store_url).record("s3", {iid: True}, by="ana")
    h = {**bearer(BO), "Content-Type": "application/json"}
    late = client.post("/api/sessions/s3/answers", json={"answers": {iid: False}}, headers=h)
    assert late.status_code == 409 and "by ana" in late.json()["error"], late.text
    asyncio.run(Worker(inbox_app.app, store_url).run_once())  # applied: the question is gone
    later = client.post("/api/sessions/s3/answers", json={"answers": {iid: False}}, headers=h)
    assert later.status_code == 409 and "by ana" in later.json()["error"], later.text
