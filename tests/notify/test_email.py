"""Email to a real SMTP server (aiosmtpd) on loopback that requires STARTTLS, with a
self-signed certificate the client is told to trust."""

from __future__ import annotations

import asyncio
import ssl
from email import message_from_bytes, policy
from pathlib import Path
from typing import Any

import pytest

from interlude import App, Worker
from interlude.errors import NotificationError
from interlude.notify import Email, notification_id
from interlude.sessions import SQLiteStore
from tests.support import free_port, require_service

from . import notify_app
from .receivers import self_signed


class Mailbox:
    def __init__(self) -> None:
        self.mails: list[tuple[Any, bool]] = []  # (envelope, over TLS)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.mails.append((envelope, session.ssl is not None))
        return "250 OK"


def _smtp(tmp_path: Path, **options: Any) -> tuple[Any, Mailbox, ssl.SSLContext]:
    try:
        from aiosmtpd.controller import Controller
    except ImportError:
        require_service("aiosmtpd is not installed (pip install aiosmtpd)")
    cert, key = self_signed(tmp_path)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    box = Mailbox()
    controller = Controller(
        box, hostname="127.0.0.1", port=free_port(), tls_context=server_tls, **options
    )
    controller.start()
    return controller, box, ssl.create_default_context(cafile=str(cert))


def test_a_question_is_mailed_over_starttls(tmp_path: Path) -> None:
    controller, box, trust = _smtp(tmp_path, require_starttls=True)
    try:
        mail = Email(
            "127.0.0.1",
            controller.port,
            sender="interlude@example.com",
            to=["ops@example.com", "ana@example.com"],
            tls_context=trust,
        )
        app = App(notify=[mail], inbox_url="http://inbox.test")
        app.agent("payer")(notify_app.build)
        store = SQLiteStore(tmp_path / "s.db")
        question = app.start("payer", "s1", store)("Pay gus").interrupts[0]
        asyncio.run(Worker(app, store).run_once())
    finally:
        controller.stop()
    ((envelope, over_tls),) = box.mails
    assert over_tls  # STARTTLS, as the server offered (and required) it
    assert envelope.rcpt_tos == ["ops@example.com", "ana@example.com"]
    msg = message_from_bytes(envelope.original_content, policy=policy.default)
    nid = notification_id("s1", question.id, "asked")
    assert msg["X-Interlude-Notification-Id"] == nid and msg["Message-ID"] == f"<{nid}@interlude>"
    assert msg["Subject"] == "[interlude] a question waits for an answer: approve in s1"
    text = msg.get_content()
    assert 'Tool:     pay {"to": "gus"}' in text
    assert "Open it: http://inbox.test/sessions/s1" in text


def test_a_server_that_refuses_the_address_fails_it_for_good(tmp_path: Path) -> None:
    class Refusing(Mailbox):
        async def handle_RCPT(self, server: Any, session: Any, envelope: Any, *a: Any) -> str:
            return "550 no such user"

    try:
        from aiosmtpd.controller import Controller
    except ImportError:
        require_service("aiosmtpd is not installed (pip install aiosmtpd)")
    controller = Controller(Refusing(), hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        port = controller.port
        plain = Email("127.0.0.1", port, sender="i@example.com", to="nobody@example.com")
        with pytest.raises(NotificationError, match="refused") as refused:
            asyncio.run(plain.send({"id": "x", "event": "asked", "question": {}}))
        assert refused.value.permanent
        login = Email(
            "127.0.0.1",
            port,
            sender="i@example.com",
            to="a@example.com",
            username="u",
            password="p",
        )
        with pytest.raises(NotificationError, match="without TLS") as no_tls:
            asyncio.run(login.send({"id": "x", "event": "asked", "question": {}}))
        assert no_tls.value.permanent  # no password over a plain connection
    finally:
        controller.stop()
