"""Forking a session at a checkpoint: a new agent standing at that step of the record.

Everything before the fork point is taken from the record, never done again: the fork's
conversation is the parent's up to that point, its ``agent.state`` the parent's as it is now
(the record keeps no earlier copies of it), and its audit trail begins with one ``fork``
entry naming the parent session and the checkpoint. The parent, and its stored session, are
not changed.

Where the fork stands, by the kind of checkpoint:

- an open question of the parent: the parent's pause as it is (every question of it open);
- an answered question about a tool call: the model reply that asked for the call, its batch
  of calls run again up to their questions, so the question is asked again (with the same
  id) and can be answered differently. Hook callbacks run again there; models and tools do
  not (a call would first meet the guard below);
- a prompt or tool results: before the model call that followed (``recover`` carries on);
- a model reply: with its tool calls still to run (``recover`` carries on), or, for a final
  reply, at the end of that run (a new prompt goes on from there).

The guard: a tool call that has a result in the parent's record does not run in the fork
unless a person says so. It stops first with a ``ran_in_parent`` question about the call
(source ``in_doubt``), answered ``"rerun"`` (run it again), ``"reuse"`` (take the parent's
result; the tool does not run) or ``"fail"`` (tell the model it failed).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from .._audit import AuditEntry, chained
from .._interrupt import Interrupt, interrupt_id
from .._messages import JsonValue, Message, ToolResult, ToolUse, block_to_dict
from ..errors import AgentBusyError, ConfigurationError, UnknownCheckpointError
from ._history import FORK, Checkpoint, batches_of, checkpoints_of, tool_use_of
from ._state import BeforeModelCall, Position, Progress, ToolBatch, ToolCall, Undoing

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ._agent import Agent
    from ._state import Step

__all__ = [
    "RAN_IN_PARENT",
    "fork_agent",
    "parent_result_now",
    "parent_results",
    "ran_in_parent_question",
]

RAN_IN_PARENT = "ran_in_parent"
"""The name of the question a fork asks before a call that ran in its parent."""
RAN_CHOICES: dict[str, JsonValue] = {"enum": ["rerun", "reuse", "fail"]}


def parent_results(audit: Sequence[AuditEntry]) -> Mapping[str, JsonValue] | None:
    """The results the parent's record holds, by tool use id, for a forked session (its
    trail begins with the ``fork`` entry); None for any other session (checked in O(1))."""
    if not audit:
        return None
    first = audit[0]
    if first.name != FORK or first.interrupt_id or not isinstance(first.answer, dict):
        return None
    ran = first.answer.get("ran")
    return ran if isinstance(ran, dict) else None


async def parent_result_now(
    fork: Agent, link: AuditEntry, index: int, call: ToolCall
) -> JsonValue | None:
    """The result the parent's stored session holds now for ``call`` of the batch of message
    ``index`` (both records share the messages up to there), or None: none, or no store to
    read it from. A fork made at an open question, answered in the parent after, must not
    run the call a second time unasked: it is read when the fork's answer is applied."""
    store = fork.session_store
    parent = link.answer.get("session") if isinstance(link.answer, dict) else None
    if store is None or not isinstance(parent, str):
        return None
    stored = await store.load(parent)
    if stored is None or len(stored.messages) <= index + 1:
        return None
    from .._messages import message_from_dict

    where = f"session {parent!r} (the fork's parent)"
    kept = [message_from_dict(m, where) for m in stored.messages[index : index + 2]]
    return _results_after(kept, 0, (call,)).get(call.tool_use.id)


def ran_in_parent_question(use: ToolUse, parent: str | None, raised_at: float) -> Interrupt:
    """The question a fork asks before running ``use``, which ran in the parent session."""
    return Interrupt(
        id=interrupt_id("in_doubt", use.id, RAN_IN_PARENT),
        name=RAN_IN_PARENT,
        reason={
            "message": (
                f"tool {use.name!r} already ran for this call in the session this one was "
                f"forked from ({parent!r}). Answer 'rerun' to run it again, 'reuse' to take the "
                "result it had there, or 'fail' to tell the model it failed."
            ),
            "parent": parent,
        },
        source="in_doubt",
        tool_use=use,
        raised_at=raised_at,
        response_schema=RAN_CHOICES,
    )


def _find(points: list[Checkpoint], at: str) -> Checkpoint:
    target = at[len("answer:") :] if at.startswith("answer:") else at
    for point in points:
        if point.id == target:
            return point
    known = ", ".join(p.id for p in points[:8])
    raise UnknownCheckpointError(
        f"no checkpoint {at!r} in this session's record (agent.checkpoints() lists them: "
        f"{known}{', ...' if len(points) > 8 else ''})"
    )


