"""What the inbox pages say, read as a person reads them: the list's "what was shown" in words,
an approval without details that repeat it, a banner that goes once the run has moved on, an
icon, and a session's history (an answered question keeps its text and time, a tool's JSON
list result is summed up, and "Fork here" only where a fork can stand, explained)."""

from __future__ import annotations

import asyncio
import html
import re

from starlette.testclient import TestClient

from interlude import Worker
from interlude.server import create_app

from . import approvals_app, history_app, inbox_app
from .conftest import TOKENS
from .test_pages import _form, login


def _text(fragment: str) -> str:
    """What a person reads in an HTML fragment: its text, tags gone, spaces collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def _cells(page: str, row_with: str) -> list[str]:
    """The text of each cell of the list's row that holds ``row_with``."""
    for row in re.findall(r"<tr>(.*?)</tr>", page, re.S):
        if row_with in row:
            return [_text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
    raise AssertionError(f"no row with {row_with!r}")


def _history(page: str) -> dict[str, str]:
    """The session page's history rows, by checkpoint id: each row's HTML."""
    rows = re.findall(r'<tr class="checkpoint"[^>]*>(.*?)</tr>', page, re.S)
    return {re.search(r"<code>(.*?)</code>", r).group(1): r for r in rows}  # type: ignore[union-attr]


def test_the_list_says_what_was_shown_in_words(client: TestClient, store_url: str) -> None:
    inbox_app.pause("ops", "s1", store_url)
    inbox_app.pause("refunds", "s2", store_url)
    login(client)
    page = client.get("/").text
    _, _, question, shown, *_ = _cells(page, "/sessions/s1")
    assert question == "May the agent run deploy?"
    assert shown == "deploy service: web, version: 1.2.3"  # no JSON, the question not again
    # The refund's reason ({"order": "A-1"}) repeats the input: said once.
    assert _cells(page, "/sessions/s2")[3] == "refund order: A-1, amount: 500"


def test_a_built_in_approval_shows_no_details_that_repeat_it(store_url: str) -> None:
    approvals_app.pause("payments", "pay-1", store_url)
    with TestClient(create_app(store_url, approvals_app.app, tokens=TOKENS)) as client:
        login(client)
        page = html.unescape(client.get("/sessions/pay-1").text)
        listed = client.get("/").text
    assert "<h4>May the agent run pay with this input?</h4>" in page
    assert "Details:" not in page and '"tool": "pay"' not in page
    assert _cells(listed, "/sessions/pay-1")[3] == "pay amount: 120, to: acme"


def test_details_that_say_more_are_kept(client: TestClient, store_url: str) -> None:
    """A reason's fields other than the question, and not in the input, are still shown."""
    from .test_wording import Verdict, _ask

    _ask(store_url, "s1", {"question": "Refund order 42?", "order": "42", "by": "cy"}, Verdict)
    login(client)
    page = html.unescape(client.get("/sessions/s1").text)
    assert "Details:" in page and '"order": "42"' in page and '"by": "cy"' in page
    assert _cells(client.get("/").text, "/sessions/s1")[3] == "order: 42, by: cy"


def test_the_answer_banner_goes_once_the_run_has_ended(client: TestClient, store_url: str) -> None:
    iid = inbox_app.pause("ops", "s1", store_url)
    login(client)
    form = {**_form(client.get("/sessions/s1").text, iid), "answer": "true"}
    r = client.post("/sessions/s1/answer", data=form, follow_redirects=False)
    assert r.status_code == 303
    assert "Your answer is recorded" in client.get(r.headers["location"]).text
    asyncio.run(Worker(inbox_app.app, store_url).run_once())  # the run goes on and ends
    after = client.get(r.headers["location"]).text  # the same address, reloaded
    assert "Your answer is recorded" not in after
    assert "ana answered approve: true" in after


def test_the_inbox_has_an_icon(client: TestClient) -> None:
    icon = client.get("/favicon.ico")  # asked for by every browser, signed in or not
    assert icon.status_code == 200
    assert icon.headers["content-type"] == "image/x-icon"
    assert icon.content[:4] == b"\x00\x00\x01\x00"  # an ICO file
    assert "max-age" in icon.headers["cache-control"]
    assert '<link rel="icon" href="/favicon.ico">' in client.get("/login").text


def _finished_session_page(store_url: str) -> str:
    history_app.run_through("h1", store_url)
    with TestClient(create_app(store_url, history_app.app, tokens=TOKENS)) as client:
        login(client)
        return client.get("/sessions/h1").text


def test_an_answered_question_keeps_its_text_and_a_time(store_url: str) -> None:
    rows = _history(_finished_session_page(store_url))
    approval = next(r for key, r in rows.items() if key.startswith("v1:before_tool_call:"))
    go_ahead = next(r for key, r in rows.items() if key.startswith("v1:before_invocation:"))
    for row in (approval, go_ahead):
        when = re.search(r'<td class="muted">(.*?)</td>', row).group(1)  # type: ignore[union-attr]
        assert re.fullmatch(r"answered \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", when), row
    assert "approval: find(query: open tickets)" in _text(approval)
    assert "go_ahead" in _text(go_ahead)


def test_a_tool_s_json_list_result_is_summed_up(store_url: str) -> None:
    rows = _history(_finished_session_page(store_url))
    summary = _text(rows["m2"]).split(" Fork here")[0]
    assert summary.startswith("m2 tool result success: 2 items: (id: 7, title: disk full on")
    assert len(summary) < 100  # a short line, cut with an ellipsis


def test_fork_here_only_at_questions_the_inbox_answers_and_explained(store_url: str) -> None:
    page = _finished_session_page(store_url)
    rows = _history(page)
    forkable = {key for key, row in rows.items() if 'name="at"' in row}
    tool_question = next(k for k in rows if k.startswith("v1:before_tool_call:"))
    # The approval, asked again in the fork. Not the messages (nothing in the inbox carries
    # such a fork on), the question about no call (it cannot be asked again without the
    # model), nor the answers.
    assert forkable == {tool_question}
    fork = rows[tool_question][rows[tool_question].index("<details") :]
    assert "Fork here" in fork and 'title="A new session where this question is asked again' in fork
    assert "This session does not change" in _text(fork)  # said before the button that forks
    assert "Fork here starts a new session at a question" in page
    # A question open now: the new session waits on it too.
    history_app.app.start("lister", "h2", store_url)("What is open?")
    with TestClient(create_app(store_url, history_app.app, tokens=TOKENS)) as client:
        login(client)
        (open_now,) = (
            r for k, r in _history(client.get("/sessions/h2").text).items() if "v1:" in k
        )
    assert "A new session waiting on this same question" in open_now
