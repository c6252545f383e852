"""The form of a built-in tool approval (a question named ``approval``): Approve / Decline,
the call's input to edit (JSON, pre-filled with the call as asked), "remember for this run /
session" and a note for the model.

The answer sent is ``True`` / ``False`` when nothing but the button was used, else the object
form ``{"approve", "input"?, "remember"?, "note"?}``: ``input`` only when an approval changed
it (a decline never runs the call, so an edit there means nothing and is not sent).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .._messages import JsonValue
from ._forms import FormError, QuestionForm, _json, answer_from_form, form_for

if TYPE_CHECKING:
    from .._interrupt import Interrupt

__all__ = ["REMEMBER", "answer_of", "approval_answer", "approval_form", "form_of"]

REMEMBER = (
    ("", "just this call"),
    ("run", "for the rest of this run"),
    ("session", "for the session"),
)
"""The choices of "remember this decision": (value, label)."""


def approval_form(question: Interrupt) -> QuestionForm:
    """The form of an approval question: its input pre-filled as pretty JSON."""
    tool_input = {} if question.tool_use is None else dict(question.tool_use.input)
    return QuestionForm(
        "approval",
        (("true", "Approve"), ("false", "Decline")),
        schema=question.response_schema,
        input_text=json.dumps(tool_input, indent=2, ensure_ascii=False),
    )


def approval_answer(form: QuestionForm, data: Mapping[str, str]) -> JsonValue:
    """The answer a posted approval form gives (FormError for a field it cannot read)."""
    pressed = data.get("answer")
    if pressed not in ("true", "false"):
        raise FormError("choose Approve or Decline")
    approve = pressed == "true"
    out: dict[str, JsonValue] = {"approve": approve}
    text = data.get("input", "")
    if approve and text.strip():
        edited = _json(text, ("input",))
        if edited != json.loads(form.input_text):
            out["input"] = edited
    remember = data.get("remember", "")
    if remember not in {value for value, _ in REMEMBER}:
        raise FormError("remember: choose one of the choices", ("remember",))
    if remember:
        out["remember"] = remember
    note = data.get("note", "").strip()
    if note:
        out["note"] = note
    return approve if len(out) == 1 else out


def form_of(question: Interrupt) -> QuestionForm:
    """How to ask for ``question``'s answer: the approval form for a tool approval, else the
    form its answer schema makes."""
    from .._agent import is_approval

    return approval_form(question) if is_approval(question) else form_for(question.response_schema)


def answer_of(form: QuestionForm, data: Mapping[str, str]) -> JsonValue:
    """The JSON answer a posted form gives, an approval's or any other's (FormError if a field
    cannot be read)."""
    if form.kind == "approval":
        return approval_answer(form, data)
    return answer_from_form(form, data)
