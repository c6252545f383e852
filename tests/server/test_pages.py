"""The HTML inbox through the test client: sign in, CSRF, the forms made from answer schemas."""

from __future__ import annotations

import asyncio
import re

from starlette.testclient import TestClient

from interlude import Inbox, Worker

from . import inbox_app
from .conftest import ANA


def _csrf(html: str, action: str = "") -> str:
    """The CSRF token of the first form posting to ``action`` (any form when empty)."""
    at = html.index(f'action="{action}') if action else 0
    match = re.search(r'name="csrf" value="([^"]+)"', html[at:])
    assert match, html
    return match.group(1)


def _form(html: str, iid: str) -> dict[str, str]:
    """The hidden fields of the answer form of question ``iid`` on a session page."""
    at = html.index(f'name="interrupt_id" value="{iid}"')
    shown = re.search(r'name="shown" value="([^"]+)"', html[at:])
    assert shown, html
    return {"csrf": _csrf(html, "/sessions/"), "interrupt_id": iid, "shown": shown.group(1)}


def login(client: TestClient, token: str = ANA) -> None:
    page = client.get("/login")
    r = client.post(
        "/login", data={"token": token, "csrf": _csrf(page.text)}, follow_redirects=False
    )
    assert r.status_code == 303, r.text
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and token not in cookie


