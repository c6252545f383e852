"""Review of the inbox's "Undo to here": who may undo a session."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the inbox tests need the [server] extra")

from starlette.testclient import TestClient

from interlude import Agent, AgentSession, App
from interlude.policy import Policy, Rule
from interlude.server import create_app
from interlude.sessions import SQLiteStore
from tests.undo.undo_agent import EFFECTS, build

FIN = "fin-token-0123456789abcdef"
CY = "cy-token-0123456789abcdef0"
ONLY_FINANCE_MAILS = Policy(
    [Rule(tool="mail", then="ask", approvers=["finance"]), Rule(tool="*", then="allow")],
    default="allow",
)

gated = App()


@gated.agent("trip")
def trip(session: AgentSession) -> Agent:
    return build(None, session.store, session.id, policy=ONLY_FINANCE_MAILS)


def login(client: TestClient, token: str) -> None:
    page = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf
    r = client.post("/login", data={"token": token, "csrf": csrf[1]}, follow_redirects=False)
    assert r.status_code == 303


def test_a_person_who_may_not_answer_the_session_may_not_undo_it(tmp_path: Path) -> None:
    """cy is in no group that may answer the session's question (only finance may): the
    answer form refuses them (403), yet "Undo to here" drops that question and runs four
    compensations as cy."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    with SQLiteStore(tmp_path / "s.db") as store:
        paused = build(None, store, "trip-1", policy=ONLY_FINANCE_MAILS)("Book me a trip")
        [question] = paused.interrupts  # mail waits on finance
    EFFECTS.clear()
    tokens: Any = {
        FIN: {"name": "fin", "groups": ["finance"]},
        CY: {"name": "cy", "groups": ["interns"]},
    }
    with TestClient(create_app(url, gated, tokens=tokens)) as client:
        login(client, CY)
        page = client.get("/sessions/trip-1").text
        answer_csrf = re.search(
            r'action="/sessions/trip-1/answer".*?name="csrf" value="([^"]+)"', page, re.S
        )
        if answer_csrf:  # the answer is refused: cy may not answer it
            r = client.post(
                "/sessions/trip-1/answer",
                data={
                    "csrf": answer_csrf[1],
                    "interrupt_id": question.id,
                    "shown": "x",
                    "approve": "true",
                },
            )
            assert r.status_code in (403, 422)
        assert "/undo?to=" not in page  # not offered
        plan = client.get("/sessions/trip-1/undo?to=m0")
        assert plan.status_code == 403 and 'id="undo-form"' not in plan.text
        from interlude.server._auth import COOKIE

        auth = client.app.state.interlude.auth  # a valid token for cy: only the rule stops it
        csrf = auth.csrf(client.cookies.get(COOKIE), "undo:trip-1")
        done = client.post(
            "/sessions/trip-1/undo", data={"csrf": csrf, "to": "m0"}, follow_redirects=False
        )
        assert done.status_code == 403, (done.status_code, EFFECTS)
    assert EFFECTS == []
    with SQLiteStore(tmp_path / "s.db") as store:
        assert asyncio.run(store.load("trip-1")).pause is not None


def test_the_undo_posted_is_the_plan_shown(tmp_path: Path) -> None:
    """The page shows the plan (four compensations: the mail waits on a question), the run then
    goes on (the mail is approved and sent), and the confirmed form runs a fifth compensation
    the person never saw. An answer form is bound to what it showed (``shown``); this one is not."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    with SQLiteStore(tmp_path / "s.db") as store:
        [question] = build(None, store, "trip-1", policy=ONLY_FINANCE_MAILS)("Book").interrupts
    tokens: Any = {FIN: {"name": "fin", "groups": ["finance"]}}
    with TestClient(create_app(url, gated, tokens=tokens)) as client:
        login(client, FIN)
        plan = client.get("/sessions/trip-1/undo?to=m0").text
        assert plan.count('class="step"') == 4 and "mail.undo" not in plan
        form = plan[plan.index('id="undo-form"') :]
        csrf = re.search(r'name="csrf" value="([^"]+)"', form)
        assert csrf
        with SQLiteStore(tmp_path / "s.db") as store:  # meanwhile the run goes on
            agent = build(None, store, "trip-1", policy=ONLY_FINANCE_MAILS)
            assert str(agent.resume({question.id: True}, by="fin")) == "Your trip is booked."
        EFFECTS.clear()
        client.post("/sessions/trip-1/undo", data={"csrf": csrf[1], "to": "m0"})
    assert "retract mail to ana@example.com" not in EFFECTS, EFFECTS
