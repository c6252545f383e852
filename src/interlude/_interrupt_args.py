"""What ``interrupt(...)`` is given, checked and turned into question fields, and an answer
turned back into what the call returns.

These checks run only when a question is asked or answered, never per step, so they live
apart from the ``Interrupt`` type and the ``Interrupter`` that calls them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ._frozen import thaw
from ._messages import JsonValue
from .errors import InterruptError

if TYPE_CHECKING:
    from datetime import timedelta

__all__ = [
    "NO_DEFAULT",
    "seconds_of",
    "as_answer",
    "check_json",
    "check_name",
    "policy_fields",
    "typed_and_timed",
]


def seconds_of(value: Any) -> Any:
    """``value``'s seconds if it is a ``datetime.timedelta``, else ``value`` itself (checked by
    the caller). (A timedelta exists only once ``datetime`` is imported: ``import interlude``
    does not import it.)"""
    dt = sys.modules.get("datetime")
    if dt is not None and isinstance(value, dt.timedelta):
        return value.total_seconds()
    return value


class _NoDefault:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<no default>"


NO_DEFAULT: Any = _NoDefault()
"""The ``default`` of ``interrupt()`` when none is given (None is an answer like any other)."""


def check_name(name: object) -> None:
    """InterruptError unless ``name`` is a non-empty string outside Interlude's own names."""
    if not isinstance(name, str) or not name:
        raise InterruptError(f"interrupt name must be a non-empty string, got {name!r}")
    if name.startswith("interlude."):
        raise InterruptError(
            f"interrupt name {name!r}: names starting with 'interlude.' are Interlude's own"
        )


def check_json(name: str, what: str, value: object) -> None:
    """InterruptError unless ``value`` (the question's ``what``) can be saved as JSON."""
    import json

    try:
        json.dumps(value, allow_nan=False)
    except RecursionError:
        raise InterruptError(
            f"the {what} of interrupt {name!r} is nested too deeply to be saved"
        ) from None
    except (TypeError, ValueError) as exc:
        raise InterruptError(
            f"the {what} of interrupt {name!r} is not JSON-compatible ({exc}); a pause is "
            "saved as JSON"
        ) from None


def typed_and_timed(
    name: str, response_type: Any, expires_in: object, default: Any
) -> dict[str, Any]:
    """The Interrupt fields for a typed answer and a deadline (checked), or {}."""
    extra: dict[str, Any] = {}
    if response_type is not None:
        from ._typed import schema_of

        extra["response_schema"] = schema_of(response_type)
    if expires_in is None:
        if default is not NO_DEFAULT:
            raise InterruptError(f"interrupt {name!r}: a default needs a deadline (expires_in)")
        return extra
    seconds = seconds_of(expires_in)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
        raise InterruptError(
            f"interrupt {name!r}: expires_in must be a number of seconds >= 0 or a timedelta, "
            f"got {expires_in!r}"
        )
    if default is not NO_DEFAULT:
        if response_type is not None:
            import contextlib

            from ._typed import answer_problem, to_json

            with contextlib.suppress(Exception):  # reported below as not fitting the type
                default = to_json(response_type, default)
            problem = answer_problem(extra["response_schema"], default)
            if problem is not None:
                where = ".".join(map(str, problem[0])) or "the default"
                raise InterruptError(
                    f"interrupt {name!r}: the default does not fit response_type at {where}: "
                    f"{problem[1]}"
                )
        check_json(name, "default", default)
        extra["default"], extra["has_default"] = default, True
    return extra


def policy_fields(
    name: str,
    approvers: Iterable[str],
    quorum: int,
    escalate_after: float | timedelta | None,
    escalate_to: Iterable[str],
    warn_before: float | timedelta | None,
    *,
    timed: bool,
) -> dict[str, Any]:
    """The Interrupt fields for who answers, how many, escalation and warning (checked), or
    {} when all are left as they are. ``timed``: whether the question has a deadline (a
    warning needs one)."""
    out: dict[str, Any] = {}
    for field_name, groups in (("approvers", approvers), ("escalate_to", escalate_to)):
        names = [groups] if isinstance(groups, str) else list(groups)
        if not all(isinstance(g, str) and g.strip() for g in names):
            raise InterruptError(f"interrupt {name!r}: {field_name} is a list of group names")
        if names:
            out[field_name] = tuple(dict.fromkeys(names))
    if isinstance(quorum, bool) or not isinstance(quorum, int) or quorum < 1:
        raise InterruptError(f"interrupt {name!r}: quorum is a whole number >= 1, got {quorum!r}")
    if quorum != 1:
        out["quorum"] = quorum
    for field_name, value in (("escalate_after", escalate_after), ("warn_before", warn_before)):
        if value is None:
            continue
        seconds = seconds_of(value)
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
            raise InterruptError(
                f"interrupt {name!r}: {field_name} is a number of seconds >= 0 or a timedelta, "
                f"got {value!r}"
            )
        out[field_name] = float(seconds)
    if ("escalate_after" in out) != ("escalate_to" in out):
        raise InterruptError(
            f"interrupt {name!r}: escalate_after and escalate_to go together (when, and to whom)"
        )
    if "warn_before" in out and not timed:
        raise InterruptError(f"interrupt {name!r}: warn_before needs a deadline (expires_in)")
    return out


def as_answer(name: str, iid: str, answer: JsonValue, response_type: Any) -> Any:
    """The answer as ``interrupt()`` returns it: the caller's own copy, or the typed value."""
    if response_type is None:
        return thaw(answer)  # the caller's own copy: the kept answer stays as given
    from ._typed import AnswerTypeError, convert

    try:
        return convert(response_type, thaw(answer))  # the caller's own copy
    except AnswerTypeError as exc:  # the stored schema let through what the type refuses
        from .errors import AnswerValidationError

        kind = getattr(response_type, "__name__", None) or repr(response_type)
        raise AnswerValidationError(
            f"the answer to {name!r} ({iid}) does not fit its response type {kind}: {exc}",
            interrupt_id=iid,
            path=exc.path,
        ) from None
