"""One-time answer links: a signed capability to answer one question, once, as one person,
until a deadline (issue 39).

A link is a path on ``interlude serve``, ``/links/<token>``. The token is ``<payload>.<mac>``,
both base64url without padding: the payload is the compact JSON ``[1, session id, question id,
binding, name, groups, made at, expires at, choice?]`` and the MAC is HMAC-SHA256 of it under
the link secret, which whoever makes links (an app, a worker's notifier) shares with the server
that checks them (compared in constant time). ``binding`` ties the link to the question as it
was shown: the first 16 bytes of its ``shown`` digest, so a question that changed is not the
one the link answers. ``choice`` presets the answer of a yes/no question (``true`` approves,
``false`` declines); without it the link opens the question's answer form.

A link decides nothing about the answer itself: the door that serves it records the answer
through the inbox's answer path (``InboxBackend.answer``) as the person it names, with their
groups (for a person the server's tokens name, only those of them the server still counts
them in: :func:`narrowed`), where every answer rule applies. What it adds are its own
refusals: a link that was forged or changed, has expired, was made for another version of the
question, or whose person has answered the question since it was made (a vote counted or
waiting, an answer waiting or applied: so a link is spent even when the same question is asked
again later).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ConfigurationError, ResumeInputError
from ._people import Person

if TYPE_CHECKING:
    from .._interrupt import Interrupt
    from ._inbox import SessionView

__all__ = [
    "LINK_PATH",
    "LINK_SECRET_ENV",
    "AnswerLink",
    "AnswerLinks",
    "LinkProblem",
    "check_link",
    "link_key",
    "load_link_secret",
    "make_link",
    "narrowed",
    "read_link",
    "yes_no",
]

LINK_SECRET_ENV = "INTERLUDE_LINK_SECRET"
"""The variable the command line reads the link secret from."""
LINK_PATH = "/links/"
"""Where links live on ``interlude serve``: ``/links/<token>``."""
MIN_SECRET = 16
"""The shortest link secret accepted (bytes)."""
DEFAULT_LIFETIME = 24 * 3600.0
"""How long a link mailed by a notifier works (seconds), unless its question's deadline comes
first."""
_VERSION = 1
_DOMAIN = b"interlude answer link v1\x00"
"""What the MAC covers before the payload: a link's MAC is never another HMAC's."""
_LONGEST = 4096
"""Longer tokens are not read at all."""


def link_key(secret: bytes | str) -> bytes:
    """The link secret as bytes; ConfigurationError if it is shorter than 16 bytes."""
    key = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)
    if len(key) < MIN_SECRET:
        raise ConfigurationError(
            f"the link secret must be at least {MIN_SECRET} bytes (make one with: python3 -c "
            "'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return key


def load_link_secret() -> bytes | None:
    """The link secret from ``$INTERLUDE_LINK_SECRET`` (None when it is not set);
    ConfigurationError when it is too short."""
    text = os.environ.get(LINK_SECRET_ENV, "").strip()
    if not text:
        return None
    try:
        return link_key(text)
    except ConfigurationError as exc:
        raise ConfigurationError(f"${LINK_SECRET_ENV}: {exc}") from None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, payload: str) -> str:
    return _b64(hmac.new(key, _DOMAIN + payload.encode("ascii"), hashlib.sha256).digest())


def binding(question: Interrupt) -> str:
    """What ties a link to ``question`` as shown: the first 16 bytes of its digest (SHA-256 of
    what it shows). UnicodeError when its data is not Unicode text (no digest can be made)."""
    digest = question.digest.removeprefix("sha256:")
    return _b64(bytes.fromhex(digest)[:16])


def yes_no(question: Interrupt) -> bool:
    """Whether ``question`` is answered yes or no (``True`` / ``False``): a tool approval, a
    boolean answer schema, or none (the inbox offers Approve / Decline for each)."""
    from .._agent import is_approval

    schema = question.response_schema
    return is_approval(question) or schema is None or schema.get("type") == "boolean"


def as_person(person: Person | str) -> Person:
    """``person`` (a name: in no group) with its name as the audit records it."""
    from .._agent import check_by

    if isinstance(person, str):
        person = Person(person)
    if not isinstance(person, Person):
        raise ResumeInputError(f"a link is made for a Person (name, groups), got {person!r}")
    return Person(check_by(person.name), tuple(person.groups))


def seconds(expires_in: float | timedelta) -> float:
    """``expires_in`` in seconds; ResumeInputError unless it is a finite number > 0."""
    value = expires_in.total_seconds() if isinstance(expires_in, timedelta) else expires_in
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ResumeInputError(f"expires_in is a number of seconds > 0, got {expires_in!r}")
    return float(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerLink:
    """A link as read back from its token: which question, for whom, until when."""

    token: str
    session_id: str
    interrupt_id: str
    binding: str
    person: Person
    made_at: float
    expires_at: float
    choice: bool | None = None
    """The answer a yes/no link gives (None: the link opens the answer form)."""
    dropped: tuple[str, ...] = ()
    """Groups the link names that the server serving it does not count its person in now
    (:func:`narrowed`): they are not in ``person.groups``."""

    @property
    def path(self) -> str:
        """The link's path on ``interlude serve``."""
        return LINK_PATH + self.token

    def expired(self, now: float) -> bool:
        return now >= self.expires_at


