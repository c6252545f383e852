"""One-time answer links in mail: a worker's e-mail notifier, given an ``AnswerLinks``, mails
each recipient it knows a person for their own Approve and Decline links; a real SMTP server
(aiosmtpd) receives the mails, the test follows the links from them against a real uvicorn
serving the links door, and two people's links cast the two votes a deploy needs. Links go
over TLS only: a server that offers no STARTTLS gets the plain mail, without links, unless
plain SMTP was chosen (``starttls=False``)."""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
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
        self.over_tls: list[bool] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.mails.append(envelope)
        self.over_tls.append(session.ssl is not None)
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
        starttls=False,  # a relay on this machine, plain SMTP on purpose: links go out anyway
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


def _mailer(port: int, **options: Any) -> Email:
    people = {"ana@example.com": ANA, "bo@example.com": BO}
    return Email(
        "127.0.0.1",
        port,
        sender="agents@example.com",
        to=["ana@example.com", "bo@example.com", "ops@example.com"],
        links=AnswerLinks(SECRET, "http://inbox.test", people=people, expires_in=3600),
        **options,
    )


def _ask(mail: Email, store: str) -> None:
    """Ask the deploy question and have a worker mail it."""
    app = agents(App(notify=[mail], inbox_url="http://inbox.test"))
    pause("deploys", "deploy-m2", store, on=app)
    assert asyncio.run(Worker(app, store).run_once()) == 0


def test_without_tls_the_links_are_left_out(
    tmp_path: Path, mailbox: tuple[Mailbox, int], caplog: pytest.LogCaptureFixture
) -> None:
    box, smtp_port = mailbox  # a server that offers no STARTTLS (or had it stripped)
    with caplog.at_level(logging.WARNING, logger="interlude.notify"):
        _ask(_mailer(smtp_port), f"sqlite:///{tmp_path / 'plain.db'}")
    mails = box.received()
    # everyone gets the plain mail: the notification is delivered, its links are not
    assert sorted(mails) == ["ana@example.com,bo@example.com,ops@example.com"]
    (plain,) = mails.values()
    assert "/links/" not in plain.get_content() and "Answer here" not in plain.get_content()
    assert "Open it: http://inbox.test/sessions/deploy-m2" in plain.get_content()
    assert box.over_tls == [False]
    warned = [r.getMessage() for r in caplog.records if r.name == "interlude.notify"]
    assert any(
        "offers no STARTTLS" in m and "without its one-time answer links" in m for m in warned
    )


def test_starttls_required_fails_without_tls(mailbox: tuple[Mailbox, int]) -> None:
    from interlude.errors import NotificationError

    box, smtp_port = mailbox
    mail = _mailer(smtp_port, starttls=True)
    message = {"id": "n1", "event": "asked", "session_id": "s", "question": {}}
    with pytest.raises(NotificationError, match="does not offer STARTTLS") as failed:
        asyncio.run(mail.send(message))
    assert failed.value.permanent
    assert box.mails == []


def test_over_starttls_the_links_go_out(tmp_path: Path) -> None:
    try:
        from aiosmtpd.controller import Controller
    except ImportError:
        require_service("aiosmtpd is not installed (pip install aiosmtpd)")
    from tests.notify.receivers import self_signed

    cert, key = self_signed(tmp_path)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    box = Mailbox()
    controller = Controller(box, hostname="127.0.0.1", port=free_port(), tls_context=server_tls)
    controller.start()
    try:
        trust = ssl.create_default_context(cafile=str(cert))
        _ask(_mailer(controller.port, tls_context=trust), f"sqlite:///{tmp_path / 'tls.db'}")
    finally:
        controller.stop()
    mails = box.received()
    assert sorted(mails) == ["ana@example.com", "bo@example.com", "ops@example.com"]
    assert sorted(_links(mails["ana@example.com"])) == ["Approve", "Decline"]
    assert sorted(_links(mails["bo@example.com"])) == ["Approve", "Decline"]
    assert "/links/" not in mails["ops@example.com"].get_content()
    assert box.over_tls == [True, True, True]
