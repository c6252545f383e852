"""The inbox shows which rule of the policy asked a question, and what the shadow policy would
have done; a person's approval there carries the call on as any approval does."""

from __future__ import annotations

import asyncio
import html
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the inbox needs the [server] extra")

from starlette.testclient import TestClient

from interlude import Agent, AgentSession, App, ToolUse, Worker, tool
from interlude.policy import Policy, Rule
from interlude.server import create_app
from interlude.testing import ScriptedModel
from tests.server.test_pages import _form, login

ANA = "ana-token-0123456789abcdef"
PAID: list[int] = []

app = App(
    policy=Policy(
        [Rule(tool="pay", when="input.amount > 100", then="ask", approvers=["finance"])],
        default="allow",
        version="2026-11",
    ),
    shadow=Policy([Rule(tool="pay", then="deny")], version="frozen"),
)


@tool
def pay(amount: int) -> str:
    """Pay an amount."""
    PAID.append(amount)
    return f"paid {amount}"


@app.agent("payer")
def build(session: AgentSession) -> Agent:
    return Agent(
        ScriptedModel([[ToolUse("t1", "pay", {"amount": 900})], "Paid."]),
        tools=[pay],
        session=session.store,
        session_id=session.id,
    )


def test_the_question_page_names_the_rule_and_the_shadows_view(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'inbox.db'}"
    agent = app.start("payer", "pay-1", url)
    assert isinstance(agent, Agent)
    [question] = agent("Pay the invoice").interrupts
    assert PAID == []
    with TestClient(
        create_app(url, app, tokens={ANA: {"name": "ana", "groups": ["finance"]}})
    ) as c:
        login(c, ANA)
        page = html.unescape(c.get("/sessions/pay-1").text)
        assert (
            'Asked by policy 2026-11, rule 0 (tool="pay" when="input.amount > 100" then="ask")'
            in page
        )
        assert 'Shadow policy frozen would deny: rule 0 (tool="pay" then="deny")' in page
        section = page[page.index('<section class="question"') :]
        section = section[: section.index("</section>")]
        assert '"rule_text"' not in section  # not repeated in the question's details
        raw = c.get("/sessions/pay-1").text
        untouched = html.unescape(raw.split('name="input"')[1].split(">", 1)[1])
        untouched = untouched.split("</textarea>")[0]
        data = {**_form(raw, question.id), "answer": "true", "input": untouched, "remember": ""}
        r = c.post("/sessions/pay-1/answer", data=data, follow_redirects=False)
        assert r.status_code == 303, r.text
    assert asyncio.run(Worker(app, url).run_once()) == 1
    assert PAID == [900]
