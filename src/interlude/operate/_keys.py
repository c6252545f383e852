"""Question ids as the doors show them: bound to their session (``answer_key``,
``question_id_of``: see ``interlude._interrupt``), and a door's answers by question id.

A door shows each question as ``<session id>/<question id>``, and an answer given under such a
key for another session is refused (``unknown_interrupt``), never applied to the session it was
sent to. A plain id is still taken (the library's own calls, older clients): it can only name
the session the answer was sent to.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from .._interrupt import answer_key, question_id_of
from ..errors import ResumeInputError

__all__ = ["answer_key", "by_question_id", "question_id_of"]

V = TypeVar("V")


def by_question_id(session_id: str, answers: Mapping[str, V]) -> dict[str, V]:
    """``answers`` keyed by answer keys (or plain ids), keyed by question id."""
    out: dict[str, V] = {}
    for key, value in answers.items():
        question = question_id_of(session_id, key)
        if question in out:
            raise ResumeInputError(f"question {question!r} is answered twice ({key!r})")
        out[question] = value
    return out
