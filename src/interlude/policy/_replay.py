"""``Policy.replay``: what a candidate policy would have decided about every tool call in a
store's sessions, beside what happened, without calling a model or running a tool.

Each session is read as it is stored (its conversation and audit trail; no agent is built).
Every tool call the model made is one call examined; what *happened* to it comes from the
trail: a policy's ``deny`` (``denied``), a person's or a remembered answer to its approval
question (``approved``, ``edited``, ``declined``; a question that expired unanswered is
declined), else a result (``ran unasked``), else nothing yet (``pending``). The candidate
judges the call as a live run would have: tool, input, agent, session, and the path and
source a live policy recorded (a call made before any policy was set has neither: a rule that
reads them leaves the call *unjudged*, reported as such, not guessed).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._audit import AuditEntry
from .._interrupt import EXPIRY, approval_id, policy_id
from .._messages import Message, ToolResult, ToolUse, messages_from_dicts
from ._call import Decision, PolicyCall

if TYPE_CHECKING:
    from ..sessions import SessionStore, StoredSession
    from ._policy import Policy

__all__ = ["ReplayChange", "ReplayReport", "UnjudgedCall", "replay"]

_CLASS: dict[str, Decision] = {  # what happened, as the decision that led to it
    "ran unasked": "allow",
    "approved": "ask",
    "edited": "ask",
    "declined": "ask",
    "pending": "ask",
    "denied": "deny",
}


@dataclass(frozen=True, slots=True)
class ReplayChange:
    """A call the candidate would have decided otherwise: ``happened`` is what the record
    says (``"ran unasked"``, ``"approved"``, ``"edited"``, ``"declined"``, ``"denied"`` or
    ``"pending"``), ``would`` the candidate's decision, ``rule`` the candidate's rule that
    made it; ``input_digest`` is ``sha256:<hex>`` of the call's input (canonical JSON)."""

    session_id: str
    call_id: str
    tool: str
    happened: str
    would: Decision
    rule: str = ""
    input_digest: str = ""


@dataclass(frozen=True, slots=True)
class UnjudgedCall:
    """A call the candidate could not judge: a rule needed ``field``, which its record lacks."""

    session_id: str
    call_id: str
    tool: str
    field: str


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """What :meth:`Policy.replay` found: ``calls`` examined (in ``sessions`` sessions), how many
    the candidate ``would`` allow / ask / deny (unjudged calls not counted), the ``changes``
    against what happened, and the ``unjudged`` calls; ``skipped`` calls were outside
    ``since`` (or had no recorded time to tell)."""

    calls: int = 0
    would: Mapping[str, int] = field(default_factory=lambda: {"allow": 0, "ask": 0, "deny": 0})
    changes: list[ReplayChange] = field(default_factory=list)
    unjudged: list[UnjudgedCall] = field(default_factory=list)
    sessions: int = 0
    skipped: int = 0

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {
            "calls": self.calls,
            "sessions": self.sessions,
            "skipped": self.skipped,
            "would": dict(self.would),
            "changes": [asdict(c) for c in self.changes],
            "unjudged": [asdict(u) for u in self.unjudged],
        }


async def replay(
    policy: Policy,
    store: SessionStore | str,
    *,
    agents: Iterable[str] | None = None,
    since: float | None = None,
) -> ReplayReport:
    opened = None
    if isinstance(store, str):
        from ..sessions import open_store

        store = opened = open_store(store)
    wanted = None if agents is None else set(agents)
    tally = _Tally()
    try:
        for session_id in await store.list_sessions():
            stored = await store.load(session_id)
            if stored is None or (wanted is not None and stored.agent not in wanted):
                continue
            tally.sessions += 1
            _judge_session(policy, stored, since, tally)
    finally:
        if opened is not None:
            close = getattr(opened, "aclose", None) or getattr(opened, "close", None)
            if close is not None:
                done = close()
                if hasattr(done, "__await__"):
                    await done
    return ReplayReport(
        calls=tally.calls,
        would=tally.would,
        changes=tally.changes,
        unjudged=tally.unjudged,
        sessions=tally.sessions,
        skipped=tally.skipped,
    )


