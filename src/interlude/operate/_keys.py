"""Question ids as the doors show them: bound to their session.

A question's id is deterministic (``v1:<source>:<scope>:<uuid>``, the scope being the model's
tool-use id for tool questions), so two sessions whose models numbered their calls alike ask
questions with the same id. A door shows each question as ``<session id>/<question id>`` (a
session id never holds ``/``), and an answer given under such a key for another session is
refused (``unknown_interrupt``), never applied to the session it was sent to. A plain id is
still taken (the library's own calls, older clients): it can only name the session the answer
was sent to.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypeVar

from ..errors import ResumeInputError, UnknownInterruptError

__all__ = ["answer_key", "by_question_id", "question_id_of"]

V = TypeVar("V")

_PLAIN = re.compile(r"v\d+:[a-z_]+:")
"""The start of a plain question id (whose tool-use id may itself hold a ``/``)."""


def answer_key(session_id: str, question_id: str) -> str:
    """The key a door shows for question ``question_id`` of session ``session_id``."""
    return f"{session_id}/{question_id}"


def question_id_of(session_id: str, key: str) -> str:
    """The question id an answer key names for an answer sent to ``session_id``:
    UnknownInterruptError for a key of another session's question (nothing answered)."""
    if not isinstance(key, str) or "/" not in key:
        return key  # a plain id (or not a string: the answer rules say what is wrong)
    session, _, question = key.partition("/")
    if session == session_id:
        return question
    if _PLAIN.match(key):
        return key  # a plain id whose tool-use id holds a "/"
    raise UnknownInterruptError(
        f"{key!r} is a question of session {session!r}, not of {session_id!r}, where this "
        "answer was sent: nothing was answered"
    )


def by_question_id(session_id: str, answers: Mapping[str, V]) -> dict[str, V]:
    """``answers`` keyed by answer keys (or plain ids), keyed by question id."""
    out: dict[str, V] = {}
    for key, value in answers.items():
        question = question_id_of(session_id, key)
        if question in out:
            raise ResumeInputError(f"question {question!r} is answered twice ({key!r})")
        out[question] = value
    return out