def _results_after(
    messages: Sequence[Message], index: int, calls: tuple[ToolCall, ...]
) -> dict[str, JsonValue]:
    """The results the record holds for the ``calls`` of message ``index`` (in the message
    after it, each answering its call's model id, in order), by the id each call ran under."""
    if index + 1 >= len(messages):
        return {}
    results = [b for b in messages[index + 1].content if isinstance(b, ToolResult)]
    out: dict[str, JsonValue] = {}
    for call in calls:
        for i, result in enumerate(results):
            if result.tool_use_id == call.answer_id:
                out[call.tool_use.id] = block_to_dict(results.pop(i))
                break
    return out


def _standing(
    point: Checkpoint,
    messages: Sequence[Message],
    position: Position | None,
    batches: dict[int, tuple[ToolCall, ...]],
) -> tuple[int, Position | None, bool]:
    """How many messages the fork keeps, where it stands, and whether it is driven to its
    questions (an answered question asked again)."""
    pending = {q.id for q in position.interrupts} if position is not None else set()
    if point.kind == "question" and point.id in pending:
        if position is not None and isinstance(position.step, Undoing):
            raise UnknownCheckpointError(
                f"question {point.id!r} belongs to an undo under way: a fork would carry the "
                "undo on beside this session (its compensations twice); fork at a step before "
                "the undo's checkpoint instead"
            )
        return len(messages), position, False
    if point.kind == "question":
        if tool_use_of(point.id) is None or point.message_index < 0:
            raise UnknownCheckpointError(
                f"question {point.id!r} was not about a tool call: fork at the message "
                "checkpoint before it (agent.checkpoints()), and carry on from there"
            )
        index = point.message_index
        return index + 1, Position(ToolBatch(index, batches[index]), [], Progress()), True
    if point.kind == "fork":
        raise UnknownCheckpointError("fork at a step of the record, not at the fork entry")
    if point.kind == "answer":  # pragma: no cover - answers are looked up as their question
        raise UnknownCheckpointError(f"no checkpoint {point.id!r}")
    index = point.message_index
    message = messages[index]
    step: Step | None = None
    if message.role == "assistant":
        if index in batches:
            step = ToolBatch(index, batches[index])
    else:
        step = BeforeModelCall()
    return index + 1, None if step is None else Position(step, [], Progress()), False


async def fork_agent(parent: Agent, at: str, session_id: str | None, by: str | None) -> Agent:
    """A new agent standing at checkpoint ``at`` of ``parent``'s record (see the module)."""
    from ._agent import Agent
    from ._codec import encode_state

    await parent.load()
    if parent.is_running:
        raise AgentBusyError("cannot fork while a run is going")
    standing = parent._loaded()
    messages = list(standing.messages)
    position = standing.position
    pending = list(position.interrupts) if position is not None else []
    point = _find(checkpoints_of(messages, standing.audit, pending), at)
    batches = batches_of(messages)
    keep, where, drive = _standing(point, messages, position, batches)
    ran: dict[str, JsonValue] = {}
    for index, calls in batches.items():  # every kept call the parent has a result for
        if index < keep:
            ran.update(_results_after(messages, index, calls))
    key = parent._key
    answer: dict[str, JsonValue] = {"session": parent.session_id, "checkpoint": point.id}
    answer["ran"] = ran
    if parent.session_id is not None:  # where each kept message was first recorded
        from ._shared import lineage

        kept = [[s, n] for s, n in lineage(standing.audit)] + [[parent.session_id, keep]]
        answer["lineage"] = kept
    link = AuditEntry(
        interrupt_id="",
        name=FORK,
        answer=answer,
        by=by or "unknown",
        at=parent.clock(),
        shown="",
    )
    store = parent.session_store
    if store is None and session_id is not None:
        raise ConfigurationError("session_id= is for an agent with a session store")
    new_id = None
    if store is not None:
        new_id = session_id or f"{parent.session_id}.fork-{uuid.uuid4().hex[:8]}"
    audit = chained((), [link], key, new_id)  # the fork's own trail, bound to it
    data = parent._saved_state()
    encoded = encode_state(
        messages[:keep], data, where, list(parent._tools), agent=parent.name, audit=audit, key=key
    )
    if store is None or new_id is None:
        fork = Agent.from_spec(parent.spec)
        fork.import_state(encoded)
    else:
        from ..sessions import fork_by_copy, fork_update

        update = fork_update(encoded, keep)
        own = getattr(store, "fork", None)  # a store written elsewhere may lack it: copy
        if own is not None:
            await own(parent.session_id or "", new_id, update)
        else:
            await fork_by_copy(store, parent.session_id or "", new_id, update)
        fork = Agent.from_spec(parent.spec, session=store, session_id=new_id)
        await fork.load()
    if drive:  # the batch's hooks run again, up to their questions (no model, no tool)
        await fork.recover_async()
    return fork
