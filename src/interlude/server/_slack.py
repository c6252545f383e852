"""Slack's door: ``POST /channels/slack/actions``, where Slack sends the clicks on the buttons of
a question that :class:`interlude.notify.Slack` posted.

A request is taken only when Slack signed it (``X-Slack-Signature``: ``v0=`` and the hex
HMAC-SHA256, under the app's signing secret, of ``v0:{X-Slack-Request-Timestamp}:{raw body}``,
compared in constant time, the timestamp within five minutes of now), before its body is
parsed. The Slack user is then looked up among the configured people (a name and groups), and
the answer the button carries is recorded through the inbox's backend, as ``by`` that person:
who may answer, the quorum, the first answer winning and the digest of what was shown are the
floor's rules, never decided here. The message is then updated (``chat.update``) to say who
answered, or why the answer was refused. A replayed request is refused by the same rules (the
question is answered, or that person already voted), so no replay cache is kept.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, InterludeError, StoreUnavailableError, refusal_code
from ..notify import SlackAnswer
from ..operate import MIN_TOKEN, Person, people

if TYPE_CHECKING:
    from slack_sdk import WebClient
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import BaseRoute

    from ..operate import App, InboxBackend, People

__all__ = [
    "PATH",
    "SIGNING_ENV",
    "USERS_ENV",
    "WINDOW",
    "admits",
    "load_slack_users",
    "signature_problem",
    "slack_door",
    "slack_door_from_env",
    "slack_people",
]

PATH = "/channels/slack/actions"
"""Where Slack's interactivity requests are taken (the app's Request URL ends with it)."""
WINDOW = 300.0
"""How far (seconds) a request's timestamp may be from now: Slack's five minutes."""
SIGNING_ENV = "INTERLUDE_SLACK_SIGNING_SECRET"
USERS_ENV = "INTERLUDE_SLACK_USERS"
_TOKEN_ENV = "INTERLUDE_SLACK_TOKEN"
_API_ENV = "INTERLUDE_SLACK_API_URL"

_log = logging.getLogger("interlude.slack")

_REFUSED = {
    "unknown_user": "is not a person this inbox knows",
    "not_allowed": "is not in a group that may answer this question",
    "already_answered": "was too late: the question was already answered",
    "not_paused": "was too late: the question no longer waits",
    "unknown_interrupt": "was too late: the question no longer waits",
    "expired": "was too late: the question's deadline passed",
    "stale": "answered a question that changed since this message was posted",
    "busy": "could not answer yet: another answer is being applied, try again in a moment",
    "session": "could not answer: the session is gone",
    "forged": "could not answer: the session's pause does not verify",
}
"""What the message says of a refused click, by refusal code (else the error's own words)."""
_CLOSED = frozenset(
    {"already_answered", "not_paused", "unknown_interrupt", "expired", "stale", "session"}
)
"""Refusals after which the question cannot be answered from this message: buttons go."""


def slack_door(
    signing_secret: str | bytes,
    *,
    users: Mapping[str, Any],
    client: WebClient | None = None,
    token: str | None = None,
    base_url: str | None = None,
    window: float = WINDOW,
    clock: Callable[[], float] = time.time,
) -> SlackDoor:
    """The door for ``create_app(doors=[*DEFAULT_DOORS, slack_door(...)])``: ``POST
    /channels/slack/actions`` answers questions from the buttons of their Slack messages.

    ``signing_secret`` is the Slack app's (Basic Information: Signing Secret); ``users`` maps
    each Slack user id to the person they answer as, in the forms tokens take (``"ana"``, or
    ``{"name": "ana", "groups": ["ops"]}``: a bare name is in no group); anyone else is
    refused. The message is updated through ``client`` (a ``slack_sdk.WebClient``), or one
    made for ``token`` (and ``base_url``); without either, answers are taken and the message
    is left as it is. ``window`` is how old (or early) a request's timestamp may be.
    """
    secret = signing_secret.encode() if isinstance(signing_secret, str) else signing_secret
    if not secret:
        raise ConfigurationError("slack_door needs the Slack app's signing secret")
    if not window > 0:
        raise ConfigurationError(f"slack_door: window is seconds > 0, got {window!r}")
    by_user = slack_people(users)
    if not by_user:
        raise ConfigurationError("slack_door needs users: {slack_user_id: person, ...}")
    if client is None and token:
        client = _client(token, base_url)
    return SlackDoor(secret, by_user, client, window, clock)


class SlackDoor:
    """The Slack door (a ``server._doors.Door``). ``admits`` lets a request to :data:`PATH`
    have its body read (within the server's size and time limits) without a bearer token or
    cookie: Slack sends neither, and the door checks Slack's signature over the raw body
    before it parses anything, answering a bad one with its own refusal code."""

    def __init__(
        self,
        secret: bytes,
        users: Mapping[str, Person],
        client: WebClient | None,
        window: float,
        clock: Callable[[], float],
    ) -> None:
        self._secret, self._users, self._client = secret, users, client
        self._window, self._clock = window, clock

    def __call__(
        self, app: App | None, backend: InboxBackend, known: People, public_url: str | None
    ) -> list[BaseRoute]:
        from starlette.routing import Route

        actions = _Actions(self._secret, self._users, self._client, self._window, self._clock)

        async def endpoint(request: Request) -> Response:
            return await actions.handle(request, backend)

        return [Route(PATH, endpoint, methods=["POST"])]

    def admits(self, path: str, headers: Mapping[str, str]) -> bool:
        return path == PATH


def slack_door_from_env(environ: Mapping[str, str] = os.environ) -> SlackDoor | None:
    """The door ``$INTERLUDE_SLACK_SIGNING_SECRET`` configures (None when it is not set), its
    people from ``$INTERLUDE_SLACK_USERS`` (a JSON file's path, or ``U123=ana:ops+leads,...``),
    the message updated with ``$INTERLUDE_SLACK_TOKEN`` through ``$INTERLUDE_SLACK_API_URL``
    (default Slack's)."""
    secret = environ.get(SIGNING_ENV, "").strip()
    if not secret:
        return None
    return slack_door(
        secret,
        users=load_slack_users(environ.get(USERS_ENV, "")),
        token=environ.get(_TOKEN_ENV, "").strip() or None,
        base_url=environ.get(_API_ENV, "").strip() or None,
    )


def load_slack_users(text: str) -> dict[str, Any]:
    """Slack users from inline JSON or a JSON file's path (``{"U123": "ana", "U456": {"name":
    "bo", "groups": ["ops"]}}``), or from ``U123=ana,U456=bo:ops+leads`` (groups after a colon,
    joined by ``+``), checked as tokens' people are (ConfigurationError)."""
    text = text.strip()
    if text.startswith("{") or os.path.isfile(text):
        data = _json_users(text)
        slack_people(data)
        return data
    users: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        user, sep, who = part.partition("=")
        if not sep:
            raise ConfigurationError(f"${USERS_ENV}: {part[:40]!r} is not U123=name[:groups]")
        name, colon, groups = who.strip().partition(":")
        users[user.strip()] = (
            {"name": name.strip(), "groups": groups.split("+")} if colon else name.strip()
        )
    slack_people(users)
    return users


def _json_users(text: str) -> dict[str, Any]:
    """The JSON object ``text`` holds, or the file it names holds."""
    try:
        if text.startswith("{"):
            data = json.loads(text)
        else:
            with open(text, encoding="utf-8") as f:
                data = json.load(f)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read the Slack users {text[:60]!r}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigurationError("the Slack users are one object {slack_user_id: person, ...}")
    return data


def slack_people(users: Mapping[str, Any]) -> dict[str, Person]:
    """Each Slack user id's person, checked exactly as the people of tokens are (names that
    may answer, printable groups)."""
    out: dict[str, Person] = {}
    for user, value in users.items():
        if not isinstance(user, str) or not user.isalnum():
            raise ConfigurationError(f"a Slack user id is letters and digits, got {user!r}")
        if isinstance(value, Person):
            value = {"name": value.name, "groups": list(value.groups)}
        # The tokens' own check, on a stand-in key as long as a token must be.
        key = f"slack:{user}".ljust(MIN_TOKEN, ".")
        out[user] = people({key: value}, f"Slack user {user!r}")[key]
    return out


def _client(token: str, base_url: str | None) -> WebClient:
    try:
        from slack_sdk import WebClient
    except ImportError:  # pragma: no cover - depends on the environment
        raise ConfigurationError(
            "the Slack door needs slack_sdk: pip install 'interlude-agents[slack]'"
        ) from None
    return WebClient(token=token, base_url=base_url or WebClient.BASE_URL)


def signature_problem(
    secret: bytes,
    timestamp: str | None,
    signature: str | None,
    body: bytes,
    now: float,
    window: float,
) -> str | None:
    """Why a request is not Slack's (None: it is): a header missing, a timestamp outside the
    window, or a signature that is not ``v0=`` + hex HMAC-SHA256 of ``v0:{timestamp}:{body}``."""
    if not timestamp or not signature:
        return "unsigned: X-Slack-Request-Timestamp and X-Slack-Signature are required"
    if not _fresh(timestamp, now, window):
        return f"stale: the request's timestamp is not within {window:g} seconds of now"
    base = b"v0:" + timestamp.encode("ascii") + b":" + body
    expected = "v0=" + hmac.new(secret, base, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode("ascii"), signature.encode("utf-8", "replace")):
        return "forged: the signature does not verify"
    return None


def _fresh(timestamp: str, now: float, window: float) -> bool:
    """Whether ``timestamp`` is whole seconds (ASCII digits) within ``window`` of ``now``."""
    ok = timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 12
    return ok and abs(now - int(timestamp)) <= window


def admits(headers: Mapping[str, str], now: float | None = None, window: float = WINDOW) -> bool:
    """Whether a request to :data:`PATH` may have its body read before it names anyone: it
    carries both of Slack's signature headers and a timestamp within ``window`` of now (the
    signature itself is checked over the body, by the door)."""
    timestamp = headers.get("x-slack-request-timestamp") or ""
    clock = time.time() if now is None else now
    return bool(headers.get("x-slack-signature")) and _fresh(timestamp, clock, window)


@dataclass(frozen=True, slots=True)
class _Click:
    """What came of a click: who clicked (a Slack mention, and their person when known), and
    why the answer was refused (None: it was taken)."""

    click: SlackAnswer
    who: str
    person: Person | None
    refused: tuple[str, str] | None

    def body(self) -> dict[str, Any]:
        """The reply to Slack (for logs and tests: Slack reads only the status)."""
        if self.refused is None and self.person is not None:
            return {"ok": True, "by": self.person.name, "session": self.click.session_id}
        code, error = self.refused or ("error", "")
        return {"ok": False, "code": code, "error": error}

    def status(self, standing: str | None, settled: bool, voters: list[str]) -> tuple[str, bool]:
        """(status line, settled) of the message after this click, given where the question
        stands: the standing, and under it why this click was refused (unless the person's own
        answer is the one that stands: a double click)."""
        click = self.click
        if self.refused is None:
            line = f"*{_escape(click.words(click.answer).capitalize())}* by {self.who}"
            return standing or line, settled
        code, error = self.refused
        if standing and self.person is not None and self.person.name in voters:
            return standing, settled
        note = f"{self.who} {_REFUSED.get(code) or 'could not answer: ' + _escape(error[:200])}"
        return (f"{standing}\n{note}" if standing else note), settled or code in _CLOSED


@dataclass(frozen=True, slots=True)
class _Actions:
    secret: bytes
    users: Mapping[str, Person]
    client: WebClient | None
    window: float
    clock: Callable[[], float]
    updating: list[asyncio.Lock] = field(default_factory=list)
    """One lock (made on the serving loop): this process updates one message at a time, each
    from the store as it stands then, so its updates land in the order of what they say."""

    async def handle(self, request: Request, backend: InboxBackend) -> Response:
        """Verify, read, answer through ``backend``, reply; the message is updated after the
        reply (Slack wants one within three seconds)."""
        from starlette.background import BackgroundTask

        from ._output import JSON

        body = await request.body()
        why = signature_problem(
            self.secret,
            request.headers.get("x-slack-request-timestamp"),
            request.headers.get("x-slack-signature"),
            body,
            self.clock(),
            self.window,
        )
        if why is not None:
            _log.warning("Slack action refused: %s", why)
            return JSON({"ok": False, "code": why.split(":")[0], "error": why}, status_code=401)
        payload = _payload(body)
        if payload is None:
            return JSON({"ok": False, "error": "the body is not an interactivity payload"}, 400)
        if payload.get("type") != "block_actions":
            return JSON({"ok": True, "ignored": str(payload.get("type"))[:40]})
        click = _click(payload)
        if click is None:  # a link button, or another app's element: nothing to answer
            return JSON({"ok": True, "ignored": "not an answer button"})
        done = await self._answer(payload, click, backend)
        task = None
        if self.client is not None:
            task = BackgroundTask(self._update, backend, payload, done)
        return JSON(done.body(), background=task)

    async def _answer(
        self, payload: Mapping[str, Any], click: SlackAnswer, backend: InboxBackend
    ) -> _Click:
        """Record the click's answer as the Slack user's person, or say why not."""
        user = payload.get("user") or {}
        user_id = str(user.get("id")) if isinstance(user, dict) else ""
        who = f"<@{_escape(user_id)}>"
        person = self.users.get(user_id)
        if person is None:
            refused = "unknown_user", f"{user_id!r} is not a configured Slack user"
            return _Click(click, who, None, refused)
        who += f" ({_escape(person.name)})"
        return _Click(click, who, person, await _record(backend, click, person))

    async def _update(
        self, backend: InboxBackend, payload: Mapping[str, Any], done: _Click
    ) -> None:
        """Rewrite the clicked message from where its question stands now."""
        if not self.updating:
            self.updating.append(asyncio.Lock())
        async with self.updating[0]:
            status, closed = done.status(*await _standing(backend, done.click))
            if self.client is not None:
                await _rewrite(self.client, payload, done.click, status, closed)


async def _record(
    backend: InboxBackend, click: SlackAnswer, person: Person
) -> tuple[str, str] | None:
    """Record the answer as ``person`` through the floor's rules: None when it was taken, else
    the refusal's (code, message). Nothing is recorded when it is refused. A button's value is
    ours but not signed (whoever can post as the Slack app could craft one), so it must name
    the question as it waits now (its digest) and one of the answers its buttons offer (never
    an edit)."""
    unfit = await _unfit(backend, click)
    if unfit is not None:
        return unfit
    answers = {click.interrupt_id: click.answer}
    shown = {click.interrupt_id: click.shown} if click.shown is not None else None
    try:
        await backend.answer(
            click.session_id, answers, by=person.name, shown=shown, groups=person.groups
        )
    except StoreUnavailableError:
        raise  # 503: nothing recorded, the person may click again
    except TimeoutError as exc:  # no Temporal worker took it in time
        return "timeout", str(exc) or "no one took the answer in time"
    except (InterludeError, UnicodeError) as exc:
        return refusal_code(exc), str(exc)
    return None


async def _unfit(backend: InboxBackend, click: SlackAnswer) -> tuple[str, str] | None:
    """Why a button's answer is not one its question's buttons offer, or names the question
    as it no longer is: (code, message); None when it fits (or the question no longer waits:
    the floor then says so, as it does for every door)."""
    from ..notify import button_answers

    try:
        view = await backend.session(click.session_id)
    except StoreUnavailableError:
        raise
    except InterludeError:
        return None  # no such session: the floor's own refusal follows
    question = next((q for q in view.interrupts if q.id == click.interrupt_id), None)
    if question is None:
        return None
    if click.shown != question.digest:
        return "stale", "the question changed since this message was posted; answer it again"
    if click.answer not in button_answers(question.to_dict()):
        return "invalid_answer", "this button's answer is not one the question offers"
    return None


async def _standing(
    backend: InboxBackend, click: SlackAnswer
) -> tuple[str | None, bool, list[str]]:
    """(status line, settled, who answered) of the clicked question as the store holds it now:
    who answered (applied or waiting for a worker), the approvals so far toward a quorum, or
    that it no longer waits. (None, False, []) while no one answered it, or when it cannot be
    read. Read from the store, not from the click, so concurrent clicks leave the message
    saying the same."""
    try:
        view = await backend.session(click.session_id)
    except Exception:  # gone, or unreadable: the click's own outcome will do
        return None, False, []
    qid = click.interrupt_id
    question = next((q for q in view.interrupts if q.id == qid), None)
    if question is None:
        entries = [e for e in view.audit if e.interrupt_id == qid]
        if not entries:
            return "The question no longer waits", True, []
        last = entries[-1]
        if last.expired:
            return f"The deadline passed: {_escape(click.words(last.answer))}", True, []
        voters = [e.by for e in entries if e.vote is not None] if last.vote else [last.by]
        return _line(last.answer, voters), True, voters
    recorded = [r for r in view.recorded if r.interrupt_id == qid]
    declined = next((r for r in recorded if click.declines(r.answer)), None)
    if declined is not None:
        return _line(declined.answer, [declined.by]), True, [declined.by]
    applied = view.votes.get(qid)
    voters = [*(applied[1] if applied else ()), *(r.by for r in recorded)]
    if not voters:
        return None, False, []
    answer = applied[0] if applied else recorded[0].answer
    line = _line(answer, voters)
    if len(voters) >= question.quorum:
        return line, True, voters
    return f"{line}: {len(voters)} of {question.quorum} approvals", False, voters


def _line(answer: object, names: list[str]) -> str:
    words = SlackAnswer.words(answer).capitalize()
    return f"*{_escape(words)}* by " + ", ".join(f"*{_escape(n)}*" for n in names)


def _payload(body: bytes) -> dict[str, Any] | None:
    """The JSON of the form field ``payload`` (None when the body is not such a form)."""
    from urllib.parse import parse_qs

    from ._output import UnsafeJson, loads

    try:
        fields = parse_qs(body.decode("utf-8"), strict_parsing=True)
        (text,) = fields.get("payload", [None])
        data = loads(text.encode("utf-8")) if isinstance(text, str) else None
    except (ValueError, UnicodeError, UnsafeJson):
        return None
    return data if isinstance(data, dict) else None


def _click(payload: Mapping[str, Any]) -> SlackAnswer | None:
    """The answer of the first answer button in the payload's actions (None: none)."""
    actions = payload.get("actions")
    for action in actions if isinstance(actions, list) else []:
        if not isinstance(action, dict):
            continue
        if not str(action.get("action_id", "")).startswith(SlackAnswer.ACTION):
            continue
        try:
            return SlackAnswer.parse(action.get("value"))
        except ValueError:
            continue
    return None


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _where(payload: Mapping[str, Any]) -> tuple[str, str] | None:
    """(channel, ts) of the message the button is on."""
    container = payload.get("container")
    container = container if isinstance(container, dict) else {}
    channel = payload.get("channel")
    message = payload.get("message")
    where = (
        container.get("channel_id") or (channel.get("id") if isinstance(channel, dict) else None),
        container.get("message_ts") or (message.get("ts") if isinstance(message, dict) else None),
    )
    return (str(where[0]), str(where[1])) if all(isinstance(w, str) and w for w in where) else None


async def _rewrite(
    client: WebClient, payload: Mapping[str, Any], click: SlackAnswer, status: str, closed: bool
) -> None:
    """Rewrite the clicked message: its blocks as Slack sent them back, the status line set,
    the buttons dropped once the question is settled. A failure is logged: the answer stands."""
    where = _where(payload)
    message = payload.get("message")
    if where is None or not isinstance(message, dict):
        return
    drop = {SlackAnswer.STATUS} | ({SlackAnswer.ACTIONS} if closed else set())
    blocks = [
        b
        for b in message.get("blocks") or []
        if isinstance(b, dict) and b.get("block_id") not in drop
    ]
    line = {"type": "mrkdwn", "text": status}
    blocks.append({"type": "context", "block_id": SlackAnswer.STATUS, "elements": [line]})
    text = f"{message.get('text') or 'A question'}. {status.replace('*', '')}"
    try:
        await asyncio.to_thread(
            client.chat_update,
            channel=where[0],
            ts=where[1],
            text=text[:3000],
            blocks=blocks,
            metadata=click.metadata(),
        )
    except Exception as exc:  # Slack refused it or could not be reached
        _log.warning("could not update the Slack message %s/%s: %s", *where, exc)
