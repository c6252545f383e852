"""Who is asking: bearer tokens for the API, a signed cookie for the HTML inbox, CSRF tokens.

Tokens map a secret to an approver name and the groups they are in (``{"token": "ana"}`` or
``{"token": {"name": "ana", "groups": ["ops"]}}``); the name is what the audit records, the
groups say which questions they may answer. The browser never
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
from typing import Any

from .._agent import check_by
from ..errors import ConfigurationError, ResumeInputError

__all__ = ["COOKIE", "Approver", "Auth", "Person", "check_tokens", "load_tokens", "people"]

COOKIE = "interlude_session"
PRE_COOKIE = "interlude_login"
MIN_TOKEN = 16
COOKIE_TTL = 12 * 3600.0
ENV = "INTERLUDE_TOKENS"


def load_tokens(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Tokens from a JSON file, or, with no path, from ``$INTERLUDE_TOKENS``; empty when
    neither is set. Each token maps to an approver's name, or to ``{"name": "ana", "groups":
    ["ops", "leads"]}``: the file holds ``{"token": "ana", "token2": {"name": ..., "groups":
    [...]}}``, the variable ``tok1=ana,tok2=bo:ops+leads`` (groups after a colon, joined by
    ``+``). The result is in the forms ``create_app(tokens=...)`` takes. ConfigurationError
    for a malformed file, a token shorter than 16 characters, a name that is empty, not
    printable or cannot answer (the reserved ``"expiry"``, over 200 characters) or a group
    that is not a printable name."""
    if path is not None:
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"cannot read the tokens file {str(path)!r}: {exc}") from None
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str | dict) for k, v in data.items()
        ):
            raise ConfigurationError(
                f'the tokens file {str(path)!r} must hold one object {{"token": "name", ...}} '
                '(or {"token": {"name": "ana", "groups": ["ops"]}, ...})'
            )
        return check_tokens(data, f"the tokens file {str(path)!r}")
    text = os.environ.get(ENV, "").strip()
    tokens: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        token, sep, who = part.partition("=")
        if not sep:
            raise ConfigurationError(
                f"${ENV}: {_masked(token)} has no '=name' (tok1=ana,tok2=bo:ops+leads)"
            )
        name, colon, groups = who.strip().partition(":")
        tokens[token.strip()] = (
            {"name": name.strip(), "groups": [g.strip() for g in groups.split("+")]}
            if colon
            else name.strip()
        )
    return check_tokens(tokens, f"${ENV}")


def check_tokens(tokens: Mapping[str, Any], where: str = "tokens") -> dict[str, Any]:
    """``tokens`` as a dict, after checking every token's length, name and groups."""
    people(tokens, where)
    return dict(tokens)


def people(tokens: Mapping[str, Any], where: str = "tokens") -> dict[str, Person]:
    """Each token's person (name and groups), every one checked (see :func:`load_tokens`)."""
    out: dict[str, Person] = {}
    for token, value in tokens.items():
        person = _person(value, where)
        if not isinstance(token, str) or len(token) < MIN_TOKEN:
            raise ConfigurationError(
                f"{where}: the token {_masked(str(token))} for {person.name!r} is shorter than "
                f"{MIN_TOKEN} characters (make one with: python3 -c 'import secrets; "
                "print(secrets.token_urlsafe(24))')"
            )
        out[token] = person
    return out


def _person(value: object, where: str) -> Person:
    """The person a token maps to: a name, or ``{"name", "groups"}``."""
    groups: object = []
    if isinstance(value, Mapping):
        extra = set(value) - {"name", "groups"}
        if extra:
            raise ConfigurationError(
                f"{where}: a token maps to a name or to {{'name', 'groups'}}; unknown keys "
                f"{sorted(map(str, extra))!r}"
            )
        name, groups = value.get("name"), value.get("groups", [])
    else:
        name = value
    if not isinstance(name, str) or not name or not name.isprintable() or name != name.strip():
        raise ConfigurationError(
            f"{where}: the approver name {str(name)[:40]!r} is not printable text"
        )
    try:
        check_by(name)  # the rule Inbox.record applies to who answers
    except ResumeInputError as exc:
        raise ConfigurationError(
            f"{where}: the approver name {name[:40]!r} cannot answer questions: {exc}"
        ) from None
    if not isinstance(groups, list | tuple) or not all(_group_ok(g) for g in groups):
        raise ConfigurationError(
            f"{where}: the groups of {name[:40]!r} must be a list of printable names without "
            f"spaces, ',', ':', '+' or '=', got {groups!r:.80}"
        )
    return Person(name, tuple(dict.fromkeys(groups)))


def _group_ok(group: object) -> bool:
    return (
        isinstance(group, str)
        and 0 < len(group) <= 100
        and group.isprintable()
        and not any(c.isspace() or c in ",:+=" for c in group)
    )


def _masked(token: str) -> str:
    return repr(token[:3] + "...") if len(token) > 3 else repr("...")


def _fingerprint(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()[:32]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True)
class Person:
    """Who a token belongs to: the name the audit records and the groups they are in."""

    name: str
    groups: tuple[str, ...] = ()


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
        self._tokens = people(tokens)
        if not self._tokens:
            raise ConfigurationError(
                f"no tokens: give create_app(tokens={{token: name}}), or set ${ENV}=token=name"
            )
        self._by_fingerprint = {_fingerprint(t): p for t, p in self._tokens.items()}
        self._secret = secret if secret is not None else os.urandom(32)

    def _mac(self, *parts: str) -> str:
        message = "\x1f".join(parts).encode("utf-8")
        return _b64(hmac.new(self._secret, message, hashlib.sha256).digest())

    def approver_for_token(self, presented: str) -> Person | None:
        """The person of a presented token, comparing against every token in constant time
        (no early exit), or None."""
        found: Person | None = None
        given = presented.encode("utf-8")
        for token, person in self._tokens.items():
            if hmac.compare_digest(given, token.encode("utf-8")):
                found = person
        return found

    def bearer(self, header: str | None) -> Approver | None:
        """The approver of an ``Authorization: Bearer <token>`` header, or None."""
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        person = self.approver_for_token(token.strip())
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
        person = self._by_fingerprint.get(fp)
        if not 0 <= age <= COOKIE_TTL or person is None or person.name != name:
            return None
        return Approver(name, cookie, person.groups)

    def csrf(self, bound_to: str, purpose: str) -> str:
        """The CSRF token of a form for ``purpose``, bound to a cookie value."""
        return self._mac("csrf", bound_to, purpose)

    def check_csrf(self, bound_to: str, purpose: str, presented: object) -> bool:
        return (
            isinstance(presented, str)
            and bool(bound_to)
            and hmac.compare_digest(presented, self.csrf(bound_to, purpose))
        )
