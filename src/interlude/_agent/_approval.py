"""Per-tool approval: the question asked before a tool marked ``needs_approval`` runs, the
answers it takes, and decisions remembered for the rest of a run or a session.

A call of such a tool pauses with a before-tool question named ``approval`` (after the
before-tool hooks chose the call, so the person approves what runs). Its answer is ``True`` /
``False`` or ``{"approve": bool, "input": {...}?, "remember": "run" | "session"?, "note":
str?}``: the question's ``response_schema`` says so, with the tool's own input schema for
``input``, so a resume in any process checks an edit before anything changes.

A remembered decision answers the tool's later approval questions without asking. Run
decisions live in the run's progress (saved and signed with its pause); session decisions are
read from the audit trail (an answer that said ``"remember": "session"``, until a
``forget_decisions`` entry), so they are as durable as the trail and, for a signed agent,
only signed entries count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from .._audit import AuditEntry
from .._interrupt import APPROVAL_ID_NAME, Interrupt, _uuid5, approval_id
from .._messages import JsonValue, Message, Text, ToolResult, ToolUse

if TYPE_CHECKING:
    from .._tools import AgentTool
    from ._policing import Judged

__all__ = [
    "APPROVAL",
    "FORGET",
    "Decision",
    "approval_id",
    "approval_question",
    "approval_schema",
    "decision_of",
    "edited_note",
    "is_approval",
    "needs_approval",
    "remembered_decisions",
    "run_decisions",
    "session_decisions",
]

APPROVAL = "approval"
"""The name of the question asked before a tool that needs approval."""
FORGET = "forget_decisions"
"""The name of the audit entry that forgets remembered decisions."""
_ID_TAIL = ":" + _uuid5(APPROVAL_ID_NAME)


class Decision(NamedTuple):
    """What an approval answer says: run or not, the input to run with (None: as asked),
    for how long to remember it (None, ``"run"`` or ``"session"``) and a note for the model."""

    approve: bool
    input: Mapping[str, JsonValue] | None = None
    remember: str | None = None
    note: str | None = None


def is_approval(question: Interrupt) -> bool:
    """Whether ``question`` is a built-in approval question (not a hook's of the same name)."""
    return question.source == "before_tool_call" and question.id.endswith(_ID_TAIL)


def needs_approval(tool: AgentTool, tool_input: Mapping[str, JsonValue]) -> bool:
    """Whether a call of ``tool`` with ``tool_input`` needs a person's approval."""
    flag = getattr(tool, "needs_approval", False)
    if flag is True or flag is False:
        return flag
    if callable(flag):
        from .._frozen import thaw

        return bool(flag(thaw(tool_input)))  # the rule gets its own copy
    return bool(flag)


def approval_schema(tool: AgentTool | None) -> dict[str, JsonValue]:
    """The JSON Schema of an approval answer, ``input`` checked by the tool's input schema."""
    import copy

    input_schema: dict[str, Any] = {"type": "object"}
    defs: dict[str, Any] | None = None
    if tool is not None:
        input_schema = copy.deepcopy(dict(tool.spec.input_schema))
        defs = input_schema.pop("$defs", None)  # "#/$defs/..." refers to the root
    schema: dict[str, Any] = {
        "anyOf": [
            {"type": "boolean"},
            {
                "type": "object",
                "properties": {
                    "approve": {"type": "boolean"},
                    "input": input_schema,
                    "remember": {"enum": ["run", "session"]},
                    "note": {"type": "string", "maxLength": 2000},
                },
                "required": ["approve"],
                "additionalProperties": False,
            },
        ]
    }
    if defs:
        schema["$defs"] = defs
    return schema


def approval_question(
    tool_use: ToolUse,
    tool: AgentTool,
    now: float,
    asked: Interrupt | None,
    judged: Judged | None = None,
) -> Interrupt:
    """The question before ``tool_use`` runs ``tool`` (asked again: its first raising time);
    asked by a policy's rule (``judged``), it names the rule and takes the rule's approvers,
    quorum and deadline (a question unanswered by then is declined)."""
    raised = now if asked is None else asked.raised_at
    reason: dict[str, JsonValue] = {
        "message": f"May the agent run {tool.name} with this input?",
        "tool": tool.name,
    }
    approvers: tuple[str, ...] = ()
    quorum, expires_at = 1, None
    if judged is not None:
        reason.update(judged.reason())
        rule = judged.live
        if rule is not None and rule.then == "ask":
            approvers, quorum = rule.approvers, rule.quorum
            expires_at = None if rule.expires_in is None else raised + rule.expires_in
    return Interrupt(
        id=approval_id(tool_use.id),
        name=APPROVAL,
        reason=reason,
        source="before_tool_call",
        tool_use=tool_use,
        raised_at=raised,
        response_schema=approval_schema(tool),
        approvers=approvers,
        quorum=quorum,
        expires_at=expires_at,
        default=False if expires_at is not None else None,  # unanswered in time: declined
        has_default=expires_at is not None,
    )


def decision_of(answer: JsonValue) -> Decision:
    """The decision an approval answer gives (checked against its schema on resume; anything
    else declines: fail closed)."""
    if answer is True:
        return Decision(True)
    if isinstance(answer, Mapping) and answer.get("approve") is True:
        edited = answer.get("input")
        note = answer.get("note")
        return Decision(
            True,
            edited if isinstance(edited, Mapping) else None,
            _scope(answer.get("remember")),
            note if isinstance(note, str) else None,
        )
    if isinstance(answer, Mapping):
        note = answer.get("note")
        return Decision(
            False, None, _scope(answer.get("remember")), note if isinstance(note, str) else None
        )
    return Decision(False)


def _scope(value: object) -> str | None:
    return value if value in ("run", "session") else None


def declined_message(decision: Decision, remembered: str | None = None) -> str:
    """The error result a declined call gets."""
    text = "not approved: a person declined this tool call"
    if remembered is not None:
        text = f"not approved: a decision remembered for this {remembered} declines this tool"
    if decision.note:
        text += f" (note: {decision.note})"
    return text


def edited_note(result: ToolResult, tool_input: Mapping[str, JsonValue]) -> ToolResult:
    """``result`` saying that the call ran with the input a person gave, not the model's."""
    import json

    shown = json.dumps(tool_input, sort_keys=True, ensure_ascii=False)
    note = Text(f"[approved with edited input: the tool ran with {shown}, not the input asked]")
    return ToolResult(result.tool_use_id, result.status, [note, *result.content])


def session_decisions(
    audit: Sequence[AuditEntry],
    signed: bool,
    conversation: Sequence[Message] = (),
    key: bytes | None = None,
    session_id: str | None = None,
) -> dict[str, tuple[bool, str | None]]:
    """The decisions the audit trail remembers for the session: tool name -> (approve, the
    person's note). With ``signed`` (the agent has a signing key), only signed entries count,
    and only those about a call of this ``conversation``; given the ``key``, only in a trail
    whose chain is bound to this session (``_audit.bound_to``): an entry copied in from
    another session does not link into it, even where both models numbered calls alike."""
    if signed and key is not None:
        from .._audit import bound_to

        if not bound_to(audit, key, session_id):
            return {}
    calls = _call_ids(conversation) if signed else None
    out: dict[str, tuple[bool, str | None]] = {}
    for entry in audit:
        if signed and not (entry.chain or "").startswith("hmac-sha256:"):
            continue
        if entry.name == FORGET and not entry.interrupt_id:
            tool = entry.answer.get("tool") if isinstance(entry.answer, Mapping) else None
            if isinstance(tool, str):
                out.pop(tool, None)
            else:
                out.clear()
        elif (
            entry.tool is not None
            and isinstance(entry.answer, Mapping)
            and entry.answer.get("remember") == "session"
            and (calls is None or _call_of(entry.interrupt_id) in calls)
        ):
            decision = decision_of(entry.answer)
            out[entry.tool] = (decision.approve, decision.note)
    return out


def _call_ids(conversation: Sequence[Message]) -> set[str]:
    """The ids of the tool calls in ``conversation`` (the model's own)."""
    return {
        block.id
        for message in conversation
        if message.role == "assistant"
        for block in message.content
        if isinstance(block, ToolUse)
    }


def _call_of(iid: str) -> str:
    """The model's id of the tool call an approval question id is about."""
    scope = iid.split(":", 2)[-1][:-37]  # v1:before_tool_call:<scope>:<uuid>
    head, sep, tail = scope.rpartition("#")
    return head if sep and tail.isdigit() else scope


def run_decisions(
    decisions: Mapping[str, tuple[bool, str | None]],
    asked: Mapping[str, Interrupt],
    answers: Mapping[str, JsonValue],
) -> Mapping[str, tuple[bool, str | None]]:
    """``decisions`` with those the approval ``answers`` remember for the run (applied as
    the resume starts: every call of the tool still to be decided follows them)."""
    new = dict(decisions)
    for iid, answer in answers.items():
        question = asked[iid]
        if is_approval(question) and question.tool_use is not None:
            decision = decision_of(answer)
            if decision.remember == "run":
                new[question.tool_use.name] = (decision.approve, decision.note)
    if new == dict(decisions):
        return decisions
    from types import MappingProxyType

    return MappingProxyType(new)


def remembered_decisions(
    audit: Sequence[AuditEntry],
    run: Mapping[str, tuple[bool, str | None]],
    signed: bool,
    conversation: Sequence[Message] = (),
) -> dict[str, dict[str, JsonValue]]:
    """The decisions remembered now, by tool name: ``{"approve", "scope": "run" | "session",
    "note"?}``, from the session's audit trail and a paused run's own ``run`` decisions (which
    win); with ``signed``, only signed audit entries about calls of ``conversation`` count."""
    found = [("session", session_decisions(audit, signed, conversation)), ("run", dict(run))]
    out: dict[str, dict[str, JsonValue]] = {}
    for scope, decisions in found:
        for tool, (approve, note) in decisions.items():
            out[tool] = {"approve": approve, "scope": scope}
            if note is not None:
                out[tool]["note"] = note
    return out
