"""People: who answers, and the groups they are in, as the operator configures them.

A token maps to a person: a name (what the audit records) or ``{"name", "groups"}``. Tokens
come from a JSON file or ``$INTERLUDE_TOKENS``; every name is checked as the answer rules check
who answers (``check_by``), every group is a printable word. The doors (the inbox's cookies and
bearer tokens, AG-UI, A2A) look people up here; what a person may answer is the floor's rule.
"""

from __future__ import annotations

import hmac
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._agent import check_by, person_key
from ..errors import ConfigurationError, ResumeInputError

__all__ = ["ENV", "MIN_TOKEN", "People", "Person", "check_tokens", "load_tokens", "people"]

MIN_TOKEN = 16
"""The shortest token accepted (characters)."""
ENV = "INTERLUDE_TOKENS"
"""The variable tokens are read from when no file is given."""


@dataclass(frozen=True, slots=True)
class Person:
    """Who a token belongs to: the name the audit records and the groups they are in."""

    name: str
    groups: tuple[str, ...] = ()


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


class People:
    """The people ``tokens`` name: who presents a token, compared against every token in
    constant time (no early exit). What the doors ask before anything else."""

    def __init__(self, tokens: Mapping[str, Any], where: str = "tokens") -> None:
        self.by_token = people(tokens, where)
        self._by_name: dict[str, Person] = {}
        for person in self.by_token.values():
            key = person_key(person.name)
            known = self._by_name.get(key, Person(person.name))
            groups = tuple(dict.fromkeys(known.groups + person.groups))
            self._by_name[key] = Person(known.name, groups)

    def __bool__(self) -> bool:
        return bool(self.by_token)

    def for_token(self, presented: str) -> Person | None:
        """The person of a presented token, or None."""
        found: Person | None = None
        given = presented.encode("utf-8")
        for token, person in self.by_token.items():
            if hmac.compare_digest(given, token.encode("utf-8")):
                found = person
        return found

    def by_name(self, name: str) -> Person | None:
        """The person the tokens call ``name`` (names compared as the audit compares them:
        case, spacing and Unicode forms aside), in every group any of their tokens gives
        (what they may answer as, signing in with one or another); None when no token names
        them."""
        return self._by_name.get(person_key(name))

    def bearer(self, header: str | None) -> Person | None:
        """The person of an ``Authorization: Bearer <token>`` header, or None."""
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return self.for_token(token.strip())
