"""One-time answer links over plain HTTP (Starlette's test client, and a real uvicorn with the
asking agent, the answering server and the worker in three processes): opening a link shows
the question and answers nothing; submitting answers once, through the inbox's answer rules,
and a worker runs the tool once. Every refusal (reused, expired, forged or changed, made for
another question or another person, from another site) changes nothing.

The agents here are what the other link tests (browser, mail) use too: ``payments`` asks for a
built-in tool approval, ``deploys`` needs two of ``ops`` to approve, ``refunds`` asks a typed
question (a cap in euros)."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the link tests need the [server] extra")

from starlette.applications import Starlette
from starlette.testclient import TestClient

from interlude import Agent, AgentSession, App, Inbox, ToolResult, ToolUse, Worker, tool
from interlude.errors import ResumeInputError, UnknownInterruptError
from interlude.hooks import BeforeToolCallEvent
from interlude.operate import AnswerLinks, Person
from interlude.server import create_app
from interlude.server._doors import DEFAULT_DOORS
from interlude.server._links import links_door
from interlude.testing import FunctionModel, ModelRequest
from tests.support.processes import ROOT

SECRET = "the-link-secret-of-these-tests-0123456789"
ANA = Person("ana", ("ops",))
BO = Person("bo", ("ops",))
CY = Person("cy", ("ops",))
DEE = Person("dee")  # in no group
TOKENS: dict[str, Any] = {
    "ana-token-0123456789abcdef": {"name": "ana", "groups": ["ops"]},
    "bo-token-0123456789abcdef": {"name": "bo", "groups": ["ops"]},
}
"""The inbox's own sign-in tokens (the links need none)."""

RUNS: list[str] = []


@tool
def deploy(env: str) -> str:
    """Deploy the service.

    Args:
        env: Where to.
    """
    RUNS.append(f"deploy {env}")
    return f"deployed to {env}"


@tool(needs_approval=True)
def pay(amount: int, to: str) -> str:
    """Pay someone.

    Args:
        amount: In euros.
        to: Who is paid.
    """
    RUNS.append(f"pay {amount} to {to}")
    return f"paid {amount} to {to}"


@tool
def refund(order: str) -> str:
    """Refund an order.

    Args:
        order: The order.
    """
    RUNS.append(f"refund {order}")
    return f"refunded {order}"


@dataclass
class Cap:
    cap: int


CALLS: dict[str, dict[str, Any]] = {
    "deploy": {"env": "prod"},
    "pay": {"amount": 120, "to": "acme"},
    "refund": {"order": "o-7"},
}


def _model(tool_name: str) -> FunctionModel:
    def reply(request: ModelRequest) -> str | list[ToolUse]:
        results = [b for b in request.messages[-1].content if isinstance(b, ToolResult)]
        if not results:
            return [ToolUse(f"call_{tool_name}", tool_name, CALLS[tool_name])]
        return f"finished: {results[0].status}: {results[0].text}"

    return FunctionModel(reply)


def two_of_ops(event: BeforeToolCallEvent) -> None:
    answer = event.interrupt(
        "deploy", {"question": "Deploy to production?"}, approvers=["ops"], quorum=2
    )
    if answer is not True:
        event.cancel("not approved")


def capped(event: BeforeToolCallEvent) -> None:
    if event.tool_use.name == "refund":
        cap = event.interrupt("cap", {"question": "Refund up to how much?"}, response_type=Cap)
        RUNS.append(f"capped at {cap.cap}")


def build_deploys(session: AgentSession) -> Agent:
    agent = Agent(_model("deploy"), tools=[deploy], session=session.store, session_id=session.id)
    agent.hooks.add_callback(BeforeToolCallEvent, two_of_ops)
    return agent


def build_payments(session: AgentSession) -> Agent:
    return Agent(_model("pay"), tools=[pay], session=session.store, session_id=session.id)


def build_refunds(session: AgentSession) -> Agent:
    agent = Agent(_model("refund"), tools=[refund], session=session.store, session_id=session.id)
    agent.hooks.add_callback(BeforeToolCallEvent, capped)
    return agent


