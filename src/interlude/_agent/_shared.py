"""Tool calls that sessions share: a fork holds its parent's calls up to the fork point, so a
call still to run there may be run by either (or by another fork of the same session). Of
those sessions, the first to claim the call runs it; the others ask a person first.

The claim is kept by the session store (``interlude.sessions.CallClaims``); a store without
call claims gets the older guard alone (the parent's stored results, read when the fork's call
is about to run). A call is named by the session it was asked in (its *origin*: the session
whose record first held the model reply asking for it), the reply's message index and the
call's tool-use id.

- The origin does not claim its calls: its save that starts one names it (``starts``), and the
  store refuses that save while another session holds the call. The origin then asks
  ``ran_in_fork`` before running it.
- Every other session (a fork, a fork of a fork) claims the call just before it would run, and
  reads the origin in the same atomic step: if another session holds it, it asks
  ``ran_in_fork``; if the origin has started it (or ran it), ``ran_in_parent``.

Both questions are answered ``"rerun"`` (run it here all the same), ``"reuse"`` (take the
result the other session stored; refused while it has none) or ``"fail"`` (tell the model
it failed).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .._interrupt import Interrupt, id_prefix, interrupt_id
from .._messages import JsonValue, Text, ToolResult, ToolUse, message_from_dict
from ._history import FORK

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._audit import AuditEntry
    from ..sessions import StoredSession
    from ._agent import Agent
    from ._context import StepContext
    from ._state import ToolCall

__all__ = [
    "RAN_IN_FORK",
    "call_key",
    "claims_of",
    "lineage",
    "origin_of",
    "ran_in_fork_question",
    "result_in",
    "settled_shared",
    "shared_guard",
    "starts_of",
    "taken_in",
]

RAN_IN_FORK = "ran_in_fork"
"""The name of the question a session asks before a call another session of its lineage
claimed first."""
RAN_CHOICES: dict[str, JsonValue] = {"enum": ["rerun", "reuse", "fail"]}
_UNTAKEN = ("pending", "before")


def claims_of(agent: Agent) -> Any:
    """The agent's session store if it keeps call claims, else None."""
    store = agent.session_store
    if store is None or agent.session_id is None:
        return None
    from ..sessions import CallClaims

    return store if isinstance(store, CallClaims) else None


def lineage(audit: Sequence[AuditEntry]) -> list[tuple[str, int]]:
    """The sessions this one's record comes from, oldest first: ``(session, kept)`` where the
    next session down kept that session's first ``kept`` messages (empty: not a fork). A fork
    made before lineages were kept names its parent alone, as having given every message."""
    if not audit:
        return []
    first = audit[0]
    if first.name != FORK or first.interrupt_id or not isinstance(first.answer, dict):
        return []
    found = first.answer.get("lineage")
    if isinstance(found, list):
        out = []
        for item in found:
            if isinstance(item, list) and len(item) == 2:
                session, kept = item
                if isinstance(session, str) and isinstance(kept, int):
                    out.append((session, kept))
        return out
    parent = first.answer.get("session")
    return [(parent, 1 << 62)] if isinstance(parent, str) else []


def origin_of(session_id: str, audit: Sequence[AuditEntry], index: int) -> str:
    """The session message ``index`` of this session's record was first recorded in."""
    current = session_id
    for session, kept in reversed(lineage(audit)):
        if index >= kept:
            break
        current = session
    return current


def call_key(origin: str, index: int, tool_use_id: str) -> str:
    """The name of a call in the stores' call claims."""
    return json.dumps([origin, index, tool_use_id], separators=(",", ":"))


def result_in(stored: StoredSession | None, index: int, call: ToolCall) -> JsonValue | None:
    """The result ``stored`` holds for ``call`` of the batch of message ``index`` (in the
    message after it, answering the call's model id), or None."""
    if stored is None or len(stored.messages) <= index + 1:
        return None
    from ._fork import _results_after

    where = f"session {stored.session_id!r}"
    kept = [message_from_dict(m, where) for m in stored.messages[index : index + 2]]
    return _results_after(kept, 0, (call,)).get(call.tool_use.id)


def taken_in(stored: StoredSession | None, index: int, call: ToolCall) -> bool:
    """Whether the session ``stored`` has started ``call`` of message ``index`` (or ran it, or
    moved on from where it would): only a journal standing at that batch with the call not yet
    started says it has not. (A session that is gone will not run it.)"""
    if stored is None:
        return False
    if result_in(stored, index, call) is not None:
        return True
    pause = stored.pause
    step = pause.get("step") if isinstance(pause, dict) else None
    if not isinstance(step, dict) or step.get("kind") != "tool_batch":
        return True
    if step.get("message_index") != index:
        return True
    for item in step.get("calls") or ():
        use = item.get("tool_use") if isinstance(item, dict) else None
        if isinstance(use, dict) and use.get("tool_use_id", use.get("id")) == call.tool_use.id:
            return item.get("phase") not in _UNTAKEN
    return True


def ran_in_fork_question(use: ToolUse, holder: str, raised_at: float) -> Interrupt:
    """The question a session asks before running ``use``, which session ``holder`` (a fork of
    it, or another fork of the session it was forked from) claimed first."""
    return Interrupt(
        id=interrupt_id("in_doubt", use.id, RAN_IN_FORK),
        name=RAN_IN_FORK,
        reason={
            "message": (
                f"tool {use.name!r} was taken for this call by session {holder!r}, which shares "
                "this record up to the call (a fork of it, or the session it was forked "
                "from). Answer 'rerun' to run it here as well, 'reuse' to take the result it "
                "had there, or 'fail' to tell the model it failed."
            ),
            "session": holder,
        },
        source="in_doubt",
        tool_use=use,
        raised_at=raised_at,
        response_schema=RAN_CHOICES,
    )