def make_link(
    key: bytes,
    session_id: str,
    question: Interrupt,
    person: Person,
    *,
    now: float,
    lifetime: float,
    choice: bool | None = None,
) -> AnswerLink:
    """A link made ``now`` to answer ``question`` of ``session_id`` as ``person`` for
    ``lifetime`` seconds (never past the question's deadline), signed with ``key``; with
    ``choice``, the yes/no answer it gives (ResumeInputError for a question that is not
    yes/no)."""
    if choice is not None and not yes_no(question):
        raise ResumeInputError(
            f"question {question.name!r} ({question.id}) is not a yes/no question: its link "
            "opens its answer form (choice=None)"
        )
    expires_at = now + lifetime
    if question.expires_at is not None:
        expires_at = min(expires_at, question.expires_at)
    try:
        bound = binding(question)
    except UnicodeError:
        raise ResumeInputError(
            f"question {question.id!r} holds text that is not Unicode: no link can be bound to it"
        ) from None
    fields: list[Any] = [_VERSION, session_id, question.id, bound, person.name]
    fields += [list(person.groups), int(now), int(expires_at)]
    if choice is not None:
        fields.append(choice)
    text = json.dumps(fields, separators=(",", ":"))  # ASCII: any stored text can be sent
    payload = _b64(text.encode("ascii"))
    return AnswerLink(
        token=f"{payload}.{_mac(key, payload)}",
        session_id=session_id,
        interrupt_id=question.id,
        binding=bound,
        person=person,
        made_at=float(int(now)),
        expires_at=float(int(expires_at)),
        choice=choice,
    )


def read_link(key: bytes, token: str) -> AnswerLink | None:
    """The link ``token`` is, if ``key`` signed it exactly as it is (None: forged, changed,
    cut short, or not a link at all). Whether it has expired is :meth:`AnswerLink.expired`."""
    if not isinstance(token, str) or len(token) > _LONGEST or not token.isascii():
        return None
    if token.count(".") != 1:
        return None
    payload, mac = token.split(".")
    if not hmac.compare_digest(mac, _mac(key, payload)):
        return None
    try:
        fields = json.loads(_unb64(payload).decode("utf-8"))
    except ValueError:
        return None
    return _fields(token, fields)


def _fields(token: str, fields: object) -> AnswerLink | None:
    """The link a verified payload describes (None: a shape this version does not make)."""
    if not isinstance(fields, list) or len(fields) not in (8, 9) or fields[0] != _VERSION:
        return None
    _, session_id, interrupt_id, bound, name, groups, made_at, expires_at, *rest = fields
    texts = (session_id, interrupt_id, bound, name)
    if not all(isinstance(t, str) for t in texts) or not isinstance(groups, list):
        return None
    if not all(isinstance(g, str) for g in groups):
        return None
    if type(made_at) is not int or type(expires_at) is not int:
        return None
    choice = rest[0] if rest else None
    if rest and not isinstance(choice, bool):
        return None
    return AnswerLink(
        token=token,
        session_id=session_id,
        interrupt_id=interrupt_id,
        binding=bound,
        person=Person(name, tuple(groups)),
        made_at=float(made_at),
        expires_at=float(expires_at),
        choice=choice,
    )


def narrowed(link: AnswerLink, known: Person | None) -> AnswerLink:
    """``link`` with the groups it answers with on a server that knows its person as
    ``known`` (the server's people, looked up by the link's name; None: a stranger to it).

    For a person the server knows, the link's groups narrowed to those the server counts
    them in now (the groups of their tokens): a link never answers with a group that either
    its maker or the server's operator did not give, so taking someone out of a group on the
    server takes it out of the links already made for them, and a link minted with groups
    the server does not give them gains nothing. The groups it loses are ``dropped``. A
    person the server does not know (no inbox token: whom links are for) keeps the link's
    groups, its maker's signed word."""
    if known is None:
        return link
    groups = link.person.groups
    kept = tuple(g for g in groups if g in known.groups)
    if kept == groups:
        return link
    dropped = tuple(g for g in groups if g not in known.groups)
    return replace(link, person=Person(link.person.name, kept), dropped=dropped)


ProblemCode = Literal["forged", "expired", "gone", "changed", "used"]


@dataclass(frozen=True, slots=True)
class LinkProblem:
    """Why a link cannot answer now: ``forged`` (not made with this secret, or changed),
    ``expired``, ``gone`` (the question waits no more: answered, settled, withdrawn),
    ``changed`` (made for another version of the question), ``used`` (its person answered
    the question since the link was made)."""

    code: ProblemCode
    message: str