@dataclass(slots=True)
class _Tally:
    """The report as the replay builds it (the report itself is a frozen value)."""

    calls: int = 0
    would: dict[str, int] = field(default_factory=lambda: {"allow": 0, "ask": 0, "deny": 0})
    changes: list[ReplayChange] = field(default_factory=list)
    unjudged: list[UnjudgedCall] = field(default_factory=list)
    sessions: int = 0
    skipped: int = 0


def _judge_session(
    policy: Policy, stored: StoredSession, since: float | None, report: _Tally
) -> None:
    messages = messages_from_dicts(stored.messages, f"session {stored.session_id!r} messages")
    entries = [AuditEntry.from_dict(e) for e in stored.audit]
    by_id: dict[str, list[AuditEntry]] = {}
    for entry in entries:
        by_id.setdefault(entry.interrupt_id, []).append(entry)
    results = _results(messages)
    for use in _calls(messages):
        recorded = by_id.get(policy_id(use.id), [])
        answered = by_id.get(approval_id(use.id), [])
        times = [e.at for e in (*recorded, *answered)]
        if since is not None and (not times or max(times) < since):
            report.skipped += 1
            continue
        report.calls += 1
        seen = _seen(recorded)
        call = PolicyCall(
            use.name,
            use.input,
            agent=stored.agent,
            session=stored.session_id,
            path=seen.get("path"),
            source=seen.get("source"),
            call_id=use.id,
        )
        verdict = policy.decide(call)
        if verdict.unjudged is not None:
            report.unjudged.append(
                UnjudgedCall(stored.session_id, use.id, use.name, verdict.unjudged)
            )
            continue
        report.would[verdict.then] += 1
        happened = _happened(recorded, answered, use.id in results)
        if _CLASS[happened] != verdict.then:
            report.changes.append(
                ReplayChange(
                    stored.session_id,
                    use.id,
                    use.name,
                    happened,
                    verdict.then,
                    verdict.rule_text,
                    _digest(use.input),
                )
            )


def _calls(messages: list[Message]) -> Iterable[ToolUse]:
    for message in messages:
        if message.role == "assistant":
            for block in message.content:
                if isinstance(block, ToolUse):
                    yield block


def _results(messages: list[Message]) -> set[str]:
    return {
        block.tool_use_id
        for message in messages
        if message.role == "user"
        for block in message.content
        if isinstance(block, ToolResult)
    }


def _seen(recorded: list[AuditEntry]) -> dict[str, Any]:
    """The call's path and source as a live policy recorded them (tuple, str), if it did."""
    for entry in recorded:
        answer = entry.answer
        call = answer.get("call") if isinstance(answer, Mapping) else None
        if isinstance(call, Mapping):
            path, source = call.get("path"), call.get("source")
            out: dict[str, Any] = {}
            if isinstance(path, list | tuple) and all(isinstance(p, str) for p in path):
                out["path"] = tuple(path)
            if isinstance(source, str):
                out["source"] = source
            return out
    return {}


def _happened(recorded: list[AuditEntry], answered: list[AuditEntry], has_result: bool) -> str:
    for entry in recorded:
        answer = entry.answer
        if isinstance(answer, Mapping) and answer.get("then") == "deny":
            return "denied"
    if answered:
        last = answered[-1]  # (votes toward a quorum come first; the last settles it)
        answer = last.answer
        if last.by == EXPIRY and answer is None:
            return "declined"
        if answer is True:
            return "approved"
        if isinstance(answer, Mapping) and answer.get("approve") is True:
            return "edited" if answer.get("input") is not None else "approved"
        if answer is False or isinstance(answer, Mapping):
            return "declined"
        return "pending" if not has_result else "approved"
    return "ran unasked" if has_result else "pending"


def _digest(value: Any) -> str:
    from .._frozen import thaw

    text = json.dumps(thaw(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
