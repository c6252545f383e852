"""One-time answer links in mail: a worker's e-mail notifier, given an ``AnswerLinks``, mails
each recipient it knows a person for their own Approve and Decline links; a real SMTP server
(aiosmtpd) receives the mails, the test follows the links from them against a real uvicorn
serving the links door, and two people's links cast the two votes a deploy needs."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the link tests need the [server] extra")

from interlude import App, Inbox, Worker
from interlude.notify import Email
from interlude.operate import AnswerLinks
from tests.support import free_port, require_service
from tests.support.serving import serving

from .test_links import ANA, BO, DEE, RUNS, SECRET, agents, csrf_of, inbox_app, pause


class Mailbox:
    def __init__(self) -> None:
        self.mails: list[Any] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.mails.append(envelope)
        return "250 OK"

    def received(self) -> dict[str, EmailMessage]:
        """Each mail by its one recipient (or its recipients, comma-joined)."""
        out: dict[str, EmailMessage] = {}
        for envelope in self.mails:
            mail = message_from_bytes(envelope.original_content, policy=policy.default)
            assert isinstance(mail, EmailMessage)
            out[",".join(envelope.rcpt_tos)] = mail
        return out


@pytest.fixture
def mailbox() -> Iterator[tuple[Mailbox, int]]:
    try:
        from aiosmtpd.controller import Controller
    except ImportError:
        require_service("aiosmtpd is not installed (pip install aiosmtpd)")
    box = Mailbox()
    controller = Controller(box, hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        yield box, controller.port
    finally:
        controller.stop()


def _links(mail: EmailMessage) -> dict[str, str]:
    text = mail.get_content()
    return dict(re.findall(r"^  (Approve|Decline|Answer): (\S+)\r?$", text, re.MULTILINE))


def _follow(client: Any, url: str) -> int:
    """Open a link from a mail and press its button: the answer's status."""
    page = client.get(url)
    assert page.status_code == 200, page.text
    return int(client.post(url, data={"csrf": csrf_of(page.text)}).status_code)


def test_two_people_approve_from_their_mails(tmp_path: Path, mailbox: tuple[Mailbox, int]) -> None:
    import httpx

    box, smtp_port = mailbox
    RUNS.clear()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    people = {"ana@example.com": ANA, "bo@example.com": BO, "dee@example.com": DEE}
    mail = Email(
        "127.0.0.1",
        smtp_port,
        sender="agents@example.com",
        to=["ana@example.com", "bo@example.com", "dee@example.com", "ops@example.com"],
        links=AnswerLinks(SECRET, url, people=people, expires_in=3600),
    )
    app = agents(App(notify=[mail], inbox_url=url))
    store = f"sqlite:///{tmp_path / 'links.db'}"
    iid = pause("deploys", "deploy-m1", store, on=app)

    worker = Worker(app, store)

    def work() -> int:
        return asyncio.run(worker.run_once())

    assert work() == 0  # nothing to resume: the question is announced
    mails = box.received()
    # ana and bo (ops) get mails of their own with their links; dee (in no group: she may not
    # answer this question) and ops@ (no person) share the plain mail, as without links
    assert sorted(mails) == ["ana@example.com", "bo@example.com", "dee@example.com,ops@example.com"]
    plain = mails["dee@example.com,ops@example.com"]
    assert "/links/" not in plain.get_content()
    assert f"Open it: {url}/sessions/deploy-m1" in plain.get_content()
    ana, bo = _links(mails["ana@example.com"]), _links(mails["bo@example.com"])
    assert sorted(ana) == sorted(bo) == ["Approve", "Decline"]
    assert "each link works once, and answers as you" in mails["ana@example.com"].get_content()
    assert mails["ana@example.com"]["To"] == "ana@example.com"
    ids = {m["Message-ID"] for m in mails.values()}
    assert len(ids) == 3  # each recipient's mail is its own

    with serving(inbox_app(store, on=app), port=port), httpx.Client() as client:
        assert _follow(client, ana["Approve"]) == 200
        assert work() == 1  # ana's vote: 1 of 2
        assert RUNS == []
        assert client.get(ana["Decline"]).status_code == 409  # ana voted: her links are spent
        assert _follow(client, bo["Approve"]) == 200
        assert work() == 1
        assert RUNS == ["deploy prod"]  # once, after the second approval
        assert client.get(bo["Decline"]).status_code == 409
    view = Inbox(store).session("deploy-m1")
    assert [(e.by, e.answer) for e in view.audit] == [("ana", True), ("bo", True)]
    assert view.interrupts == [] and iid not in view.votes
    answered = [m for m in box.received().values() if m["X-Interlude-Event"] == "answered"]
    (shared,) = answered  # the answer is announced in one plain mail to everyone
    assert "/links/" not in shared.get_content()
