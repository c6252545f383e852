"""A question as an MCP form (elicitation, form mode), and the form's reply as its answer.

MCP forms are flat: an object whose properties are strings, numbers, booleans or string enums.
A question's response schema is drawn as such a form where it can be:

- an object (or an object among the ``anyOf`` choices, as the built-in approval's
  ``{"approve", "remember", "note", "input"}``) whose required properties are all flat: its
  flat properties are the fields (``input``, an edit of the call, is left to the inbox);
- a flat value (``true``/``false``, a number, a text, one of a list): one field, ``answer``;
- anything else: one text field, ``answer``, read as JSON (or as the text itself).

What the reply means is the floor's to check, as for every door: the answer is checked against
the question's own schema when it is recorded, never against the form's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .._interrupt import Interrupt
    from .._messages import JsonValue

__all__ = ["Form", "decline_of", "form_of", "message_of", "reason_text"]

_FORMATS = frozenset({"email", "uri", "date", "date-time"})
_TEXT_KEYS = ("message", "question", "text", "prompt")
FIELD = "answer"
"""The one field of a form that asks for a single value."""
HINTS = {
    "approve": ("Approve", "Run the call (leave it unticked to decline it)"),
    "remember": (
        "Remember",
        "Decide the same for this tool's later calls: for this run, or for the session",
    ),
    "note": ("Note", "A few words for the agent (optional)"),
}
"""Titles and descriptions of the approval answer's fields (docs/approvals.md), for a field
its schema leaves unnamed."""


@dataclass(frozen=True, slots=True)
class Form:
    """What a client is asked to fill in (``schema``, a flat object) and how its reply reads:
    ``"object"`` (the reply is the answer), ``"value"`` (the reply's ``answer``) or ``"json"``
    (the reply's ``answer``, parsed as JSON when it is JSON)."""

    kind: Literal["object", "value", "json"]
    schema: dict[str, Any]

    def answer(self, content: Mapping[str, Any] | None) -> JsonValue:
        """The answer a reply's content gives; ValueError when it gives none."""
        content = dict(content or {})
        if self.kind == "object":  # only the form's own fields (an edit is not one of them)
            fields = self.schema.get("properties") or {}
            return {k: v for k, v in content.items() if v is not None and k in fields}
        if content.get(FIELD) is None:
            raise ValueError(f"the reply has no {FIELD!r}")
        value: JsonValue = content[FIELD]
        if self.kind == "json" and isinstance(value, str):
            try:
                parsed: JsonValue = json.loads(value)
            except ValueError:
                return value  # plain text is an answer too
            return parsed
        return value


def form_of(question: Interrupt) -> Form:
    """The form that asks ``question`` (see the module's docstring)."""
    schema = question.response_schema
    choices: list[Any] = [schema]
    if isinstance(schema, Mapping):
        choices = list(schema.get("anyOf") or schema.get("oneOf") or [schema])
    for choice in choices:
        fields = _object_fields(choice)
        if fields is not None:
            for key, field in fields.items():
                title, description = HINTS.get(key, (key.replace("_", " ").capitalize(), None))
                field.setdefault("title", title)
                if description is not None:
                    field.setdefault("description", description)
            required = [k for k in _required(choice) if k in fields]
            return Form("object", _flat(fields, required))
    for choice in choices:
        field = _field(choice)
        if field is not None:
            field.setdefault("title", "Yes" if field["type"] == "boolean" else "Answer")
            return Form("value", _flat({FIELD: field}, [FIELD]))
    text = {"type": "string", "title": "Answer", "description": "JSON, or plain text"}
    return Form("json", _flat({FIELD: text}, [FIELD]))


def _flat(fields: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": fields, "required": required}


def _required(schema: Mapping[str, Any]) -> list[str]:
    required = schema.get("required") or []
    return [k for k in required if isinstance(k, str)]


def _object_fields(schema: object) -> dict[str, Any] | None:
    """The flat fields of an object schema whose required properties are all flat; None for
    anything else (or an object with no flat field)."""
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return None
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return None
    fields = {k: f for k, p in properties.items() if (f := _field(p)) is not None}
    if not fields or any(k not in fields for k in _required(schema)):
        return None
    return fields


def _field(schema: object) -> dict[str, Any] | None:
    """``schema`` as an MCP form field (a primitive schema), or None when it is not flat."""
    if not isinstance(schema, Mapping):
        return None
    kind, enum = schema.get("type"), schema.get("enum")
    keep: tuple[str, ...] = ("title", "description")
    if enum is not None:
        if not enum or kind not in (None, "string") or not all(isinstance(v, str) for v in enum):
            return None
        field: dict[str, Any] = {"type": "string", "enum": list(enum)}
    elif kind == "boolean":
        field, keep = {"type": "boolean"}, (*keep, "default")
    elif kind in ("number", "integer"):
        field, keep = {"type": kind}, (*keep, "minimum", "maximum", "default")
    elif kind == "string":
        field, keep = {"type": "string"}, (*keep, "minLength", "maxLength", "default")
        if schema.get("format") in _FORMATS:
            field["format"] = schema["format"]
    else:
        return None
    field.update({k: schema[k] for k in keep if k in schema})
    return field


def reason_text(question: Interrupt) -> str:
    """What a question says, as text: its reason when that is text, else the reason's message
    (or question), else the reason as JSON, else the question's name."""
    reason = question.reason
    if isinstance(reason, str) and reason.strip():
        return reason
    if isinstance(reason, Mapping):
        for key in _TEXT_KEYS:
            text = reason.get(key)
            if isinstance(text, str) and text.strip():
                return text
    if reason is not None:
        return json.dumps(reason, sort_keys=True, default=str)[:1000]
    return question.name


def message_of(question: Interrupt, agent: str, session: str, problem: str | None) -> str:
    """The text a client shows with the form: what was wrong with the last reply (if
    anything), the question, the call it is about, and whose session it is."""
    lines = [f"Not accepted: {problem}", ""] if problem else []
    lines.append(reason_text(question))
    use = question.tool_use
    if use is not None:
        call = json.dumps(dict(use.input), sort_keys=True, default=str)
        lines.append(f"{use.name} {call[:2000]}")
    lines.append(f"(agent {agent}, session {session})")
    return "\n".join(lines)


def decline_of(question: Interrupt, now: float) -> JsonValue:
    """The answer that declines ``question``: ``"fail"`` for a call in doubt, else ``false``,
    ``{"approve": false}`` or ``"decline"`` (a relayed MCP question), whichever its schema
    takes; None when it takes none of them (it cannot be declined: it must be answered)."""
    from .._agent import check_answers
    from ..errors import ResumeError

    candidates: list[JsonValue] = ["fail"] if question.source == "in_doubt" else []
    candidates += [False, {"approve": False}, "decline"]
    for value in candidates:
        try:
            check_answers({question.id: question}, {question.id: value}, now)
        except ResumeError:
            continue
        return value
    return None
