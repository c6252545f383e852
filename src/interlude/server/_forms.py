"""Forms made from a question's answer schema, and the JSON answer made from a posted form.

A question without a schema, or with a boolean one, gets Approve / Decline buttons (and, without
a schema, a free JSON field); an enum (a ``Literal``) gets a button per choice; an object gets a
field per property (text, number, a checkbox for booleans, a select for enums, JSON for the
rest). Local ``$ref``s (``#/$defs/...``) and ``Optional`` (``anyOf`` with null) are resolved, as
pydantic writes them. Anything else is answered as JSON. The answer is checked against the
schema afterwards by ``Inbox.record``, exactly as ``resume`` checks it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .._messages import JsonValue
from ._output import UnsafeJson, loads

__all__ = ["FormError", "FormField", "QuestionForm", "answer_from_form", "form_for"]

FREE_JSON = "__json__"
"""The ``answer`` button value that sends the free JSON field."""

FieldKind = Literal["boolean", "choice", "string", "number", "integer", "json"]
FormKind = Literal["approve", "approval", "choices", "fields", "json"]


class FormError(ValueError):
    """A posted field that cannot become JSON (``path`` names it, as in the answer)."""

    def __init__(self, message: str, path: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.path = path


@dataclass(frozen=True, slots=True)
class FormField:
    """One input: ``key`` is the property (None: the answer itself)."""

    key: str | None
    label: str
    kind: FieldKind
    required: bool
    description: str | None = None
    choices: tuple[tuple[str, str], ...] = ()
    """(JSON text of the value, label) for ``choice`` fields."""
    default: str = ""
    """The input's initial text (JSON text for choices)."""

    @property
    def input_name(self) -> str:
        return "value" if self.key is None else f"f.{self.key}"


@dataclass(frozen=True, slots=True)
class QuestionForm:
    """How to ask for one question's answer."""

    kind: FormKind
    buttons: tuple[tuple[str, str], ...] = ()
    """(JSON text of the answer, label) for ``approve`` and ``choices`` forms."""
    fields: tuple[FormField, ...] = ()
    free_json: bool = False
    """Whether a free JSON field is offered beside the buttons (no schema)."""
    schema: Mapping[str, Any] | None = field(default=None, compare=False)
    input_text: str = ""
    """For an ``approval`` form (a tool approval): the call's input as JSON, to edit."""


def _deref(schema: Any, root: Mapping[str, Any]) -> Any:
    """Follow local ``$ref``s, unwrap one-item ``allOf`` and ``Optional`` (anyOf with null)."""
    for _ in range(32):
        if not isinstance(schema, Mapping):
            return schema
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = root
            for part in ref[2:].split("/"):
                target = target.get(part) if isinstance(target, Mapping) else None
            if target is None:
                return schema
            schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
            continue
        for key in ("anyOf", "oneOf", "allOf"):
            options = schema.get(key)
            if isinstance(options, list):
                real = [o for o in options if not _is_null(o)]
                if len(real) == 1 and len(options) <= 2:
                    rest = {k: v for k, v in schema.items() if k != key}
                    schema = {**real[0], **rest} if isinstance(real[0], Mapping) else real[0]
                    break
        else:
            return schema
    return schema


def _is_null(schema: Any) -> bool:
    return isinstance(schema, Mapping) and schema.get("type") == "null"


def _const(schema: Any) -> bool:
    return isinstance(schema, Mapping) and "const" in schema


def _choices(schema: Mapping[str, Any]) -> list[JsonValue] | None:
    if isinstance(schema.get("enum"), list):
        return list(schema["enum"])
    if "const" in schema:
        return [schema["const"]]
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options and all(_const(o) for o in options):
            return [o["const"] for o in options]
    return None


def _label(value: JsonValue) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _field(key: str | None, schema: Any, root: Mapping[str, Any], required: bool) -> FormField:
    schema = _deref(schema, root)
    if not isinstance(schema, Mapping):
        schema = {}
    label = str(schema.get("title") or key or "answer")
    description = schema.get("description") if isinstance(schema.get("description"), str) else None
    default = ""
    if "default" in schema:
        d = schema["default"]
        default = json.dumps(d) if not isinstance(d, str) else d
    choices = _choices(schema)
    if choices is not None:
        if "default" in schema:
            default = json.dumps(schema["default"])
        pairs = tuple((json.dumps(c), _label(c)) for c in choices)
        return FormField(key, label, "choice", required, description, pairs, default)
    kind = schema.get("type")
    if kind in ("boolean", "string", "number", "integer"):
        if kind == "boolean":
            default = "true" if schema.get("default") is True else ""
        return FormField(key, label, kind, required, description, (), default)
    if "default" in schema:
        default = json.dumps(schema["default"])
    return FormField(key, label, "json", required, description, (), default)


