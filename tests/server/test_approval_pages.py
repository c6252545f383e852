"""The HTML inbox for questions that say who may answer, and for built-in tool approvals: the
list hides what a person may not answer, the session page shows it read-only saying who may,
votes so far ("1 of 2 approvals: ana"), escalation, remembered decisions, and the approval
form (Approve / Decline, the input to edit, remember, a note) sends True or the object form."""

from __future__ import annotations

import asyncio
import html as htmllib
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from interlude import Inbox, Worker
from interlude.server import create_app

from . import approvals_app as A
from .test_pages import _form, login

ANA, BO, CY, DEE = (f"{n}-token-0123456789abcdef" for n in ("ana", "bo", "cy", "dee"))
TOKENS = {
    ANA: {"name": "ana", "groups": ["ops"]},
    BO: {"name": "bo", "groups": ["ops"]},
    CY: "cy",
    DEE: {"name": "dee", "groups": ["leads"]},
}


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    A.RUNS.clear()
    A.LATE[0] = 0.0
    yield
    A.RUNS.clear()
    A.LATE[0] = 0.0


def _client(store_url: str) -> TestClient:
    return TestClient(create_app(store_url, A.app, tokens=TOKENS))


def _work(store_url: str) -> int:
    return asyncio.run(Worker(A.app, store_url).run_once())


def test_what_a_person_may_not_answer_is_hidden_or_read_only(store_url: str) -> None:
    A.pause("deploys", "deploy-1", store_url)
    A.pause("payments", "pay-1", store_url)
    with _client(store_url) as client:
        login(client, CY)
        listing = client.get("/").text
        assert "pay-1" in listing and "deploy-1" not in listing
        page = client.get("/sessions/deploy-1").text
        assert "You may not answer this question: only members of ops" in page
        assert 'name="interrupt_id"' not in page  # no form
    with _client(store_url) as client:
        login(client, ANA)
        listing = client.get("/").text
        assert "deploy-1" in listing and "needs 2 approvals" in listing
        assert 'name="interrupt_id"' in client.get("/sessions/deploy-1").text


def test_votes_and_escalation_on_the_session_page(store_url: str) -> None:
    A.LATE[0] = 7200  # raised two hours ago: escalated to the leads
    iid = A.pause("deploys", "deploy-2", store_url)
    Inbox(store_url).record("deploy-2", {iid: True}, by="ana", groups=["ops"])
    assert _work(store_url) == 1
    with _client(store_url) as client:
        login(client, DEE)
        page = client.get("/sessions/deploy-2").text
        assert "1 of 2 approvals: ana" in page
        assert "(escalated)" in page and "members of ops, leads" in page
        data = {**_form(page, iid), "answer": "true"}
        r = client.post("/sessions/deploy-2/answer", data=data, follow_redirects=False)
        assert r.status_code == 303, r.text
    assert _work(store_url) == 1
    assert A.RUNS == ["deploy prod"]


def test_a_refused_vote_re_renders_with_the_reason(store_url: str) -> None:
    iid = A.pause("deploys", "deploy-3", store_url)
    with _client(store_url) as client:
        login(client, ANA)
        form = _form(client.get("/sessions/deploy-3").text, iid)
        Inbox(store_url).record("deploy-3", {iid: True}, by="bo", groups=["ops"])
        r = client.post("/sessions/deploy-3/answer", data={**form, "answer": "true"})
        assert r.status_code == 409
        assert "vote" in r.text and "try again" in r.text


def test_the_approval_form_offers_edit_remember_and_note(store_url: str) -> None:
    iid = A.pause("payments", "pay-2", store_url)
    with _client(store_url) as client:
        login(client, CY)
        page = client.get("/sessions/pay-2").text
        text = htmllib.unescape(page)
        assert 'name="input"' in page and '"amount": 120' in text  # pre-filled with the call
        assert 'name="remember"' in page and "for the session" in page
        assert 'name="note"' in page
        assert 'value="true"' in page and 'value="false"' in page
        data = {
            **_form(page, iid),
            "answer": "true",
            "input": '{"amount": 100, "to": "acme"}',
            "remember": "session",
            "note": "capped at 100",
        }
        r = client.post("/sessions/pay-2/answer", data=data, follow_redirects=False)
        assert r.status_code == 303, r.text
        (recorded,) = Inbox(store_url).session("pay-2").recorded
        assert recorded.answer == {
            "approve": True,
            "input": {"amount": 100, "to": "acme"},
            "remember": "session",
            "note": "capped at 100",
        }
        assert _work(store_url) == 1
        assert A.RUNS == ["pay 100 to acme"]
        page = client.get("/sessions/pay-2").text
        assert "Remembered decisions" in page
        assert "pay: approved for the session (note: capped at 100)" in page


def test_a_plain_approve_or_decline_sends_true_or_false(store_url: str) -> None:
    approve = A.pause("payments", "pay-3", store_url)
    decline = A.pause("payments", "pay-4", store_url)
    with _client(store_url) as client:
        login(client, CY)
        for session, iid, pressed in (("pay-3", approve, "true"), ("pay-4", decline, "false")):
            page = client.get(f"/sessions/{session}").text
            untouched = htmllib.unescape(page.split('name="input"')[1].split(">", 1)[1])
            untouched = untouched.split("</textarea>")[0]
            data = {**_form(page, iid), "answer": pressed, "input": untouched, "remember": ""}
            r = client.post(f"/sessions/{session}/answer", data=data, follow_redirects=False)
            assert r.status_code == 303, r.text
    inbox = Inbox(store_url)
    assert inbox.session("pay-3").recorded[0].answer is True
    assert inbox.session("pay-4").recorded[0].answer is False


def test_a_bad_edit_re_renders_422(store_url: str) -> None:
    iid = A.pause("payments", "pay-5", store_url)
    with _client(store_url) as client:
        login(client, CY)
        form = _form(client.get("/sessions/pay-5").text, iid)
        bad = {**form, "answer": "true", "input": '{"amount": "lots", "to": "acme"}'}
        r = client.post("/sessions/pay-5/answer", data=bad)
        assert r.status_code == 422 and "amount" in r.text
        r = client.post("/sessions/pay-5/answer", data={**form, "answer": "true", "input": "{"})
        assert r.status_code == 422
    assert Inbox(store_url).session("pay-5").recorded == []
