"""One-time answer links and the server's own people: for a person the server's tokens name, a
link answers with the groups the server counts them in now (the link's groups narrowed to
those), so a link minted with groups its person does not have gains nothing, and taking
someone out of a group on the server takes it out of the links already mailed to them. A
person the server does not know answers with the link's groups, as signed (links are for
people without inbox tokens too)."""

from __future__ import annotations

import html
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the link tests need the [server] extra")

from starlette.applications import Starlette
from starlette.testclient import TestClient

from interlude import Agent, AgentSession, App, Inbox
from interlude.hooks import BeforeToolCallEvent
from interlude.operate import People, Person, link_key, narrowed, read_link
from interlude.server import create_app
from interlude.server._doors import DEFAULT_DOORS
from interlude.server._links import links_door

from .test_links import (
    RUNS,
    SECRET,
    TOKENS,
    _model,
    agents,
    csrf_of,
    deploy,
    link,
    pause,
    recorded,
    unchanged,
    work,
)

EVE = "eve-token-0123456789abcdef"
"""eve's inbox token: the server knows her, in no group."""


def leads_only(event: BeforeToolCallEvent) -> None:
    if event.interrupt("release", {"question": "Release?"}, approvers=["leads"]) is not True:
        event.cancel("not approved")


def build_releases(session: AgentSession) -> Agent:
    agent = Agent(_model("deploy"), tools=[deploy], session=session.store, session_id=session.id)
    agent.hooks.add_callback(BeforeToolCallEvent, leads_only)
    return agent


app = agents(App())
app.agent("releases")(build_releases)


def served(store: str, tokens: dict[str, Any]) -> Starlette:
    return create_app(store, app, tokens=tokens, doors=[*DEFAULT_DOORS, links_door(SECRET)])


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'people.db'}"


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    """The tools' runs, shared with test_links.py's module: empty for each test here too
    (another test in the same worker may have run a tool)."""
    RUNS.clear()
    yield
    RUNS.clear()


@pytest.fixture
def http(store: str) -> Iterator[TestClient]:
    """The server knows ana and bo (ops) and eve (no group)."""
    with TestClient(served(store, {**TOKENS, EVE: "eve"})) as client:
        yield client


def text(response: Any) -> str:
    return html.unescape(response.text)


def a_csrf(http: TestClient, store: str) -> str:
    """A form token of this browser's link pages (any link's page sets its cookie)."""
    iid = pause("payments", "pay-csrf", store, on=app)
    return csrf_of(http.get(link(store, "pay-csrf", iid, Person("gil"), choice=True)).text)


def test_a_link_with_groups_the_server_does_not_give_its_person_is_refused(
    store: str, http: TestClient
) -> None:
    csrf = a_csrf(http, store)
    iid = pause("deploys", "deploy-p1", store, on=app)
    forged = link(store, "deploy-p1", iid, Person("eve", ("ops",)), choice=True)

    page = http.get(forged)  # read-only: the question, without a form
    assert page.status_code == 403, page.text
    assert "You may not answer this question" in page.text and 'name="csrf"' not in page.text
    assert "This link answers as eve (no group), and only members of ops may" in text(page)
    assert "This server does not count eve in ops, which the link names." in text(page)

    posted = http.post(forged, data={"csrf": csrf})  # the floor's not_allowed
    assert posted.status_code == 403
    assert "eve (no group) may not answer question 'deploy'" in text(posted)
    assert "nothing was recorded" in text(posted)
    assert "This server does not count eve in ops" in text(posted)
    unchanged(store, "deploy-p1", iid)


