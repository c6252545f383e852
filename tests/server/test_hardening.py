"""The inbox against hostile or odd input: text that is not Unicode or hides itself, deep JSON,
big bodies, forms without ``shown``, unusable approver names, cookies, stream limits."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from interlude import Inbox
from interlude.errors import ConfigurationError
from interlude.server import create_app, load_tokens

from . import inbox_app
from .conftest import ANA, bearer
from .test_pages import _form, login

ROOT = Path(__file__).resolve().parents[2]


def test_text_that_is_not_unicode_or_hides_itself_is_shown_safely(
    client: TestClient, store_url: str
) -> None:
    inbox_app.pause("ops", "s1", store_url)
    inbox_app.pause("odd", "s2", store_url)  # a lone surrogate and U+202E in the tool input
    listed = client.get("/api/pending", headers=bearer())
    assert listed.status_code == 200
    assert b"\\ud800" in listed.content and b"\\u202e" in listed.content  # escaped JSON
    odd = next(p for p in listed.json()["pending"] if p["session"] == "s2")
    assert odd["input"] == inbox_app.ODD
    assert client.get("/api/sessions/s2", headers=bearer()).status_code == 200
    login(client)
    for path in ("/", "/fragments/pending", "/sessions/s1", "/sessions/s2"):
        page = client.get(path)
        assert page.status_code == 200, path
        assert "\u202e" not in page.text, path  # what the approver reads is what runs
        if path != "/sessions/s1":
            assert "\\u202e" in page.text and "x\ufffdy" in page.text, path


def test_an_answer_holding_a_lone_surrogate_is_refused(client: TestClient, store_url: str) -> None:
    iid = inbox_app.pause("ops", "s1", store_url)
    body = b'{"answers": {"' + iid.encode() + b'": "\\ud800 lone"}}'
    r = client.post("/api/sessions/s1/answers", content=body, headers=bearer())
    assert r.status_code == 400 and "surrogate" in r.json()["error"]
    login(client)
    form = {**_form(client.get("/sessions/s1").text, iid), "answer": "__json__"}
    r = client.post("/sessions/s1/answer", data={**form, "json": '"\\udfff"'})
    assert r.status_code == 422 and "surrogate" in r.text
    assert Inbox(store_url).session("s1").recorded == []


@pytest.mark.parametrize("depth", [100_000, 980, 65])
def test_deeply_nested_json_is_refused(client: TestClient, store_url: str, depth: int) -> None:
    iid = inbox_app.pause("ops", "s1", store_url)
    deep = "[" * depth + "]" * depth
    body = f'{{"answers": {{"{iid}": {deep}}}}}'.encode()
    r = client.post("/api/sessions/s1/answers", content=body, headers=bearer())
    assert r.status_code == 400 and "nested" in r.json()["error"]
    login(client)
    form = {**_form(client.get("/sessions/s1").text, iid), "answer": "__json__", "json": deep}
    r = client.post("/sessions/s1/answer", data=form)
    assert r.status_code == 422 and "nested" in r.text
    assert Inbox(store_url).session("s1").recorded == []
    shallow = "[" * 10 + "]" * 10  # an ordinary nesting is still fine
    ok = client.post("/api/sessions/s1/answers", json={"answers": {iid: json.loads(shallow)}},
                     headers=bearer())  # fmt: skip
    assert ok.status_code == 202


def test_a_body_over_one_mib_is_refused_with_413(client: TestClient, store_url: str) -> None:
    iid = inbox_app.pause("ops", "s1", store_url)
    big = json.dumps({"answers": {iid: "a" * (1 << 20)}}).encode()
    r = client.post("/api/sessions/s1/answers", content=big, headers=bearer())
    assert r.status_code == 413 and "larger than" in r.json()["error"]

    def chunks() -> object:  # no Content-Length: counted as it arrives
        yield b'{"answers": {"x": "'
        for _ in range(3):
            yield b"a" * (1 << 19)
        yield b'"}}'

    r = client.post("/api/sessions/s1/answers", content=chunks(), headers=bearer())  # type: ignore[arg-type]
    assert r.status_code == 413
    login(client)
    r = client.post("/sessions/s1/answer", data={"json": "a" * (1 << 20)})
    assert r.status_code == 413
    assert Inbox(store_url).session("s1").recorded == []


def test_an_answer_form_without_shown_is_refused(client: TestClient, store_url: str) -> None:
    iid = inbox_app.pause("ops", "s1", store_url)
    login(client)
    form = _form(client.get("/sessions/s1").text, iid)
    del form["shown"]
    r = client.post("/sessions/s1/answer", data={**form, "answer": "true"})
    assert r.status_code == 422 and "no &#39;shown&#39;" in r.text
    assert Inbox(store_url).session("s1").recorded == []


def test_form_errors_quote_at_most_40_characters(client: TestClient, store_url: str) -> None:
    iid = inbox_app.pause("refunds", "s2", store_url)
    login(client)
    form = _form(client.get("/sessions/s2").text, iid)
    for field in ("f.cap", "interrupt_id"):
        r = client.post("/sessions/s2/answer", data={**form, field: "9z" * 500})
        assert r.status_code in (409, 422)
        error = re.search(r'id="error">([^<]*)', r.text)
        assert error and "9z" * 20 in error.group(1) and "9z" * 21 not in error.group(1)


def test_two_sign_ins_get_different_cookies_and_sign_out_clears_it_strictly(
    client: TestClient, store_url: str
) -> None:
    login(client)
    first = client.cookies["interlude_session"]
    client.cookies.clear()
    login(client)
    second = client.cookies["interlude_session"]
    assert first != second  # within the same second: a nonce tells them apart
    csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/").text)
    assert csrf
    r = client.post("/logout", data={"csrf": csrf.group(1)}, follow_redirects=False)
    assert r.status_code == 303
    cleared = r.headers["set-cookie"]
    assert "interlude_session=" in cleared and "Max-Age=0" in cleared
    assert "HttpOnly" in cleared and "SameSite=strict" in cleared
    docs = (ROOT / "docs" / "inbox.md").read_text(encoding="utf-8")
    assert "ends it on the server" in docs  # a copy is refused: test_sign_out.py


@pytest.mark.parametrize("name", ["expiry", "a" * 201, "bad\x07name", "tab\there"])
def test_approver_names_that_could_never_answer_are_refused(
    name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError, match="approver name"):
        create_app(f"sqlite:///{tmp_path}/unused.db", tokens={"t" * 20: name})
    monkeypatch.setenv("INTERLUDE_TOKENS", f"{'t' * 20}={name}")
    with pytest.raises(ConfigurationError, match="approver name"):
        load_tokens(None)


def test_api_and_pages_never_send_lone_surrogates_in_errors(
    client: TestClient, store_url: str
) -> None:
    r = client.get("/api/sessions/%ED%A0%80", headers=bearer())  # not UTF-8 in the path
    assert r.status_code < 500
    r = client.get("/api/pending?agent=%ED%A0%80", headers=bearer())
    assert r.status_code == 200
    assert client.post("/api/sessions/s1/answers", content=b"\xed\xa0\x80", headers=bearer()
                       ).status_code == 400  # fmt: skip
    assert ANA  # the fixture's token signs in