def _expired(link: AnswerLink) -> LinkProblem:
    """The refusal of an expired link, saying when it expired."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(link.expires_at))
    return LinkProblem("expired", f"This link expired at {when}. Nothing was done.")


def check_link(link: AnswerLink, view: SessionView, now: float) -> Interrupt | LinkProblem:
    """The pending question ``link`` answers in ``view`` (its session as it stands now), or
    why the link cannot answer it. The answer rules (groups, quorum, first answer wins) are
    not checked here: recording the answer checks them."""
    from .._agent import same_person

    if link.expired(now):
        return _expired(link)
    question = next((i for i in view.interrupts if i.id == link.interrupt_id), None)
    if question is None:
        settled = [e for e in view.audit if e.interrupt_id == link.interrupt_id and e.settles]
        why = ""
        if settled:
            last = settled[-1]
            why = " (its deadline passed)" if last.expired else f" (answered by {last.by})"
        return LinkProblem(
            "gone", f"This question no longer waits for an answer{why}. Nothing was done."
        )
    try:
        same = hmac.compare_digest(binding(question), link.binding)
    except UnicodeError:
        same = False
    if not same:
        return LinkProblem(
            "changed",
            "This link was made for another version of this question: it changed since the "
            "link was made. Nothing was done.",
        )
    name = link.person.name
    voters = view.votes.get(question.id, (None, ()))[1]
    recorded = [r.by for r in view.recorded if r.interrupt_id == question.id]
    applied = [  # answers applied since the link was made (an earlier asking of it too)
        e.by for e in view.audit if e.interrupt_id == question.id and e.at >= link.made_at
    ]
    if same_person(name, [*voters, *recorded, *applied]):
        return LinkProblem(
            "used", f"{name} has answered this question already: a link answers once."
        )
    return question


class AnswerLinks:
    """Makes one-time answer links for notifications: ``people`` maps each recipient (an
    e-mail address) to the person their links answer as; ``inbox_url`` is where ``interlude
    serve`` is reached; a link works ``expires_in`` seconds (24 hours) from when it is made,
    never past its question's deadline. Give it to :class:`~interlude.notify.Email`
    (``links=``): each recipient with a person then gets their own mail with their own links."""

    def __init__(
        self,
        secret: bytes | str,
        inbox_url: str,
        *,
        people: Mapping[str, Person | str],
        expires_in: float | timedelta = DEFAULT_LIFETIME,
        clock: Callable[[], float] | None = None,
    ) -> None:
        from urllib.parse import urlsplit

        self._key = link_key(secret)
        parts = urlsplit(inbox_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigurationError(f"inbox_url is an http(s) URL, got {inbox_url!r}")
        self.inbox_url = inbox_url.rstrip("/")
        try:
            self.people = {address.lower(): as_person(p) for address, p in people.items()}
            self.expires_in = seconds(expires_in)
        except ResumeInputError as exc:
            raise ConfigurationError(f"AnswerLinks: {exc}") from None
        self.clock: Callable[[], float] = clock or time.time

    def __repr__(self) -> str:
        return f"AnswerLinks({self.inbox_url!r}, people={sorted(self.people)!r})"

    def link(
        self,
        session_id: str,
        question: Interrupt,
        person: Person | str,
        *,
        choice: bool | None = None,
    ) -> str:
        """The URL of a link to answer ``question`` as ``person`` (with ``choice``: the
        yes/no answer it gives)."""
        made = make_link(
            self._key,
            session_id,
            question,
            as_person(person),
            now=self.clock(),
            lifetime=self.expires_in,
            choice=choice,
        )
        return self.inbox_url + made.path

    def for_recipient(
        self, recipient: str, session_id: str, question: Mapping[str, Any]
    ) -> list[tuple[str, str]]:
        """The (label, URL) links a mail to ``recipient`` carries for ``question`` (its
        ``Interrupt.to_dict()``): "Approve" and "Decline" for a yes/no question, "Answer" for
        any other; none when the recipient names no person, the person may not answer it now
        (their groups), or it cannot be read."""
        from .._interrupt import Interrupt
        from ..errors import StateFormatError

        person = self.people.get(recipient.lower())
        if person is None:
            return []
        try:
            asked = Interrupt.from_dict(dict(question))
        except (StateFormatError, TypeError, ValueError):
            return []
        if not asked.may_answer(person.groups, self.clock()):
            return []
        try:
            if yes_no(asked):
                return [
                    ("Approve", self.link(session_id, asked, person, choice=True)),
                    ("Decline", self.link(session_id, asked, person, choice=False)),
                ]
            return [("Answer", self.link(session_id, asked, person))]
        except ResumeInputError:  # text that is not Unicode: no link can be bound to it
            return []