def test_a_known_person_answers_with_the_servers_groups(store: str, http: TestClient) -> None:
    # ana is in ops on this server; her link names ops and leads: it answers with ops only
    csrf = a_csrf(http, store)
    ana = Person("ana", ("ops", "leads"))
    release = pause("releases", "release-p1", store, on=app)
    to_release = link(store, "release-p1", release, ana, choice=True)
    page = http.get(to_release)
    assert page.status_code == 403, page.text
    assert "This link answers as ana (ops), and only members of leads may" in text(page)
    assert "This server does not count ana in leads" in text(page)
    refused = http.post(to_release, data={"csrf": csrf})
    assert refused.status_code == 403 and "ana (ops) may not answer" in text(refused)
    unchanged(store, "release-p1", release)

    # a name written otherwise is the same person (as the audit counts people)
    shouted = link(store, "release-p1", release, Person("ANA", ("leads",)), choice=True)
    assert http.post(shouted, data={"csrf": csrf}).status_code == 403
    unchanged(store, "release-p1", release)

    # the question for ops: the same link's person answers, with the server's ops
    deploy_q = pause("deploys", "deploy-p2", store, on=app)
    to_deploy = link(store, "deploy-p2", deploy_q, ana, choice=True)
    page = http.get(to_deploy)
    assert page.status_code == 200, page.text
    assert "This link answers as <strong>ana</strong> (ops), once" in page.text
    assert http.post(to_deploy, data={"csrf": csrf_of(page.text)}).status_code == 200
    assert recorded(store, "deploy-p2") == [("ana", True)]
    assert work(store, on=app) == 1
    assert Inbox(store).session("deploy-p2").votes[deploy_q] == (True, ("ana",))

    # eve (in no group) still answers a question open to everyone: her link's ops is dropped,
    # and the answer rules decide with what is left
    pay = pause("payments", "pay-p1", store, on=app)
    eve = link(store, "pay-p1", pay, Person("eve", ("ops",)), choice=True)
    page = http.get(eve)
    assert page.status_code == 200 and "answers as <strong>eve</strong>, once" in page.text
    assert http.post(eve, data={"csrf": csrf_of(page.text)}).status_code == 200
    assert recorded(store, "pay-p1") == [("eve", True)]


def test_a_person_the_server_does_not_know_answers_with_the_links_groups(
    store: str, http: TestClient
) -> None:
    iid = pause("deploys", "deploy-p3", store, on=app)
    gil = link(store, "deploy-p3", iid, Person("gil", ("ops",)), choice=True)
    page = http.get(gil)
    assert page.status_code == 200, page.text
    assert "This link answers as <strong>gil</strong> (ops), once" in page.text
    assert http.post(gil, data={"csrf": csrf_of(page.text)}).status_code == 200
    assert recorded(store, "deploy-p3") == [("gil", True)]


def test_taking_someone_out_of_a_group_revokes_their_links(store: str) -> None:
    iid = pause("deploys", "deploy-p4", store, on=app)
    bo = link(store, "deploy-p4", iid, Person("bo", ("ops",)), choice=True)
    with TestClient(served(store, TOKENS)) as before:  # bo in ops: his link works
        assert before.get(bo).status_code == 200
    # the server is restarted with bo's token in no group: the link mailed to him no longer
    # answers the question for ops
    out = {**TOKENS, "bo-token-0123456789abcdef": "bo"}
    with TestClient(served(store, out)) as after:
        page = after.get(bo)
        assert page.status_code == 403 and 'name="csrf"' not in page.text
        assert "This server does not count bo in ops" in text(page)
        csrf = a_csrf(after, store)
        refused = after.post(bo, data={"csrf": csrf})
        assert refused.status_code == 403 and "bo (no group) may not answer" in text(refused)
    unchanged(store, "deploy-p4", iid)
    assert RUNS == []


def test_people_by_name_and_narrowed_links(store: str) -> None:
    people = People(
        {
            "ana-token-0123456789abcdef": {"name": "ana", "groups": ["ops"]},
            "ana-laptop-0123456789abcd": {"name": "Ana", "groups": ["leads", "ops"]},
            EVE: "eve",
        }
    )
    assert people.by_name("ana") == Person("ana", ("ops", "leads"))  # every token's groups
    assert people.by_name("ANA") == people.by_name("\uff41na") == people.by_name("ana")
    assert people.by_name("eve") == Person("eve")
    assert people.by_name("gil") is None

    iid = pause("payments", "pay-p2", store, on=app)
    path = link(store, "pay-p2", iid, Person("eve", ("ops", "x")), choice=True)
    made = read_link(link_key(SECRET), path.removeprefix("/links/"))
    assert made is not None and made.person.groups == ("ops", "x")
    assert narrowed(made, None) is made  # a stranger keeps the link's groups
    assert narrowed(made, Person("eve", ("x", "ops", "y"))) is made  # nothing to drop
    less = narrowed(made, people.by_name("eve"))
    assert less.person == Person("eve") and less.dropped == ("ops", "x")
    assert (less.token, less.made_at, less.choice) == (made.token, made.made_at, made.choice)