def test_pages_need_a_sign_in(client: TestClient, store_url: str) -> None:
    inbox_app.pause("ops", "s1", store_url)
    for path in ("/", "/sessions/s1"):
        r = client.get(path, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/login"
    assert client.get("/fragments/pending").status_code == 401
    page = client.get("/login")
    wrong = client.post("/login", data={"token": "z" * 24, "csrf": _csrf(page.text)})
    assert wrong.status_code == 401 and "not known" in wrong.text
    forged = client.post("/login", data={"token": ANA, "csrf": "forged"})
    assert forged.status_code == 403
    assert client.get("/", follow_redirects=False).status_code == 303


def test_a_forged_cookie_is_refused(client: TestClient, store_url: str) -> None:
    inbox_app.pause("ops", "s1", store_url)
    login(client)
    cookie = client.cookies["interlude_session"]
    who, fp, issued, nonce, mac = cookie.split(".")
    for forged in (
        f"Ym8.{fp}.{issued}.{nonce}.{mac}",
        f"{who}.{fp}.{int(issued) + 1}.{nonce}.{mac}",
        f"{who}.{fp}.{issued}.x{nonce}.{mac}",
        f"{who}.{fp}.{issued}.{mac}",
        "x.y",
    ):
        client.cookies.clear()
        client.cookies.set("interlude_session", forged)  # "bo" with ana's MAC, a later time
        assert client.get("/", follow_redirects=False).status_code == 303
    client.cookies.clear()
    client.cookies.set("interlude_session", cookie)
    assert client.get("/", follow_redirects=False).status_code == 200


def test_the_list_shows_what_waits(client: TestClient, store_url: str) -> None:
    inbox_app.pause("ops", "s1", store_url)
    inbox_app.pause("refunds", "s2", store_url)
    login(client)
    page = client.get("/")
    assert page.status_code == 200
    assert "signed in as <strong>ana</strong>" in page.text
    for text in ("s1", "s2", "deploy", "refund", "approve", "1.2.3", "EventSource"):
        assert text in page.text
    assert "script-src 'nonce-" in page.headers["content-security-policy"]
    assert page.text.count('class="deadline"') == 1  # the refund's, in an hour


def test_a_forged_answer_form_is_refused(client: TestClient, store_url: str) -> None:
    iid = inbox_app.pause("ops", "s1", store_url)
    login(client)
    page = client.get("/sessions/s1")
    digest = re.search(r'name="shown" value="([^"]+)"', page.text).group(1)  # type: ignore[union-attr]
    form = {"interrupt_id": iid, "shown": digest, "answer": "true"}
    assert client.post("/sessions/s1/answer", data=form).status_code == 403
    wrong = {**form, "csrf": _csrf(client.get("/sessions/s1").text, "/sessions/")[:-2] + "xx"}
    assert client.post("/sessions/s1/answer", data=wrong).status_code == 403
    other = re.search(r'name="csrf" value="([^"]+)"', client.get("/").text).group(1)  # type: ignore[union-attr]
    assert client.post("/sessions/s1/answer", data={**form, "csrf": other}).status_code == 403
    client.cookies.clear()
    assert client.post("/sessions/s1/answer", data=form).status_code == 401
    assert Inbox(store_url).session("s1").recorded == []


def test_approve_button_records_as_the_signed_in_approver(
    client: TestClient, store_url: str
) -> None:
    iid = inbox_app.pause("ops", "s1", store_url)
    login(client)
    page = client.get("/sessions/s1")
    assert "Approve" in page.text and "Decline" in page.text
    assert "&#34;service&#34;: &#34;web&#34;" in page.text  # the input, pretty and escaped
    form = {
        "csrf": _csrf(page.text, "/sessions/"),
        "interrupt_id": iid,
        "shown": re.search(r'name="shown" value="([^"]+)"', page.text).group(1),  # type: ignore[union-attr]
        "answer": "true",
    }
    r = client.post("/sessions/s1/answer", data=form, follow_redirects=False)
    assert r.status_code == 303, r.text
    after = client.get(r.headers["location"])
    assert "Your answer is recorded" in after.text and "Answered by ana" in after.text
    (recorded,) = Inbox(store_url).session("s1").recorded
    assert (recorded.answer, recorded.by) == (True, "ana")
    assert client.post("/sessions/s1/answer", data=form).status_code == 409
    asyncio.run(Worker(inbox_app.app, store_url).run_once())
    assert inbox_app.RUNS == ["deploy web 1.2.3"]
    assert "ana answered approve: true" in client.get("/sessions/s1").text


def test_object_schema_gives_fields_and_a_bad_one_re_renders_422(
    client: TestClient, store_url: str
) -> None:
    iid = inbox_app.pause("refunds", "s2", store_url)
    login(client)
    page = client.get("/sessions/s2")
    for name in ('name="f.approve"', 'name="f.cap"', 'name="f.note"', "the most that may be"):
        assert name in page.text
    base = _form(page.text, iid)
    bad = client.post("/sessions/s2/answer", data={**base, "f.approve": "true", "f.cap": "-5"})
    assert bad.status_code == 422 and 'id="error"' in bad.text and "cap" in bad.text
    nan = client.post("/sessions/s2/answer", data={**base, "f.approve": "true", "f.cap": "lots"})
    assert nan.status_code == 422 and "not a whole number" in nan.text
    ok = client.post(
        "/sessions/s2/answer", data={**base, "f.approve": "true", "f.cap": "800", "f.note": "ok"}
    )
    assert ok.status_code == 200  # followed the redirect
    (recorded,) = Inbox(store_url).session("s2").recorded
    assert recorded.answer == {"approve": True, "cap": 800, "note": "ok"}


def test_unchecked_box_is_false(client: TestClient, store_url: str) -> None:
    iid = inbox_app.pause("refunds", "s2", store_url)
    login(client)
    base = _form(client.get("/sessions/s2").text, iid)
    assert client.post("/sessions/s2/answer", data={**base, "f.cap": "0"}).status_code == 200
    asyncio.run(Worker(inbox_app.app, store_url).run_once())
    assert inbox_app.RUNS == []  # declined: the tool did not run
    assert Inbox(store_url).session("s2").audit[0].answer == {"approve": False, "cap": 0}


def test_literal_schema_gives_a_button_per_choice(client: TestClient, store_url: str) -> None:
    iid = inbox_app.pause("triage", "s3", store_url)
    login(client)
    page = client.get("/sessions/s3")
    for choice in ("billing", "tech", "drop"):
        assert f'value="&#34;{choice}&#34;"' in page.text
    base = _form(page.text, iid)
    assert client.post("/sessions/s3/answer", data={**base, "answer": '"nope"'}).status_code == 422
    assert client.post("/sessions/s3/answer", data={**base, "answer": '"tech"'}).status_code == 200
    asyncio.run(Worker(inbox_app.app, store_url).run_once())
    assert inbox_app.RUNS == ["route T-9"]


def test_free_json_answer_for_a_question_without_schema(client: TestClient, store_url: str) -> None:
    iid = inbox_app.pause("ops", "s1", store_url)
    login(client)
    base = _form(client.get("/sessions/s1").text, iid)
    bad = client.post("/sessions/s1/answer", data={**base, "answer": "__json__", "json": "{x"})
    assert bad.status_code == 422 and "is not JSON" in bad.text
    good = {**base, "answer": "__json__", "json": '{"why": "not today"}'}
    assert client.post("/sessions/s1/answer", data=good).status_code == 200
    assert Inbox(store_url).session("s1").recorded[0].answer == {"why": "not today"}


def test_sign_out_needs_its_csrf_token(client: TestClient, store_url: str) -> None:
    login(client)
    assert client.post("/logout", data={"csrf": "nope"}).status_code == 403
    home = client.get("/")
    r = client.post("/logout", data={"csrf": _csrf(home.text)}, follow_redirects=False)
    assert r.status_code == 303
    assert client.get("/", follow_redirects=False).status_code == 303
