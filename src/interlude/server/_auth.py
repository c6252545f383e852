"""Who is asking: bearer tokens for the API, a signed cookie for the HTML inbox, CSRF tokens.

Tokens map a secret to an approver name and the groups they are in (``{"token": "ana"}`` or
``{"token": {"name": "ana", "groups": ["ops"]}}``); the name is what the audit records, the
groups say which questions they may answer. The browser never
keeps the token: logging in trades it for a cookie holding the approver's name, a fingerprint of
the token, the time, a random nonce and an HMAC over them under a key of this server process.
Revoking a token (removing it from the map) ends its cookies too. Signing out ends that cookie
on the server as well: its nonce is remembered (until the cookie would have expired anyway), so
a copy of it is refused from then on (``SignOut`` sees the sign-out in the response). Forms
carry a CSRF token: an HMAC of the cookie and the form's purpose, so a page on another site
cannot post an answer in the approver's name.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import Headers
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import ConfigurationError
from ..operate import TOKENS_ENV as ENV
from ..operate import People, Person, check_tokens, load_tokens, people

__all__ = [
    "COOKIE",
    "Approver",
    "Auth",
    "Person",
    "SignOut",
    "check_tokens",
    "load_tokens",
    "people",
]

COOKIE = "interlude_session"
PRE_COOKIE = "interlude_login"
COOKIE_TTL = 12 * 3600.0


def _fingerprint(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()[:32]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True)
class Approver:
    """Who a request comes from: the name the audit records, the cookie it used (the CSRF
    tokens of its forms are bound to it; empty for bearer requests) and the groups of its
    token, as configured now (a cookie holds no groups: changing them applies at once)."""

    name: str
    cookie: str = ""
    groups: tuple[str, ...] = ()


class Auth:
    """Checks bearer tokens, issues and checks session cookies and CSRF tokens."""

    def __init__(self, tokens: Mapping[str, Any], secret: bytes | None = None) -> None:
        self.people = People(tokens)
        """Who the tokens name (what the doors beside the inbox, AG-UI and A2A, look up)."""
        self._tokens = self.people.by_token
        if not self._tokens:
            raise ConfigurationError(
                f"no tokens: give create_app(tokens={{token: name}}), or set ${ENV}=token=name"
            )
        self._by_fingerprint = {_fingerprint(t): p for t, p in self._tokens.items()}
        self._secret = secret if secret is not None else os.urandom(32)
        self._signed_out: dict[str, int] = {}
        """The nonces of the cookies signed out, with their issue times (forgotten once such
        a cookie would have expired anyway)."""

    def _mac(self, *parts: str) -> str:
        message = "\x1f".join(parts).encode("utf-8")
        return _b64(hmac.new(self._secret, message, hashlib.sha256).digest())

    def approver_for_token(self, presented: str) -> Person | None:
        """The person of a presented token (see :meth:`People.for_token`), or None."""
        return self.people.for_token(presented)

    def bearer(self, header: str | None) -> Approver | None:
        """The approver of an ``Authorization: Bearer <token>`` header, or None."""
        person = self.people.bearer(header)
        return None if person is None else Approver(person.name, groups=person.groups)

    def issue_cookie(self, token: str, now: float | None = None) -> str | None:
        """The session cookie for a token (None if the token is unknown)."""
        person = self.approver_for_token(token)
        if person is None:
            return None
        name = person.name
        issued = str(int(time.time() if now is None else now))
        who = _b64(name.encode("utf-8"))
        fp = _fingerprint(token)
        nonce = secrets.token_urlsafe(12)  # two sign-ins in one second get different cookies
        return f"{who}.{fp}.{issued}.{nonce}.{self._mac('cookie', who, fp, issued, nonce)}"

    def from_cookie(self, cookie: str | None, now: float | None = None) -> Approver | None:
        """The approver a session cookie names, if its MAC verifies, it is not older than
        12 hours, it was not signed out and its token is still configured."""
        if not cookie:
            return None
        parts = cookie.split(".")
        if len(parts) != 5:
            return None
        who, fp, issued, nonce, mac = parts
        if not hmac.compare_digest(mac, self._mac("cookie", who, fp, issued, nonce)):
            return None
        if nonce in self._signed_out:
            return None
        try:
            age = (time.time() if now is None else now) - int(issued)
            name = _unb64(who).decode("utf-8")
        except ValueError:
            return None
        person = self._by_fingerprint.get(fp)
        if not 0 <= age <= COOKIE_TTL or person is None or person.name != name:
            return None
        return Approver(name, cookie, person.groups)

    def sign_out(self, cookie: str, now: float | None = None) -> None:
        """End the session of ``cookie``: from now on :meth:`from_cookie` refuses it, and
        every copy of it. Only a cookie that is valid now is remembered."""
        if self.from_cookie(cookie, now) is None:
            return
        issued, nonce = cookie.split(".")[2:4]
        clock = time.time() if now is None else now
        self._signed_out = {n: at for n, at in self._signed_out.items() if clock - at <= COOKIE_TTL}
        self._signed_out[nonce] = int(issued)

    def names_someone(self, headers: Headers) -> bool:
        """Whether a request's headers name someone: a known bearer token, or a session cookie
        :meth:`from_cookie` accepts (what a request must show before its body is read)."""
        if self.bearer(headers.get("authorization")) is not None:
            return True
        cookie = cookie_parser(headers.get("cookie", "")).get(COOKIE)
        return self.from_cookie(cookie) is not None

    def csrf(self, bound_to: str, purpose: str) -> str:
        """The CSRF token of a form for ``purpose``, bound to a cookie value."""
        return self._mac("csrf", bound_to, purpose)

    def check_csrf(self, bound_to: str, purpose: str, presented: object) -> bool:
        return (
            isinstance(presented, str)
            and bool(bound_to)
            and hmac.compare_digest(presented, self.csrf(bound_to, purpose))
        )


class SignOut:
    """ASGI middleware: a response that clears the session cookie (signing out) ends the
    session of the cookie the request carried on the server too (:meth:`Auth.sign_out`), so
    a copy of that cookie is refused afterwards. It acts before the response is sent."""

    def __init__(self, app: ASGIApp, auth: Auth) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        cookie = None
        if scope["type"] == "http":
            cookie = cookie_parser(Headers(scope=scope).get("cookie", "")).get(COOKIE)
        if not cookie:
            await self.app(scope, receive, send)
            return

        async def watching(message: Message) -> None:
            if message["type"] == "http.response.start" and _clears_session(message):
                self.auth.sign_out(cookie)
            await send(message)

        await self.app(scope, receive, watching)


def _clears_session(start: Message) -> bool:
    """Whether a response start sets the session cookie to expire now."""
    for name, value in start.get("headers", []):
        if name.lower() != b"set-cookie":
            continue
        first, *attributes = (a.strip() for a in value.decode("latin-1").lower().split(";"))
        if first.startswith(f"{COOKIE}=") and "max-age=0" in attributes:
            return True
    return False