def starts_of(run: StepContext, call: ToolCall) -> list[str] | None:
    """The call, named for the store's call claims, when this session is where it was asked
    and its save that starts it must be refused if a fork claimed it first (``_shared``)."""
    agent = run.agent
    if run.journal is None or agent.session_id is None or not run.journal.claims_calls:
        return None

    index = run.batch().message_index
    if index < 0:  # a batch of its own (an undo's compensations): no other session has it
        return None
    audit = agent._state.audit
    if origin_of(agent.session_id, audit, index) != agent.session_id:
        return None  # claimed by this session before it got here
    answered, _ = run.progress.answers.lookup(
        interrupt_id("in_doubt", call.tool_use.id, RAN_IN_FORK), None
    )
    return None if answered else [call_key(agent.session_id, index, call.tool_use.id)]


async def shared_guard(
    run: StepContext, call: ToolCall
) -> tuple[Interrupt | None, ToolResult | None]:
    """A call another session sharing this record (``_shared``) ran, or claimed: the question
    to ask first (``ran_in_parent``, ``ran_in_fork``), or (answered) the result to take instead
    of running it (``"reuse"`` / ``"fail"``); (None, None) to run it (nothing shared, or
    answered ``"rerun"``)."""
    agent = run.agent
    audit = agent._state.audit
    answers = run.progress.answers
    if not audit or audit[0].name != FORK:  # not a fork: shared only through an answer
        if not answers.values:
            return None, None  # the common case, at no cost
        asked = id_prefix("in_doubt", call.tool_use.id)
        if not any(k.startswith(asked) for k in answers.values):
            return None, None
    from ._fork import RAN_IN_PARENT, parent_result_now, parent_results, ran_in_parent_question

    ran = parent_results(audit)  # None: not a fork, so every call was asked here
    if ran is None and not answers.values:
        return None, None
    use = call.active_use or call.tool_use
    index = run.batch().message_index
    if index < 0:  # a batch of its own (an undo's compensations): no other session has it
        return None, None
    for name in (RAN_IN_PARENT, RAN_IN_FORK):
        found, answer = answers.lookup(interrupt_id("in_doubt", call.tool_use.id, name), None)
        if found:
            return None, await settled_shared(run, call, name, answer)
    if ran is None:
        return None, None
    first = audit[0].answer
    parent = first.get("session") if isinstance(first, dict) else None
    if call.tool_use.id in ran:  # it ran there before the fork was made
        return ran_in_parent_question(use, parent, run.spec.clock()), None
    sid = agent.session_id
    if sid is None:
        return None, None
    origin = origin_of(sid, audit, index)
    if origin == sid:  # asked here: the save that starts it checks for a fork's claim
        return None, None
    store = claims_of(agent)
    if store is None:  # no call claims: the parent's stored results, read now
        since = await parent_result_now(agent, audit[0], index, call)
        if since is None:
            return None, None
        return ran_in_parent_question(use, parent, run.spec.clock()), None
    holder, stored = await store.claim_call(
        call_key(origin, index, call.tool_use.id), sid, origin=origin
    )
    if holder != sid:
        return ran_in_fork_question(use, holder, run.spec.clock()), None
    if taken_in(stored, index, call) or result_in(stored, index, call) is not None:
        return ran_in_parent_question(use, origin, run.spec.clock()), None
    return None, None


async def settled_shared(
    run: StepContext, call: ToolCall, name: str, answer: object
) -> ToolResult | None:
    """What a person's answer to ``ran_in_parent`` / ``ran_in_fork`` does: None to run the
    call (``"rerun"``), else the result to take instead. ResumeInputError for ``"reuse"``
    while the other session has no result stored for the call."""
    use = call.active_use or call.tool_use
    if answer == "fail":
        return _failed(use, "not run again in this session (a person answered 'fail')")
    if answer != "reuse":
        return None
    from .._messages import tool_result_from_dict
    from ._fork import parent_results

    agent = run.agent
    audit = agent._state.audit
    index = run.batch().message_index
    recorded = (parent_results(audit) or {}).get(call.tool_use.id)
    store, sid, other = agent.session_store, agent.session_id, None
    if recorded is None and store is not None and sid is not None:
        other = origin_of(sid, audit, index)
        claims = claims_of(agent)
        if name == RAN_IN_FORK and claims is not None:  # who holds it (a claim changes nothing)
            key = call_key(other, index, call.tool_use.id)
            other = (await claims.claim_call(key, other, origin=other))[0]
        recorded = result_in(await store.load(other), index, call)
    if not isinstance(recorded, dict):
        from ..errors import ResumeInputError

        raise ResumeInputError(
            f"'reuse' takes the result session {other!r} stored for this call, and it has "
            "none yet (it may still be running it): answer 'rerun' or 'fail', or 'reuse' "
            "once it has one"
        )
    return tool_result_from_dict(recorded, f"session {other!r}'s result")


def _failed(use: ToolUse, text: str) -> ToolResult:
    return ToolResult(use.id, "error", [Text(text)])
