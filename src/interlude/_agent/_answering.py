"""Checking answers before a resume changes anything.

Every answer must name a pending question, be plain JSON, fit the question's response type
(its stored JSON Schema, so the process that resumes need not know the type) and come before
the question's deadline. The first problem is raised as a ResumeError subclass naming the
question (and the field); then nothing has changed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from .._interrupt import Interrupt
from .._messages import JsonValue
from ..errors import (
    AnswerValidationError,
    InterruptExpiredError,
    ResumeInputError,
    UnknownInterruptError,
)

__all__ = ["check_answers"]


def check_answers(
    asked: Mapping[str, Interrupt],
    answers: Mapping[str, JsonValue],
    now: float,
    shown: Mapping[str, str] | None = None,
) -> None:
    """Raise the first problem of ``answers`` to the pending questions ``asked``; ``shown``
    gives the digests of the questions as the person saw them (see ``shown_digest``)."""
    for key, value in answers.items():
        if not isinstance(key, str):
            raise ResumeInputError(f"interrupt ids are strings, got {key!r}")
        if key not in asked:
            raise UnknownInterruptError(
                f"no pending interrupt has id {key!r}; pending: {', '.join(sorted(asked))}"
            )
        try:
            # NaN is not JSON, and a lone surrogate is not text: PostgreSQL refuses both.
            json.dumps(value, allow_nan=False, ensure_ascii=False).encode("utf-8")
        except RecursionError:
            raise ResumeInputError(
                f"the answer to {key!r} is nested too deeply to be saved"
            ) from None
        except UnicodeEncodeError:
            raise ResumeInputError(
                f"the answer to {key!r} holds text that is not valid Unicode (a lone surrogate)"
            ) from None
        except (TypeError, ValueError) as exc:
            raise ResumeInputError(f"the answer to {key!r} is not JSON-compatible: {exc}") from None
    if shown is not None:
        _check_shown(asked, answers, shown)
    for key, value in answers.items():
        question = asked[key]
        if question.expires_at is not None and question.expires_at <= now:
            raise InterruptExpiredError(
                f"question {question.name!r} ({key}) expired {now - question.expires_at:.0f} s "
                "ago; its answer is refused (it is settled by its deadline)",
                question,
            )
        if question.source == "in_doubt":
            from ._batch import in_doubt_problem

            problem = in_doubt_problem(value)
            if problem is not None:
                raise ResumeInputError(f"the answer to {key!r}: {problem}")
        if question.response_schema is not None:
            from .._typed import answer_problem

            found = answer_problem(question.response_schema, value)
            if found is not None:
                path, what = found
                where = ".".join(str(p) for p in path) if path else "the answer"
                raise AnswerValidationError(
                    f"the answer to {question.name!r} ({key}) does not fit its response type: "
                    f"at {where}: {what}",
                    interrupt_id=key,
                    path=path,
                )


def _check_shown(
    asked: Mapping[str, Interrupt], answers: Mapping[str, JsonValue], shown: Mapping[str, str]
) -> None:
    from .._audit import shown_digest

    if not isinstance(shown, Mapping):
        raise ResumeInputError(f"shown= maps interrupt ids to digests, got {type(shown).__name__}")
    for key, digest in shown.items():
        if key not in answers:
            raise ResumeInputError(f"shown= names {key!r}, which is not answered here")
        actual = shown_digest(asked[key])
        if digest != actual:
            raise ResumeInputError(
                f"question {asked[key].name!r} ({key}) is not the one that was shown (shown "
                f"{str(digest)[:19]}..., pending {actual[:19]}...): its data changed since; "
                "nothing was answered, look at it again"
            )
