"""The agent's policy at a tool call (``Agent(policy=..., shadow=...)``, see
``interlude.policy``): the verdict on the call about to run, and its entry in the audit trail.

The verdict is reached after the before-tool hooks chose the call (the policy judges what would
run) and combined with the tool's own ``needs_approval`` in ``_approving``: the strictest wins
(``deny`` over everything, ``ask`` over ``allow``). Each call's decision is recorded once, as an
audit entry named ``policy`` under :func:`~interlude._interrupt.policy_id` of the call: the
live verdict (its policy version and rule), the shadow policy's beside it, and the call's path
and source (what a later replay needs to judge it as a live run did).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from .._audit import AuditEntry
from .._interrupt import Interrupt, policy_id
from .._messages import JsonValue, ToolUse

if TYPE_CHECKING:
    from .._tools import AgentTool
    from ..policy import Verdict
    from ._context import StepContext

__all__ = ["NOBODY", "POLICY", "Judged", "judge", "source_of"]

POLICY = "policy"
"""The name (and ``by``) of the audit entry that records a policy's decision about a call."""


def source_of(tool: AgentTool) -> str:
    """Where ``tool`` comes from, as a policy sees it: its ``policy_source`` (MCP tools, agents
    as tools, remote agents, graphs say), else ``"local"``."""
    source = getattr(tool, "policy_source", None)
    return source if isinstance(source, str) else "local"


def _path(run: StepContext) -> tuple[str, ...]:
    """The names of the agents the call came through, outermost first, ending with this one
    (unnamed agents are left out)."""
    from ._subagent import _CHAIN

    chain = _CHAIN.get() or (run.agent,)
    return tuple(a.name for a in chain if a.name)


class Judged(NamedTuple):
    """The live policy's verdict on a call (None: the agent has none) and the shadow's."""

    live: Verdict | None
    shadow: Verdict | None

    def reason(self) -> dict[str, JsonValue]:
        """What an approval question shows of them: the rule that asked, the shadow's view."""
        out: dict[str, JsonValue] = {}
        if self.live is not None:
            out["policy"] = self.live.to_dict()
        if self.shadow is not None:
            out["shadow"] = self.shadow.to_dict()
        return out


NOBODY = Judged(None, None)


def judge(
    run: StepContext,
    call_id: str,
    use: ToolUse,
    tool: AgentTool,
    answered: bool,
    *,
    deny_only: bool = False,
) -> Judged:
    """The policies' verdicts on ``use``; the decision is added to the audit trail the first
    time the call is judged (``deny`` always: it ends the call), with the shadow policy's
    verdict beside it. ``answered``: a person already answered the call's approval question
    (their answer binds unless the policy now denies); ``deny_only``: record only a deny (the
    call as the model asked it, judged before the before-tool hooks see it)."""
    spec = run.spec
    live, shadow = spec.policy, spec.shadow
    if live is None and shadow is None:
        return NOBODY
    from ..policy import PolicyCall

    source, path = source_of(tool), _path(run)
    seen = PolicyCall(
        tool.name,
        use.input,
        agent=spec.name,
        session=run.agent.session_id,
        path=path,
        source=source,
        call_id=call_id,
    )
    verdict = None if live is None else live.decide(seen)
    judged = Judged(verdict, None if shadow is None else shadow.decide(seen))
    if (answered or deny_only) and (verdict is None or verdict.then != "deny"):
        return judged
    pid = policy_id(call_id)
    if (verdict is not None and verdict.then == "deny") or not _recorded(run, pid):
        record: dict[str, JsonValue] = {} if verdict is None else verdict.to_dict()
        record["call"] = {"path": list(path), "source": source}
        if judged.shadow is not None:
            record["shadow"] = judged.shadow.to_dict()
        question = Interrupt(
            id=pid,
            name=POLICY,
            reason={"tool": tool.name},
            source="before_tool_call",
            tool_use=ToolUse(use.id, tool.name, use.input),
        )
        run.record(
            AuditEntry.of(question, record, POLICY, run.progress.answers.clock(), tool=tool.name)
        )
    return judged


def _recorded(run: StepContext, pid: str) -> bool:
    """Whether the trail holds this call's decision already (judged again on a resume), and
    from now on it does: the caller records it."""
    judged = run.judged
    if judged is None:  # once per run: the decisions of earlier runs
        audit = run.agent._state.audit
        judged = run.judged = {e.interrupt_id for e in audit if e.name == POLICY}
    if pid in judged:
        return True
    judged.add(pid)
    return False