def form_for(schema: Mapping[str, Any] | None) -> QuestionForm:
    """The form that asks for an answer meeting ``schema`` (None: any JSON)."""
    approve = (("true", "Approve"), ("false", "Decline"))
    if schema is None:
        return QuestionForm("approve", approve, free_json=True)
    top = _deref(schema, schema)
    if not isinstance(top, Mapping):
        return QuestionForm("json", schema=schema)
    choices = _choices(top)
    if choices is not None:
        return QuestionForm(
            "choices", tuple((json.dumps(c), _label(c)) for c in choices), schema=schema
        )
    if top.get("type") == "boolean":
        return QuestionForm("approve", approve, schema=schema)
    props = top.get("properties")
    if top.get("type") == "object" and isinstance(props, Mapping) and props:
        required = set(top.get("required") or ())
        fields = tuple(_field(str(k), v, schema, k in required) for k, v in props.items())
        return QuestionForm("fields", fields=fields, schema=schema)
    if top.get("type") in ("string", "number", "integer"):
        return QuestionForm("fields", fields=(_field(None, top, schema, True),), schema=schema)
    fields = (FormField(None, "answer (JSON)", "json", True),)
    return QuestionForm("json", fields=fields, schema=schema)


def answer_from_form(form: QuestionForm, data: Mapping[str, str]) -> JsonValue:
    """The JSON answer a posted form gives (``data``: its fields). FormError if a field cannot
    be read; whether the answer meets the schema is checked by ``Inbox.record``. An approval
    form's answer is ``_approval_form.answer_of``'s."""
    pressed = data.get("answer")
    if pressed == FREE_JSON and form.free_json:
        return _json(data.get("json", ""), ())
    if form.kind in ("approve", "choices"):
        allowed = {value for value, _ in form.buttons}
        if pressed not in allowed:
            raise FormError(f"choose one of: {', '.join(label for _, label in form.buttons)}")
        return json.loads(pressed) if pressed is not None else None
    if form.kind == "json" or not form.fields:
        return _json(data.get("value", ""), ())
    out: dict[str, JsonValue] = {}
    for f in form.fields:
        value = _value(f, data.get(f.input_name))
        if f.key is None:
            return value if value is not _MISSING else None
        if value is not _MISSING:
            out[f.key] = value
    return out


_MISSING: Any = object()


def _value(f: FormField, text: str | None) -> Any:
    path: tuple[str | int, ...] = () if f.key is None else (f.key,)
    if f.kind == "boolean":
        return text in ("true", "on", "1")
    text = "" if text is None else text
    if f.kind == "string":
        return text if text or f.required else _MISSING
    if not text.strip():
        return _MISSING
    if f.kind == "choice":
        allowed = {value for value, _ in f.choices}
        if text not in allowed:
            raise FormError(f"{f.label}: choose one of the choices", path)
        return json.loads(text)
    if f.kind == "integer":
        try:
            return int(text.strip())
        except ValueError:
            raise FormError(f"{f.label}: {text[:40]!r} is not a whole number", path) from None
    if f.kind == "number":
        try:
            number = float(text.strip())
        except ValueError:
            raise FormError(f"{f.label}: {text[:40]!r} is not a number", path) from None
        if number != number or number in (float("inf"), float("-inf")):
            raise FormError(f"{f.label}: {text[:40]!r} is not a finite number", path)
        return int(number) if number.is_integer() and "." not in text else number
    return _json(text, path)


def _json(text: str, path: tuple[str | int, ...]) -> JsonValue:
    try:
        value: JsonValue = loads(text)
    except UnsafeJson as exc:
        where = "/".join(map(str, path)) or "the answer"
        raise FormError(f"{where}: {text[:40]!r} is {exc}", path) from None
    return value