def agents(app: App) -> App:
    """``app`` with the three agents registered."""
    app.agent("deploys")(build_deploys)
    app.agent("payments")(build_payments)
    app.agent("refunds")(build_refunds)
    return app


app = agents(App())


def pause(name: str, session_id: str, store: str, on: App = app) -> str:
    """Start ``session_id`` on agent ``name`` and run it to its question; the question's id."""
    result = on.start(name, session_id, store)(f"please {name}")
    assert result.stop_reason == "interrupt", result.stop_reason
    (question,) = result.interrupts
    return question.id


def link(
    store: str,
    session_id: str,
    question_id: str,
    person: Person,
    *,
    choice: bool | None = None,
    clock: Callable[[], float] | None = None,
    expires_in: float = 3600,
) -> str:
    """A link's path, made as an app or a worker makes it."""
    with Inbox(store, link_secret=SECRET, clock=clock) as inbox:
        return inbox.answer_link(
            session_id, question_id, person=person, expires_in=expires_in, choice=choice
        )


def inbox_app(store: str, on: App = app) -> Starlette:
    """The inbox with the links door, as ``interlude serve`` serves it."""
    return create_app(store, on, tokens=TOKENS, doors=[*DEFAULT_DOORS, links_door(SECRET)])


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page
    return found.group(1)


def submit(http: TestClient, path: str, **fields: str) -> tuple[int, str]:
    """Open the link and submit its form (with ``fields``): the answer's status and page."""
    page = http.get(path)
    assert page.status_code == 200, page.text
    r = http.post(path, data={"csrf": csrf_of(page.text), **fields})
    return r.status_code, r.text


def recorded(store: str, session_id: str) -> list[tuple[str, object]]:
    return [(r.by, r.answer) for r in Inbox(store).session(session_id).recorded]


def unchanged(store: str, session_id: str, question_id: str) -> None:
    """Nothing was recorded, and the question still waits."""
    view = Inbox(store).session(session_id)
    assert view.recorded == []
    assert [q.id for q in view.interrupts] == [question_id]


def work(store: str, on: App = app) -> int:
    return asyncio.run(Worker(on, store).run_once())


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    RUNS.clear()
    yield
    RUNS.clear()


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'links.db'}"


@pytest.fixture
def http(store: str) -> Iterator[TestClient]:
    with TestClient(inbox_app(store)) as client:
        yield client


def test_an_approve_link_shows_the_call_then_answers_once(store: str, http: TestClient) -> None:
    iid = pause("payments", "pay-1", store)
    path = link(store, "pay-1", iid, ANA, choice=True)
    assert path.startswith("/links/") and len(path) < 400

    page = http.get(path)
    assert page.status_code == 200
    assert "Confirm your answer" in page.text and ">Approve</button>" in page.text
    assert "pay" in page.text and "&#34;amount&#34;: 120" in page.text
    assert "This link answers as <strong>ana</strong> (ops), once" in page.text
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["referrer-policy"] == "no-referrer"
    assert http.head(path).status_code == 200
    unchanged(store, "pay-1", iid)  # opening it (twice) answered nothing

    r = http.post(path, data={"csrf": csrf_of(page.text)})
    assert r.status_code == 200 and "Answer recorded" in r.text, r.text
    (answer,) = Inbox(store).session("pay-1").recorded
    assert (answer.by, answer.answer) == ("ana", True)
    question = Inbox(store).session("pay-1").interrupts[0]
    assert answer.shown == question.digest  # what the page showed is what was answered

    again = http.post(path, data={"csrf": csrf_of(page.text)})
    assert again.status_code == 409 and "has answered this question already" in again.text
    assert work(store) == 1
    assert RUNS == ["pay 120 to acme"]

    gone = http.get(path)
    assert gone.status_code == 409 and "no longer waits" in gone.text
    assert "answered by ana" in gone.text
    assert http.post(path, data={"csrf": csrf_of(page.text)}).status_code == 409
    assert work(store) == 0
    assert RUNS == ["pay 120 to acme"]  # once

    # the same call asked again in a later run: a question of its own, which the link of the
    # earlier one does not answer; a new link does
    rerun = app.open("pay-1", store)("pay again")
    (second,) = rerun.interrupts
    assert second.id != iid
    assert http.get(path).status_code == 409
    assert http.post(path, data={"csrf": csrf_of(page.text)}).status_code == 409
    assert Inbox(store).session("pay-1").recorded == []
    assert submit(http, link(store, "pay-1", second.id, ANA, choice=True))[0] == 200
    assert work(store) == 1
    assert RUNS == ["pay 120 to acme", "pay 120 to acme"]


