"""Email: a notification sent as a plain-text mail over SMTP (smtplib, in a thread), with
STARTTLS whenever the server offers it. Given a maker of one-time answer links (``links=``,
``interlude.operate.AnswerLinks``), each recipient it names a person for gets a mail of their
own with their own links (one per choice of a yes/no question), over TLS only unless plain
SMTP was chosen (``starttls=False``): without it the links are left out."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import ConfigurationError, NotificationError

if TYPE_CHECKING:
    import ssl
    from email.message import EmailMessage

__all__ = ["AnswerLinkMaker", "Email", "email_text"]

_log = logging.getLogger("interlude.notify")

_OPEN = frozenset({"asked", "deadline_near", "escalated"})
"""The events about a question that still waits: their mails may carry answer links."""


@runtime_checkable
class AnswerLinkMaker(Protocol):
    """What makes the one-time answer links a mail carries (``interlude.operate.AnswerLinks``):
    the ``(label, URL)`` links for ``recipient`` (an address) to answer ``question`` (its
    ``Interrupt.to_dict()``) of ``session_id``; none for a recipient it knows no person for."""

    def for_recipient(
        self, recipient: str, session_id: str, question: Mapping[str, Any]
    ) -> Sequence[tuple[str, str]]: ...


_SAYS = {
    "asked": "a question waits for an answer",
    "deadline_near": "a question's deadline is near",
    "escalated": "a question was escalated",
    "expired": "a question's deadline passed",
    "answered": "a question was answered",
}


def _when(t: object) -> str:
    if isinstance(t, int | float) and not isinstance(t, bool):
        return datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")
    return "-"


def email_text(
    message: Mapping[str, Any], links: Sequence[tuple[str, str]] = ()
) -> tuple[str, str]:
    """(subject, plain-text body) of a notification; ``links`` are the recipient's one-time
    answer links, (label, URL)."""
    q = message.get("question") or {}
    event = str(message.get("event"))
    session = message.get("session_id")
    subject = f"[interlude] {_SAYS.get(event, event)}: {q.get('name')} in {session}"
    lines = [
        f"Interlude: {_SAYS.get(event, event)}.",
        "",
        f"Session:  {session}" + (f" (agent {message['agent']})" if message.get("agent") else ""),
        f"Question: {q.get('name')} ({q.get('id')})",
    ]
    tool = q.get("tool_use")
    if isinstance(tool, dict):
        lines.append(f"Tool:     {tool.get('name')} {json.dumps(tool.get('input'))}")
    if q.get("reason") is not None:
        lines.append(f"Reason:   {json.dumps(q.get('reason'))}")
    lines.append(f"Asked:    {_when(q.get('raised_at'))}")
    if q.get("expires_at") is not None:
        lines.append(f"Deadline: {_when(q.get('expires_at'))}")
    answer = message.get("answer")
    if isinstance(answer, dict):
        lines.append(f"Answer:   {json.dumps(answer.get('answer'))} by {answer.get('by')}")
    if links:
        lines += ["", "Answer here (each link works once, and answers as you):"]
        lines += [f"  {label}: {url}" for label, url in links]
    if message.get("url"):
        lines += ["", f"Open it: {message['url']}"]
    lines += ["", f"Notification id: {message.get('id')}"]
    return subject, "\n".join(lines) + "\n"


class Email:
    """Mail each notification to ``to`` from ``sender`` through the SMTP server at
    ``host:port``.

    STARTTLS is used whenever the server offers it (``starttls=True`` requires it: a server
    that does not offer it fails the delivery for good; ``False`` never uses it), verified with
    ``tls_context`` (default: the system's CAs). ``username`` and ``password`` log in, only over
    TLS. The mail is plain text: what the question shows, its deadline, the answer (for
    ``answered``) and the link to its inbox page; its ``Message-ID`` is made from the
    notification's id (mail readers de-duplicate by it) and ``X-Interlude-Notification-Id``
    carries it too. A refused address or another 5xx answer fails it for good; a 4xx answer or
    a connection error is tried again later.

    With ``links`` (``interlude.operate.AnswerLinks``), a mail about a question that still
    waits (asked, deadline near, escalated) goes to each recipient the maker names a person for
    on its own, with that person's one-time answer links ("Approve" and "Decline" for a yes/no
    question, "Answer" for any other), its ``Message-ID`` made from the notification's id and
    the address; the other recipients share the plain mail, as without ``links``. A link is a
    credential, so links go over TLS only, as a password does: when the server offers no
    STARTTLS (or it was stripped on the way) the notification goes to everyone as the plain
    mail, without links, and a warning is logged; ``starttls=True`` fails the delivery
    instead, and ``starttls=False`` (plain SMTP chosen on purpose, e.g. a relay on this
    machine) sends the links without TLS.
    """

    def __init__(
        self,
        host: str,
        port: int = 25,
        *,
        sender: str,
        to: str | Sequence[str],
        username: str | None = None,
        password: str | None = None,
        starttls: bool | None = None,
        tls_context: ssl.SSLContext | None = None,
        timeout: float = 10.0,
        links: AnswerLinkMaker | None = None,
    ) -> None:
        recipients = (to,) if isinstance(to, str) else tuple(to)
        if not host or not recipients or not sender or "@" not in sender:
            raise ConfigurationError(
                f"Email needs a host, a sender address and recipients, got {host!r}, "
                f"{sender!r} and {to!r}"
            )
        if (username is None) != (password is None):
            raise ConfigurationError("Email: give username and password together, or neither")
        if links is not None and not isinstance(links, AnswerLinkMaker):
            raise ConfigurationError(
                f"Email: links= makes answer links (for_recipient), got {links!r}"
            )
        self.host, self.port = host, int(port)
        self.sender, self.to = sender, recipients
        self.username, self.password = username, password
        self.starttls = starttls
        self.tls_context = tls_context
        self.timeout = timeout
        self.links = links
        self.name = f"email via {host}:{port} to {', '.join(recipients)}"

    def __repr__(self) -> str:
        return f"Email({self.host!r}, {self.port!r}, to={self.to!r})"

    async def send(self, message: Mapping[str, Any]) -> None:
        """Deliver ``message``; NotificationError if it was not (``permanent`` when trying
        again cannot help)."""
        await asyncio.to_thread(self._send, message)

    def _mails(
        self, message: Mapping[str, Any], *, tls: bool
    ) -> list[tuple[EmailMessage, list[str]]]:
        """The mails a notification makes, each with its recipients: one for everyone, or,
        with ``links``, one per recipient who has links and one for all the others. Without
        ``tls`` (the connection has none), no links unless ``starttls=False`` chose that."""
        question = message.get("question")
        session = message.get("session_id")
        per: dict[str, Sequence[tuple[str, str]]] = {}
        if (
            self.links is not None
            and message.get("event") in _OPEN
            and isinstance(question, Mapping)
            and isinstance(session, str)
        ):
            for address in self.to:
                made = self.links.for_recipient(address, session, question)
                if made:
                    per[address] = made
        if per and not tls and self.starttls is not False:
            _log.warning(
                "%s: the server offers no STARTTLS, so notification %s is mailed without its "
                "one-time answer links (they go over TLS only; starttls=False sends them over "
                "plain SMTP)",
                self.name,
                message.get("id"),
            )
            per = {}
        plain = [a for a in self.to if a not in per]
        mails = [(self._mail(message, plain), plain)] if plain else []
        for address, made in per.items():
            mails.append((self._mail(message, [address], made), [address]))
        return mails

    def _mail(
        self,
        message: Mapping[str, Any],
        to: Sequence[str],
        links: Sequence[tuple[str, str]] = (),
    ) -> EmailMessage:
        from email.message import EmailMessage
        from email.policy import SMTP
        from email.utils import formatdate

        subject, text = email_text(message, links)
        mail = EmailMessage(policy=SMTP.clone(max_line_length=200))  # ids unfolded
        mail["From"] = self.sender
        mail["To"] = ", ".join(to)
        mail["Subject"] = subject
        mail["Date"] = formatdate(localtime=True)
        mid = str(message.get("id"))
        if links:  # a mail of this recipient's own: its own id, the same at every retry
            mid += "." + hashlib.sha256(to[0].lower().encode("utf-8")).hexdigest()[:16]
        mail["Message-ID"] = f"<{mid}@interlude>"
        mail["X-Interlude-Notification-Id"] = str(message.get("id"))
        mail["X-Interlude-Event"] = str(message.get("event"))
        mail.set_content(text)
        return mail

    def _send(self, message: Mapping[str, Any]) -> None:
        import smtplib
        import ssl

        try:
            with smtplib.SMTP(self.host, self.port, timeout=self.timeout) as smtp:
                smtp.ehlo()
                tls = smtp.has_extn("starttls") and self.starttls is not False
                if self.starttls and not tls:
                    raise NotificationError(
                        f"{self.name}: the server does not offer STARTTLS", permanent=True
                    )
                if tls:
                    smtp.starttls(context=self.tls_context or ssl.create_default_context())
                    smtp.ehlo()
                if self.username is not None:
                    if not tls:
                        raise NotificationError(
                            f"{self.name}: will not send a password without TLS", permanent=True
                        )
                    smtp.login(self.username, self.password or "")
                for mail, to in self._mails(message, tls=tls):
                    smtp.send_message(mail, to_addrs=to)
        except smtplib.SMTPRecipientsRefused as exc:
            raise NotificationError(
                f"{self.name}: refused {sorted(exc.recipients)}", permanent=True
            ) from exc
        except smtplib.SMTPResponseException as exc:
            why = f"{self.name}: {exc.smtp_code} {exc.smtp_error!r}"
            raise NotificationError(why, permanent=exc.smtp_code >= 500) from exc
        except (OSError, smtplib.SMTPException) as exc:  # refused, timed out, TLS failed
            raise NotificationError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
