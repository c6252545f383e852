"""Slack (issue 39): a worker posts each question to a loopback Slack Web API through the real
``slack_sdk`` (Block Kit, its choices as buttons, a link to the inbox); Slack's signed
interactivity requests to ``POST /channels/slack/actions`` on the inbox answer it through the
floor's rules, as the configured person of the Slack user; the message is updated with who
answered, or why not. Forged, unsigned, stale and replayed requests, unknown users and people
of the wrong group are refused with nothing recorded."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import free_port, started, wait_for
from tests.support.extras import require_extras

require_extras("slack_sdk", "starlette", "uvicorn", extra="slack")

import httpx  # noqa: E402

from interlude import App, Inbox, Interrupt, Worker  # noqa: E402
from interlude.errors import NotificationError  # noqa: E402
from interlude.notify import Slack, SlackAnswer  # noqa: E402
from interlude.sessions import SQLiteStore  # noqa: E402
from tests.support.serving import serving  # noqa: E402

from . import slack_app  # noqa: E402
from .slack_api import (  # noqa: E402
    BOT_TOKEN,
    CHANNEL,
    SECRET,
    SlackApi,
    answer_buttons,
    block_actions,
    clicked,
    form,
    loopback_slack,
    sign,
    status_line,
)
from .slack_serve import inbox_with_slack  # noqa: E402

INBOX = "http://inbox.test"
ACTIONS = "/channels/slack/actions"
TOO_LATE = ("already_answered", "not_paused", "unknown_interrupt")
"""The refusals of an answer to a question that was answered (and maybe applied) already."""


@dataclass
class World:
    """A store, the asking side (an App notifying the loopback Slack, and its worker), and the
    answering side (the inbox with Slack's door, served by uvicorn)."""

    api: SlackApi
    api_url: str
    store: SQLiteStore
    app: App
    url: str

    def ask(self, agent: str, session: str, tag: str) -> Interrupt:
        result = self.app.start(agent, session, self.store)(tag)
        (question,) = result.interrupts
        return question

    def work(self) -> int:
        """One worker pass: announce, carry on what was answered, announce again."""
        return asyncio.run(Worker(self.app, self.store).run_once())

    def latest(self) -> dict[str, Any]:
        return self.api.posted()[-1]

    def post(self, body: bytes, headers: dict[str, str]) -> httpx.Response:
        return httpx.post(self.url + ACTIONS, content=body, headers=headers, timeout=30)

    def click(self, message: dict[str, Any], user: str, label: str) -> httpx.Response:
        return self.post(*clicked(message, user, label))

    def recorded(self, session: str) -> list[Any]:
        return asyncio.run(self.store.recorded_answers(session))

    def audit(self, session: str) -> list[dict[str, Any]]:
        return Inbox(self.store).audit(session)

    def updates(self) -> int:
        return len(self.api.called("chat.update"))

    def wait_updates(self, n: int) -> None:
        wait_for(lambda: self.updates() >= n, what=f"{n} chat.update call(s)")


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    monkeypatch.setenv("SLACK_EFFECTS", str(tmp_path / "effects.txt"))
    db = tmp_path / "slack.db"
    store = SQLiteStore(db)
    with loopback_slack() as (api, api_url):
        target = Slack(CHANNEL, token=BOT_TOKEN, base_url=api_url)
        app = slack_app.build_app(notify=[target], inbox_url=INBOX)
        inbox = inbox_with_slack(f"sqlite:///{db}", slack_app.build_app(), api_url)
        with serving(inbox) as url:
            yield World(api, api_url, store, app, url)
    store.close()


# -- the question in Slack -------------------------------------------------------------------


def test_a_question_is_posted_with_its_buttons_and_a_link_to_the_inbox(world: World) -> None:
    question = world.ask("payer", "pay-1", "acme")
    world.work()

    (call,) = world.api.called("chat.postMessage")
    assert call.authorization == f"Bearer {BOT_TOKEN}" and call.args["channel"] == CHANNEL
    assert call.args["metadata"] == {
        "event_type": "interlude_question",
        "event_payload": {"session_id": "pay-1", "interrupt_id": question.id},
    }
    message = world.latest()
    assert "pay-1" in message["text"]
    facts = message["blocks"][0]["text"]["text"]
    assert "`pay`" in facts and '"acme"' in facts
    assert answer_buttons(message) == [("Approve", True), ("Decline", False)]
    (actions,) = [b for b in message["blocks"] if b["type"] == "actions"]
    link = actions["elements"][-1]
    assert link["url"] == f"{INBOX}/sessions/pay-1"
    value = SlackAnswer.parse(actions["elements"][0]["value"])
    assert value == SlackAnswer(
        session_id="pay-1", interrupt_id=question.id, answer=True, shown=question.digest
    )

    world.work()
    assert len(world.api.called("chat.postMessage")) == 1  # announced once


def test_an_enum_question_gets_a_button_per_value_and_a_quorum_says_so(world: World) -> None:
    world.ask("shipper", "ship-1", "parcel")
    world.work()
    assert answer_buttons(world.latest()) == [
        ("small", "small"),
        ("medium", "medium"),
        ("large", "large"),
    ]
    response = world.click(world.latest(), "U0ANA", "medium")
    assert response.status_code == 200 and response.json()["ok"] is True
    (recorded,) = world.recorded("ship-1")
    assert (recorded.answer, recorded.by) == ("medium", "ana")
    world.work()
    assert slack_app.effects() == ["ship parcel"]
    assert [(e["by"], e["answer"]) for e in world.audit("ship-1")] == [("ana", "medium")]

    world.ask("deployer", "deploy-1", "prod")
    world.work()
    context = world.latest()["blocks"][1]["elements"][0]["text"]
    assert "needs 2 approvals" in context and "may answer: ops" in context


# -- answering from Slack --------------------------------------------------------------------


def test_a_click_approves_a_worker_runs_the_tool_once_and_the_message_says_who(
    world: World,
) -> None:
    question = world.ask("payer", "pay-1", "acme")
    world.work()
    asked = world.latest()

    response = world.click(asked, "U0ANA", "Approve")
    assert response.status_code == 200
    assert response.json() == {"ok": True, "by": "ana", "session": "pay-1"}
    (recorded,) = world.recorded("pay-1")
    assert (recorded.answer, recorded.by, recorded.shown) == (True, "ana", question.digest)
    assert slack_app.effects() == []  # recorded, not run: a worker runs it

    world.wait_updates(1)
    (update,) = world.api.called("chat.update")
    assert (update.args["channel"], update.args["ts"]) == (CHANNEL, asked["ts"])
    message = world.api.message(asked["ts"])
    assert status_line(message) == "*Approved* by *ana*"
    assert answer_buttons(message) == []  # settled: no buttons left
    assert message["metadata"]["event_payload"]["interrupt_id"] == question.id

    world.work()  # the worker runs the tool, then announces the answer
    assert slack_app.effects() == ["pay acme"]
    assert [(e["by"], e["answer"]) for e in world.audit("pay-1")] == [("ana", True)]
    history = world.api.called("conversations.history")
    assert history and history[-1].args["include_all_metadata"] in ("1", "true", "True")
    assert world.updates() == 1  # the message says it already: left as it is
    assert len(world.api.called("chat.postMessage")) == 1  # and nothing posted again

    world.work()
    assert slack_app.effects() == ["pay acme"]  # once


def test_an_answer_given_in_the_inbox_closes_the_message_and_a_late_click_is_refused(
    world: World,
) -> None:
    question = world.ask("payer", "pay-1", "acme")
    world.work()
    asked = world.latest()

    Inbox(world.store).record("pay-1", {question.id: False}, by="bo")
    world.work()  # applied, then announced: the message is updated
    message = world.api.message(asked["ts"])
    assert status_line(message) == "*Declined* by *bo*" and answer_buttons(message) == []

    response = world.click(asked, "U0ANA", "Approve")  # the message as ana saw it
    assert response.json()["ok"] is False and response.json()["code"] in TOO_LATE
    assert world.recorded("pay-1") == [] and slack_app.effects() == []
    world.wait_updates(2)
    status = status_line(world.api.message(asked["ts"]))
    assert status is not None and status.startswith(
        "*Declined* by *bo*\n<@U0ANA> (ana) was too late"
    )


# -- refusals: nothing recorded, nothing run -------------------------------------------------


def _forged(message: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    body = form(block_actions(message, "U0ANA", "Approve"))
    return body, {**sign(body, int(time.time()), secret="not-the-signing-secret")}


def _tampered(message: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    body, headers = clicked(message, "U0DEV", "Approve")
    return body.replace(b"U0DEV", b"U0ANA"), headers  # signed for dev, sent as ana


def _unsigned(message: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    body, headers = clicked(message, "U0ANA", "Approve")
    return body, {"Content-Type": headers["Content-Type"]}


def _no_timestamp(message: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    body, headers = clicked(message, "U0ANA", "Approve")
    del headers["X-Slack-Request-Timestamp"]
    return body, headers


def _no_signature(message: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    body, headers = clicked(message, "U0ANA", "Approve")
    del headers["X-Slack-Signature"]
    return body, headers


def _stale(message: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    return clicked(message, "U0ANA", "Approve", at=time.time() - 301)


def _early(message: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    return clicked(message, "U0ANA", "Approve", at=time.time() + 301)


def _other_timestamp(message: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    body, headers = clicked(message, "U0ANA", "Approve", at=time.time() - 10)
    return body, {**headers, "X-Slack-Request-Timestamp": str(int(time.time()))}


REQUESTS = {
    "forged": (_forged, "forged"),
    "tampered": (_tampered, "forged"),
    "unsigned": (_unsigned, "unsigned"),
    "no-timestamp": (_no_timestamp, "unsigned"),
    "no-signature": (_no_signature, "unsigned"),
    "stale": (_stale, "stale"),
    "early": (_early, "stale"),
    "other-timestamp": (_other_timestamp, "forged"),
}


@pytest.mark.parametrize("kind", sorted(REQUESTS))
def test_a_request_slack_did_not_sign_is_refused_before_anything_is_read(
    world: World, kind: str
) -> None:
    world.ask("payer", "pay-1", "acme")
    world.work()
    make, code = REQUESTS[kind]

    response = world.post(*make(world.latest()))
    assert response.status_code == 401
    assert response.json()["code"] == code
    assert world.recorded("pay-1") == [] and world.audit("pay-1") == []
    world.work()
    assert slack_app.effects() == [] and world.updates() == 0  # nothing changed anywhere

    assert world.click(world.latest(), "U0ANA", "Approve").json()["ok"] is True  # still open


def test_a_replayed_request_is_refused_by_the_answer_rules(world: World) -> None:
    world.ask("payer", "pay-1", "acme")
    world.work()
    body, headers = clicked(world.latest(), "U0ANA", "Approve")

    assert world.post(body, headers).json()["ok"] is True
    again = world.post(body, headers).json()  # the same request, byte for byte
    assert (again["ok"], again["code"]) == (False, "already_answered")
    assert len(world.recorded("pay-1")) == 1
    world.wait_updates(2)  # ana's own answer stands: the message says just that
    assert status_line(world.api.message(world.latest()["ts"])) == "*Approved* by *ana*"

    world.work()
    late = world.post(body, headers).json()  # replayed after the worker applied it
    assert late["ok"] is False and late["code"] in TOO_LATE
    world.work()
    assert slack_app.effects() == ["pay acme"]
    assert [e["by"] for e in world.audit("pay-1")] == ["ana"]


def test_an_unknown_slack_user_is_refused_and_the_message_says_so(world: World) -> None:
    world.ask("payer", "pay-1", "acme")
    world.work()
    asked = world.latest()

    response = world.click(asked, "U0STRANGER", "Approve")
    assert response.status_code == 200
    assert (response.json()["ok"], response.json()["code"]) == (False, "unknown_user")
    assert world.recorded("pay-1") == []
    world.wait_updates(1)
    message = world.api.message(asked["ts"])
    assert status_line(message) == "<@U0STRANGER> is not a person this inbox knows"
    assert len(answer_buttons(message)) == 2  # still open to others


@pytest.mark.parametrize("user", ["U0DEV", "U0GUEST"])
def test_a_person_outside_the_groups_that_may_answer_is_refused(world: World, user: str) -> None:
    world.ask("deployer", "deploy-1", "prod")
    world.work()
    asked = world.latest()

    response = world.click(asked, user, "Approve")
    assert (response.json()["ok"], response.json()["code"]) == (False, "not_allowed")
    assert world.recorded("deploy-1") == []
    world.work()
    assert slack_app.effects() == [] and world.audit("deploy-1") == []
    world.wait_updates(1)
    message = world.api.message(asked["ts"])
    assert "is not in a group that may answer" in (status_line(message) or "")
    assert len(answer_buttons(message)) == 2


# -- a quorum ------------------------------------------------------------------------------


def test_two_of_three_approve_from_slack_and_the_deploy_runs_once(world: World) -> None:
    world.ask("deployer", "deploy-1", "prod")
    world.work()
    asked = world.latest()

    assert world.click(asked, "U0ANA", "Approve").json()["ok"] is True
    world.wait_updates(1)
    first = world.api.message(asked["ts"])
    assert status_line(first) == "*Approved* by *ana*: 1 of 2 approvals"
    assert len(answer_buttons(first)) == 2  # one more approval needed: the buttons stay

    world.work()  # the first vote is applied: still paused, nothing deployed
    assert slack_app.effects() == []
    again = world.click(first, "U0ANA", "Approve").json()  # the same person cannot vote twice
    assert again["ok"] is False and "ana already approved" in again["error"]

    assert world.click(first, "U0BO", "Approve").json()["ok"] is True
    wait_for(
        lambda: status_line(world.api.message(asked["ts"])) == "*Approved* by *ana*, *bo*",
        what="the message to say both approved",
    )
    assert answer_buttons(world.api.message(asked["ts"])) == []
    world.work()
    world.work()
    assert slack_app.effects() == ["deploy prod"]
    assert [(e["by"], e["vote"]) for e in world.audit("deploy-1")] == [
        ("ana", [1, 2]),
        ("bo", [2, 2]),
    ]

    late = world.click(first, "U0CY", "Approve").json()  # the third, after it was settled
    assert late["ok"] is False and slack_app.effects() == ["deploy prod"]


# -- another process answers; a kill after the answer loses nothing ----------------------------


def test_another_process_takes_the_click_and_a_kill_after_it_runs_the_tool_once(
    world: World, tmp_path: Path
) -> None:
    world.ask("payer", "pay-1", "acme")
    world.work()
    body, headers = clicked(world.latest(), "U0ANA", "Approve")
    env = {
        "SLACK_STORE": f"sqlite:///{tmp_path / 'slack.db'}",
        "SLACK_API_URL": world.api_url,
        "SLACK_EFFECTS": str(tmp_path / "effects.txt"),
    }
    argv = [sys.executable, "-m", "tests.channels.slack_serve"]

    port = free_port()
    with started(argv, port=port, env={**env, "SLACK_PORT": str(port)}) as server:
        reply = httpx.post(server.url + ACTIONS, content=body, headers=headers, timeout=30)
        assert reply.json() == {"ok": True, "by": "ana", "session": "pay-1"}
        server.process.kill()  # SIGKILL, once the answer is recorded
        server.process.wait(30)
    assert [r.by for r in world.recorded("pay-1")] == ["ana"]

    world.work()  # this process applies it
    world.work()
    assert slack_app.effects() == ["pay acme"]

    port = free_port()
    with started(argv, port=port, env={**env, "SLACK_PORT": str(port)}) as server:
        again = httpx.post(server.url + ACTIONS, content=body, headers=headers, timeout=30)
        assert again.json()["ok"] is False and again.json()["code"] in TOO_LATE
    world.work()
    assert slack_app.effects() == ["pay acme"]


# -- what the notifier does when Slack says no ------------------------------------------------


def test_slack_errors_that_cannot_mend_fail_for_good_and_the_others_are_tried_again(
    world: World,
) -> None:
    question = world.ask("payer", "pay-1", "acme")
    target = Slack(CHANNEL, token=BOT_TOKEN, base_url=world.api_url)
    message = {"event": "asked", "session_id": "pay-1", "question": question.to_dict()}

    world.api.failures.append(("chat.postMessage", 200, {"ok": False, "error": "invalid_auth"}))
    with pytest.raises(NotificationError) as refused:
        asyncio.run(target.send(message))
    assert refused.value.permanent and "invalid_auth" in str(refused.value)

    world.api.failures.append(("chat.postMessage", 503, {"ok": False, "error": "fatal_error"}))
    with pytest.raises(NotificationError) as later:
        asyncio.run(target.send(message))
    assert not later.value.permanent

    gone = Slack("C0NOWHERE", token=BOT_TOKEN, base_url=world.api_url)
    with pytest.raises(NotificationError) as nowhere:
        asyncio.run(gone.send(message))
    assert nowhere.value.permanent and "channel_not_found" in str(nowhere.value)

    asyncio.run(target.send(message))  # and then it goes through
    assert [m["ts"] for m in world.api.posted()] and world.api.posted()[-1]["blocks"]

    closing = {**message, "event": "answered", "answer": {"by": "bo", "answer": False}}
    asyncio.run(Slack("#approvals", token=BOT_TOKEN, base_url=world.api_url).send(closing))
    assert world.api.called("chat.postMessage")[-1].args["channel"] == "#approvals"
    # a name cannot be read back (history wants an id): the outcome is posted, not updated
    assert status_line(world.latest()) == "*Declined* by *bo*"
    assert len(answer_buttons(world.api.posted()[0])) == 2


# -- configuration ----------------------------------------------------------------------------


def test_slack_users_are_checked_as_tokens_people_are() -> None:
    from interlude.errors import ConfigurationError
    from interlude.server._slack import admits, load_slack_users, slack_door, slack_people

    assert slack_people({"U1": {"name": "ana", "groups": ["ops"]}})["U1"].groups == ("ops",)
    assert load_slack_users("U1=ana:ops+leads,U2=bo") == {
        "U1": {"name": "ana", "groups": ["ops", "leads"]},
        "U2": "bo",
    }
    assert load_slack_users(json.dumps({"U3": "cy"})) == {"U3": "cy"}
    for bad in ({"U1": "expiry"}, {"U1": {"name": "ana", "groups": ["a b"]}}, {"U 1": "ana"}):
        with pytest.raises(ConfigurationError):
            slack_people(bad)
    now = int(time.time())
    assert admits({"x-slack-signature": "v0=ab", "x-slack-request-timestamp": str(now)})
    assert not admits({"x-slack-signature": "v0=ab", "x-slack-request-timestamp": str(now - 301)})
    assert not admits({"x-slack-request-timestamp": str(now)})
    with pytest.raises(ConfigurationError):
        slack_door("", users={"U1": "ana"})
    with pytest.raises(ConfigurationError):
        slack_door(SECRET, users={})


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"a": {"approve": True, "input": {"amount": 1, "to": "mallory"}}}, "invalid_answer"),
        ({"d": None}, "stale"),
        ({"d": "sha256:" + "0" * 64}, "stale"),
    ],
    ids=["an-edit", "no-digest", "another-digest"],
)
def test_a_crafted_button_value_is_refused(world: World, change: dict[str, Any], code: str) -> None:
    """A button's value is ours but not signed: one posted by someone else who can post as
    the app (an edit, no digest, another question's digest) answers nothing."""
    world.ask("payer", "pay-1", "acme")
    world.work()
    asked = json.loads(json.dumps(world.latest()))
    for block in asked["blocks"]:
        for element in block.get("elements", []):
            if "value" in element:
                element["value"] = json.dumps({**json.loads(element["value"]), **change})
    response = world.click(asked, "U0ANA", "Approve")
    assert (response.json()["ok"], response.json()["code"]) == (False, code)
    assert world.recorded("pay-1") == [] and world.audit("pay-1") == []
    world.work()
    assert slack_app.effects() == []