def test_a_decline_link_declines(store: str, http: TestClient) -> None:
    iid = pause("payments", "pay-2", store)
    status, text = submit(http, link(store, "pay-2", iid, ANA, choice=False))
    assert status == 200, text
    assert recorded(store, "pay-2") == [("ana", False)]
    assert work(store) == 1
    assert RUNS == []
    (entry,) = Inbox(store).session("pay-2").audit
    assert (entry.by, entry.answer) == ("ana", False)


def test_a_link_without_a_choice_opens_the_answer_form(store: str, http: TestClient) -> None:
    iid = pause("refunds", "refund-1", store)
    with pytest.raises(ResumeInputError, match="not a yes/no question"):
        link(store, "refund-1", iid, ANA, choice=True)
    path = link(store, "refund-1", iid, ANA)
    page = http.get(path)
    assert page.status_code == 200 and "Answer this question" in page.text
    assert 'name="f.cap"' in page.text and "Refund up to how much?" in page.text

    bad = http.post(path, data={"csrf": csrf_of(page.text), "f.cap": "lots"})
    assert bad.status_code == 422 and "is not a whole number" in bad.text
    assert 'name="f.cap"' in bad.text  # the form again, to correct
    unchanged(store, "refund-1", iid)

    good = http.post(path, data={"csrf": csrf_of(page.text), "f.cap": "50"})
    assert good.status_code == 200, good.text
    assert recorded(store, "refund-1") == [("ana", {"cap": 50})]
    assert work(store) == 1
    assert RUNS == ["capped at 50", "refund o-7"]


def test_a_tool_approval_link_without_a_choice_can_edit_the_call(
    store: str, http: TestClient
) -> None:
    iid = pause("payments", "pay-3", store)
    path = link(store, "pay-3", iid, ANA)
    edited = {"answer": "true", "input": '{"amount": 100, "to": "acme"}', "remember": ""}
    status, text = submit(http, path, **edited)
    assert status == 200, text
    assert recorded(store, "pay-3") == [
        ("ana", {"approve": True, "input": {"amount": 100, "to": "acme"}})
    ]
    assert work(store) == 1
    assert RUNS == ["pay 100 to acme"]


def _retyped(path: str, change: Callable[[list[object]], None]) -> str:
    """``path`` with its payload changed by ``change`` and its old MAC kept."""
    payload, mac = path.removeprefix("/links/").split(".")
    fields = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    change(fields)
    text = json.dumps(fields, separators=(",", ":")).encode()
    return "/links/" + base64.urlsafe_b64encode(text).decode().rstrip("=") + "." + mac


def test_forged_and_changed_links_are_refused(store: str, http: TestClient) -> None:
    iid = pause("payments", "pay-4", store)
    good = link(store, "pay-4", iid, ANA, choice=True)
    csrf = csrf_of(http.get(good).text)

    def set_at(i: int, value: object) -> Callable[[list[object]], None]:
        return lambda fields: fields.__setitem__(i, value)

    forged = [
        "/links/not-a-token",
        "/links/\u00e9t\u00e9.\u00e9t\u00e9",
        "/links/" + "A" * 60 + "." + "B" * 43,
        good[:-2] + ("AA" if not good.endswith("AA") else "BB"),  # its MAC changed
        _retyped(good, set_at(4, "bo")),  # another person
        _retyped(good, set_at(5, ["ops", "leads"])),  # more groups
        _retyped(good, set_at(6, int(time.time()) + 10**6)),  # a later deadline
        _retyped(good, set_at(7, False)),  # the other choice
        _retyped(good, set_at(1, "pay-5")),  # another session
    ]
    with Inbox(store, link_secret="another-secret-0123456789abcdef") as other:
        forged.append(other.answer_link("pay-4", iid, person=ANA, expires_in=60, choice=True))
    for path in forged:
        page = http.get(path)
        assert page.status_code == 403, path
        assert "This link is not valid" in page.text
        posted = http.post(path, data={"csrf": csrf})
        assert posted.status_code == 401, path  # refused before its body is read
    unchanged(store, "pay-4", iid)


