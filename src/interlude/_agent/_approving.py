"""Approvals in a tool batch: the arguments checked before anyone is asked, then the approval
of a call whose tool needs one (an answer, a remembered decision, or the question), and the
note on a result that ran with a person's edit (see ``_approval`` for the rules and values)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .._audit import AuditEntry
from .._interrupt import Interrupt
from .._messages import ToolResult, ToolUse
from .._tools import FunctionTool
from ..errors import ToolInputError
from ..models import INVALID_JSON_KEY
from ._approval import (
    Decision,
    approval_id,
    approval_question,
    decision_of,
    declined_message,
    edited_note,
    needs_approval,
)
from ._policing import NOBODY, judge
from ._state import ToolCall

if TYPE_CHECKING:
    from .._tools import AgentTool
    from ..policy import Verdict
    from ._context import StepContext

__all__ = [
    "approve",
    "denied_first",
    "denied_message",
    "gated",
    "governed",
    "invalid_input",
    "noted",
]


def gated(tool: AgentTool) -> bool:
    """Whether calls of ``tool`` may need approval (then their input is checked first)."""
    return getattr(tool, "needs_approval", False) is not False


def invalid_input(tool: AgentTool, tool_use: ToolUse) -> str | None:
    """Why the model's input cannot run ``tool`` (the error result it gets), or None: checked
    before any hook or person is asked about the call, so no one approves a call that fails."""
    raw = tool_use.input.get(INVALID_JSON_KEY)
    if isinstance(raw, str) and len(tool_use.input) == 1:
        return f"the arguments for tool {tool_use.name!r} are not valid JSON: {raw!r}"
    # A FunctionTool keeps what it validated here for the run that follows (``check``).
    validate = tool.check if isinstance(tool, FunctionTool) else getattr(tool, "validate", None)
    if validate is None:
        return None
    try:
        validate(tool_use.input)
    except ToolInputError as exc:
        return f"ToolInputError: {exc}"
    return None


def approve(run: StepContext, call: ToolCall) -> tuple[ToolCall, list[Interrupt], str | None]:
    """Approve the call about to run if its tool or the agent's policy needs it: by an answer
    to its approval question, or a remembered decision; else ask. Returns the call (with the
    input a person gave, if they edited it), the question, and the error message of a
    declined (or denied) call."""
    if call.active_use is None:
        use, tool = call.tool_use, run.spec.tools.get(call.tool_use.name)
    else:
        use, tool = call.active_use, call.tool
        if tool is None and call.tool_name is not None:  # chosen in another process
            tool = run.spec.tools.get(call.tool_name)
    policed = governed(run)
    if tool is None or not (policed or gated(tool)):
        return call, [], None
    shown = ToolUse(use.id, tool.name, use.input)
    iid = approval_id(call.tool_use.id)
    answers = run.progress.answers
    # A person's answer binds: the rule is not asked again for a call they answered (a rule
    # that now says "no approval needed" cannot turn their decline into a run); only a
    # policy's deny beats it.
    found, answer = answers.lookup(iid, shown)
    judged = judge(run, call.tool_use.id, use, tool, found) if policed else NOBODY
    verdict = judged.live
    if verdict is not None and verdict.then == "deny":
        return call, [], denied_message(verdict)
    if not found:
        asks = verdict is not None and verdict.then == "ask"
        if not asks and not needs_approval(tool, use.input):  # (allowed, or no rule at all)
            return call, [], None
    if found:  # (a "remember" in it was applied as the resume started)
        decision = decision_of(answer)
    else:
        remembered = _remembered(run, tool.name)
        if remembered is None:
            question = approval_question(
                shown, tool, answers.clock(), answers.asked.get(iid), judged
            )
            return call, [question], None
        scope, approve, note = remembered
        asked = approval_question(shown, tool, answers.clock(), None, judged)
        run.record(
            AuditEntry.of(
                asked,
                {"approve": approve, "remembered": scope},
                f"decision:{scope}",
                asked.raised_at,
                tool=tool.name,
            )
        )
        if not approve:
            return call, [], declined_message(Decision(False, note=note), scope)
        decision = None
    if decision is not None and not decision.approve:
        return call, [], declined_message(decision)
    if decision is not None and decision.input is not None:
        edited = ToolUse(call.tool_use.id, use.name, decision.input)  # type: ignore[arg-type]
        call = call.but(active_use=edited, tool=tool, tool_name=tool.name)
    return call, [], None


def denied_first(run: StepContext, use: ToolUse, tool: AgentTool) -> str | None:
    """The error message of a call the policy denies as the model asked it (then no
    before-tool hook sees it, so no hook asks anyone about it), else None."""
    verdict = judge(run, use.id, use, tool, False, deny_only=True).live
    return None if verdict is None or verdict.then != "deny" else denied_message(verdict)


def governed(run: StepContext) -> bool:
    """Whether the agent has a policy (live or shadow): then every call is judged."""
    spec = run.spec
    return spec.policy is not None or spec.shadow is not None


def denied_message(verdict: Verdict) -> str:
    """The error result of a call the policy denies."""
    text = f"denied by policy: {verdict.rule_text}"
    if verdict.version is not None:
        text = f"denied by policy {verdict.version}: {verdict.rule_text}"
    if verdict.note:
        text += f" (note: {verdict.note})"
    return text


def _remembered(run: StepContext, tool_name: str) -> tuple[str, bool, str | None] | None:
    """The decision remembered for ``tool_name``: ("run" or "session", approve, note), or
    None."""
    decision = run.progress.decisions.get(tool_name)
    if decision is not None:
        return "run", *decision
    decision = run.session_decisions().get(tool_name)
    if decision is not None:
        return "session", *decision
    return None


def noted(run: StepContext, call: ToolCall, result: ToolResult) -> ToolResult:
    """The result of a call that ran with other input than the model's: said so if a person
    edited it when approving (not when a hook changed it)."""
    answer = run.progress.answers.values.get(approval_id(call.tool_use.id))
    if isinstance(answer, Mapping) and answer.get("input") is not None:
        assert call.active_use is not None
        return edited_note(result, call.active_use.input)
    return result
