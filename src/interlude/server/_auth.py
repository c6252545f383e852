"""Who is asking: bearer tokens for the API, a signed cookie for the HTML inbox, CSRF tokens.

Tokens map a secret to an approver name; the name is what the audit records. The browser never
keeps the token: logging in trades it for a cookie holding the approver's name, a fingerprint of
the token, the time, a random nonce and an HMAC over them under a key of this server process.
Revoking a token (removing it from the map) ends its cookies too; signing out does not revoke a
copy of the cookie (it is stateless), which stays valid until it expires. Forms carry a CSRF
token: an HMAC of the cookie and the form's purpose, so a page on another site cannot post an
answer in the approver's name.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass

from .._agent import check_by
from ..errors import ConfigurationError, ResumeInputError

__all__ = ["COOKIE", "Auth", "load_tokens"]

COOKIE = "interlude_session"
PRE_COOKIE = "interlude_login"
MIN_TOKEN = 16
COOKIE_TTL = 12 * 3600.0
ENV = "INTERLUDE_TOKENS"


def load_tokens(path: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """Tokens (secret -> approver name) from a JSON file ``{"token": "name"}``, or, with no
    path, from ``$INTERLUDE_TOKENS`` (``tok1=ana,tok2=bo``); empty when neither is set.
    ConfigurationError for a malformed file, a token shorter than 16 characters or a name that
    is empty, not printable or cannot answer (the reserved ``"expiry"``, over 200 characters)."""
    if path is not None:
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"cannot read the tokens file {str(path)!r}: {exc}") from None
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in data.items()
        ):
            raise ConfigurationError(
                f'the tokens file {str(path)!r} must hold one object {{"token": "name", ...}}'
            )
        return check_tokens(data, f"the tokens file {str(path)!r}")
    text = os.environ.get(ENV, "").strip()
    tokens: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        token, sep, name = part.partition("=")
        if not sep:
            raise ConfigurationError(f"${ENV}: {_masked(token)} has no '=name' (tok1=ana,tok2=bo)")
        tokens[token.strip()] = name.strip()
    return check_tokens(tokens, f"${ENV}")


def check_tokens(tokens: Mapping[str, str], where: str = "tokens") -> dict[str, str]:
    """``tokens`` as a dict, after checking every token's length and every name."""
    for token, name in tokens.items():
        if len(token) < MIN_TOKEN:
            raise ConfigurationError(
                f"{where}: the token {_masked(token)} for {name!r} is shorter than {MIN_TOKEN} "
                "characters (make one with: python3 -c 'import secrets; "
                "print(secrets.token_urlsafe(24))')"
            )
        if not name or not name.isprintable() or name != name.strip():
            raise ConfigurationError(
                f"{where}: the approver name {name[:40]!r} is not printable text"
            )
        try:
            check_by(name)  # the rule Inbox.record applies to who answers
        except ResumeInputError as exc:
            raise ConfigurationError(
                f"{where}: the approver name {name[:40]!r} cannot answer questions: {exc}"
            ) from None
    return dict(tokens)


def _masked(token: str) -> str:
    return repr(token[:3] + "...") if len(token) > 3 else repr("...")


def _fingerprint(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()[:32]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True)
class Approver:
    """Who a request comes from: the name the audit records, and the cookie it used (the CSRF
    tokens of its forms are bound to it; empty for bearer requests)."""

    name: str
    cookie: str = ""


class Auth:
    """Checks bearer tokens, issues and checks session cookies and CSRF tokens."""

    def __init__(self, tokens: Mapping[str, str], secret: bytes | None = None) -> None:
        self._tokens = check_tokens(tokens)
        if not self._tokens:
            raise ConfigurationError(
                f"no tokens: give create_app(tokens={{token: name}}), or set ${ENV}=token=name"
            )
        self._by_fingerprint = {_fingerprint(t): n for t, n in self._tokens.items()}
        self._secret = secret if secret is not None else os.urandom(32)

    def _mac(self, *parts: str) -> str:
        message = "\x1f".join(parts).encode("utf-8")
        return _b64(hmac.new(self._secret, message, hashlib.sha256).digest())

    def approver_for_token(self, presented: str) -> str | None:
        """The approver of a presented token, comparing against every token in constant
        time (no early exit), or None."""
        found: str | None = None
        given = presented.encode("utf-8")
        for token, name in self._tokens.items():
            if hmac.compare_digest(given, token.encode("utf-8")):
                found = name
        return found

    def bearer(self, header: str | None) -> Approver | None:
        """The approver of an ``Authorization: Bearer <token>`` header, or None."""
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        name = self.approver_for_token(token.strip())
        return None if name is None else Approver(name)

    def issue_cookie(self, token: str, now: float | None = None) -> str | None:
        """The session cookie for a token (None if the token is unknown)."""
        name = self.approver_for_token(token)
        if name is None:
            return None
        issued = str(int(time.time() if now is None else now))
        who = _b64(name.encode("utf-8"))
        fp = _fingerprint(token)
        nonce = secrets.token_urlsafe(12)  # two sign-ins in one second get different cookies
        return f"{who}.{fp}.{issued}.{nonce}.{self._mac('cookie', who, fp, issued, nonce)}"

    def from_cookie(self, cookie: str | None, now: float | None = None) -> Approver | None:
        """The approver a session cookie names, if its MAC verifies, it is not older than
        12 hours and its token is still configured."""
        if not cookie:
            return None
        parts = cookie.split(".")
        if len(parts) != 5:
            return None
        who, fp, issued, nonce, mac = parts
        if not hmac.compare_digest(mac, self._mac("cookie", who, fp, issued, nonce)):
            return None
        try:
            age = (time.time() if now is None else now) - int(issued)
            name = _unb64(who).decode("utf-8")
        except ValueError:
            return None
        if not 0 <= age <= COOKIE_TTL or self._by_fingerprint.get(fp) != name:
            return None
        return Approver(name, cookie)

    def csrf(self, bound_to: str, purpose: str) -> str:
        """The CSRF token of a form for ``purpose``, bound to a cookie value."""
        return self._mac("csrf", bound_to, purpose)

    def check_csrf(self, bound_to: str, purpose: str, presented: object) -> bool:
        return (
            isinstance(presented, str)
            and bool(bound_to)
            and hmac.compare_digest(presented, self.csrf(bound_to, purpose))
        )