def test_an_expired_link_is_refused(store: str, http: TestClient) -> None:
    iid = pause("payments", "pay-6", store)
    two_hours_ago = time.time() - 7200
    path = link(store, "pay-6", iid, ANA, choice=True, clock=lambda: two_hours_ago, expires_in=60)
    page = http.get(path)
    assert page.status_code == 410 and "This link has expired" in page.text
    assert 'name="csrf"' not in page.text
    assert http.post(path, data={"csrf": "x"}).status_code == 410
    unchanged(store, "pay-6", iid)


def test_a_link_for_another_question_is_refused(store: str, http: TestClient) -> None:
    iid = pause("payments", "pay-7", store)
    with pytest.raises(UnknownInterruptError):
        link(store, "pay-7", "v1:before_tool_call:no-such-question", ANA)
    question = Inbox(store).session("pay-7").interrupts[0]
    maker = AnswerLinks(SECRET, "http://testserver", people={})
    csrf = csrf_of(http.get(link(store, "pay-7", iid, ANA)).text)
    cases = {
        # the question as it was shown before it changed (another reason, another call)
        "changed": dataclasses.replace(question, reason={"question": "Pay less?"}),
        "changed ": dataclasses.replace(
            question, tool_use=ToolUse("call_pay", "pay", {"amount": 1, "to": "acme"})
        ),
        # another question of this session (another call's approval)
        "gone": dataclasses.replace(question, id=question.id.replace("call_pay", "call_other")),
    }
    for code, made in cases.items():
        path = maker.link("pay-7", made, ANA, choice=True).removeprefix("http://testserver")
        page = http.get(path)
        assert page.status_code == 409, (code, page.text)
        expected = "another version" if code.strip() == "changed" else "no longer waits"
        assert expected in page.text
        assert http.post(path, data={"csrf": csrf}).status_code == 409
    nowhere = maker.link("pay-9", question, ANA, choice=True).removeprefix("http://testserver")
    assert http.get(nowhere).status_code == 404  # no such session
    unchanged(store, "pay-7", iid)


def test_other_people_are_refused(store: str, http: TestClient) -> None:
    iid = pause("deploys", "deploy-1", store)
    ana_link = link(store, "deploy-1", iid, ANA, choice=True)
    csrf = csrf_of(http.get(ana_link).text)

    # dee is in no group: the page shows the question without a form, and an answer sent
    # anyway is refused by the answer rules (only members of ops may answer)
    dee_link = link(store, "deploy-1", iid, DEE, choice=True)
    page = http.get(dee_link)
    assert page.status_code == 403 and "only members of ops may answer" in page.text
    assert 'name="csrf"' not in page.text
    refused = http.post(dee_link, data={"csrf": csrf})
    assert refused.status_code == 403 and "dee (no group) may not answer" in refused.text
    unchanged(store, "deploy-1", iid)

    # a browser signed in to the inbox as bo does not answer with ana's link
    login = http.get("/login")
    signed = http.post(
        "/login",
        data={"csrf": csrf_of(login.text), "token": "bo-token-0123456789abcdef"},
        follow_redirects=False,
    )
    assert signed.status_code == 303
    for response in (http.get(ana_link), http.post(ana_link, data={"csrf": csrf})):
        assert response.status_code == 403
        assert "made for ana, and this browser is signed in to the inbox as bo" in response.text
    unchanged(store, "deploy-1", iid)


