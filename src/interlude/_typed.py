"""Typed answers: the JSON Schema of a response type, and checking answers against it.

An interrupt asked with ``response_type=T`` carries T's JSON Schema (made by pydantic), so a UI
knows what to ask for. ``resume`` checks each answer against the *stored* schema before
anything changes (a process that resumes need not know T); the callback asking again then
receives the answer converted to T. pydantic and jsonschema load only when first needed.
"""

from __future__ import annotations

import functools
from typing import Any

from ._messages import JsonValue

__all__ = ["answer_problem", "convert", "schema_of"]


@functools.lru_cache(maxsize=256)
def _adapter(response_type: Any) -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(response_type)


def schema_of(response_type: Any) -> dict[str, JsonValue]:
    """The JSON Schema of ``response_type`` (a pydantic model, dataclass, TypedDict, enum,
    ``Literal[...]`` or plain type). InterruptError if pydantic cannot describe it."""
    from .errors import InterruptError

    try:
        return _schema(response_type)
    except TypeError:  # unhashable: not cached
        return dict(_adapter.__wrapped__(response_type).json_schema())
    except Exception as exc:  # pydantic's own errors when the type cannot be described
        raise InterruptError(
            f"response_type {response_type!r} cannot be described as JSON Schema: {exc}"
        ) from None


@functools.lru_cache(maxsize=256)
def _schema(response_type: Any) -> dict[str, JsonValue]:
    return dict(_adapter(response_type).json_schema())


def convert(response_type: Any, value: JsonValue) -> Any:
    """``value`` (a JSON answer) as an instance of ``response_type``; AnswerTypeError naming
    the first bad field if it does not fit."""
    from pydantic import ValidationError

    try:
        adapter = _adapter(response_type)
    except TypeError:
        adapter = _adapter.__wrapped__(response_type)
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise AnswerTypeError(tuple(first.get("loc", ())), str(first.get("msg"))) from None


class AnswerTypeError(ValueError):
    """An answer that does not convert to its response type: ``path`` and ``message``."""

    def __init__(self, path: tuple[str | int, ...], message: str) -> None:
        where = ".".join(str(p) for p in path) or "the answer"
        super().__init__(f"at {where}: {message}")
        self.path = path


def to_json(response_type: Any, value: Any) -> JsonValue:
    """A value of ``response_type`` (e.g. a default given as a model instance) as JSON."""
    try:
        adapter = _adapter(response_type)
    except TypeError:
        adapter = _adapter.__wrapped__(response_type)
    result: JsonValue = adapter.dump_python(value, mode="json", warnings=False)
    return result


@functools.lru_cache(maxsize=256)
def _validator(schema_text: str) -> Any:
    import json

    from jsonschema import Draft202012Validator

    from ._patterns import bounded_validator, check_patterns

    schema = json.loads(schema_text)
    Draft202012Validator.check_schema(schema)
    check_patterns(schema)  # every pattern runs in linear time, or the schema is unusable
    cls = bounded_validator()
    return cls(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def answer_problem(
    schema: dict[str, JsonValue], answer: JsonValue
) -> tuple[tuple[str | int, ...], str] | None:
    """None if ``answer`` meets ``schema``; else (path of the bad field, what is wrong).

    The most relevant error is reported (jsonschema's ``best_match``); a schema that is not
    valid JSON Schema is reported as a problem of the answer's question, not raised."""
    import json

    from jsonschema import SchemaError
    from jsonschema.exceptions import best_match

    from ._patterns import UnboundedPattern

    try:
        validator = _validator(json.dumps(schema, sort_keys=True))
    except SchemaError as exc:
        return (), f"its question's response schema is not valid JSON Schema ({exc.message})"
    except UnboundedPattern as exc:
        return (), f"its question's response schema cannot be used: {exc}"
    except (ValueError, RecursionError):
        return (), "its question's response schema cannot be read"
    try:
        error = best_match(validator.iter_errors(answer))
    except RecursionError:
        return (), "its question's response schema refers to itself without end"
    except Exception as exc:  # an unresolvable $ref and the like: the schema is unusable
        return (), f"its question's response schema cannot be used ({type(exc).__name__})"
    if error is None:
        return None
    return tuple(error.absolute_path), error.message