def test_a_post_from_another_site_or_without_the_page_is_refused(store: str) -> None:
    iid = pause("payments", "pay-10", store)
    path = link(store, "pay-10", iid, ANA, choice=True)
    with TestClient(inbox_app(store)) as blind:
        r = blind.post(path, data={})
        assert r.status_code == 403 and "open the link again" in r.text  # no cookie, no form
        csrf = csrf_of(blind.get(path).text)
        assert blind.post(path, data={"csrf": "0" * 64}).status_code == 403
        assert blind.post(path, data={"csrf": "\u00e9" * 64}).status_code == 403
        cross = blind.post(path, data={"csrf": csrf}, headers={"Sec-Fetch-Site": "cross-site"})
        assert cross.status_code == 403
    with TestClient(inbox_app(store)) as elsewhere:
        assert elsewhere.post(path, data={"csrf": csrf}).status_code == 403  # not its cookie
    unchanged(store, "pay-10", iid)


def test_two_of_three_approve_with_their_own_links(store: str, http: TestClient) -> None:
    iid = pause("deploys", "deploy-2", store)
    approve = {p.name: link(store, "deploy-2", iid, p, choice=True) for p in (ANA, BO, CY)}
    decline = link(store, "deploy-2", iid, ANA, choice=False)

    assert submit(http, approve["ana"])[0] == 200
    status, text = submit(http, approve["bo"])
    assert status == 409 and "try again in a moment" in text  # ana's vote waits for a worker
    assert recorded(store, "deploy-2") == [("ana", True)]
    assert work(store) == 1
    assert RUNS == []  # one vote of two
    assert Inbox(store).session("deploy-2").votes[iid] == (True, ("ana",))

    for used in (approve["ana"], decline):  # ana voted: her links are spent
        page = http.get(used)
        assert page.status_code == 409 and "ana has answered this question already" in page.text
    assert Inbox(store).session("deploy-2").recorded == []

    page = http.get(approve["bo"])
    assert "1 of 2 approvals: ana" in page.text
    assert http.post(approve["bo"], data={"csrf": csrf_of(page.text)}).status_code == 200
    assert work(store) == 1
    assert RUNS == ["deploy prod"]
    assert http.get(approve["cy"]).status_code == 409  # settled: cy's link is no use
    votes = [(e.by, e.answer) for e in Inbox(store).session("deploy-2").audit]
    assert votes == [("ana", True), ("bo", True)]


_ASK = """
import sys
from tests.channels.test_links import app, pause
print(pause("payments", "pay-x", sys.argv[1]))
"""


def test_the_asking_answering_and_applying_processes_differ(store: str) -> None:
    """The agent asks in a process of its own, the link is answered through a real uvicorn in
    this one, and ``interlude worker`` applies the answer in a third."""
    import httpx

    from tests.support.serving import serving

    asked = subprocess.run(
        [sys.executable, "-c", _ASK, store], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert asked.returncode == 0, asked.stderr
    iid = asked.stdout.strip().splitlines()[-1]
    path = link(store, "pay-x", iid, ANA, choice=True)
    with serving(inbox_app(store)) as url, httpx.Client(base_url=url) as client:
        page = client.get(path)
        assert page.status_code == 200
        posted = client.post(path, data={"csrf": csrf_of(page.text)})
        assert posted.status_code == 200, posted.text
    worker = ["worker", "--once", "--json", "--app", "tests.channels.test_links:app"]
    applied = subprocess.run(
        [sys.executable, "-m", "interlude", *worker, "--store", store],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert applied.returncode == 0, applied.stderr
    assert json.loads(applied.stdout)["handled"] == 1
    view = Inbox(store).session("pay-x")
    assert [(e.by, e.answer) for e in view.audit] == [("ana", True)]
    results = [b for m in view.messages for b in m.content if isinstance(b, ToolResult)]
    assert [r.text for r in results] == ["paid 120 to acme"]
    assert RUNS == []  # nothing ran in this process
