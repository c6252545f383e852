"""Carrying out an undo: the compensations run as the calls of a batch of their own, one at a
time, newest first, then the session is cut back to the checkpoint (see docs/undo.md).

Each compensation is a tool call like any other (``_batch.run_call``): the journal saves it
``running`` before its body starts and keeps its result before the next one starts, so after a
crash it is in doubt (asked about, never run twice blindly); its tool's ``needs_approval`` or
the agent's policy can stop it with a question, answered through ``resume`` like any other.
Once every one is done, one save (the store's ``rewind``) cuts the stored conversation to the
checkpoint, sets where the session then stands, and records an audit entry per undone (or
skipped) call. A decline's rollback (``Agent(on_decline="compensate")``) keeps the
conversation: the batch's results and a note of what was undone go to the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from .._audit import AuditEntry, chained
from .._frozen import freeze
from .._messages import JsonValue, Message, Text
from .._result import AgentResult
from ..errors import AgentBusyError, ConfigurationError
from ._batch import run_call
from ._spec import respec
from ._state import BeforeModelCall, Position, Progress, ToolBatch, Undoing
from ._steps import Outcome, Paused
from ._undo_plan import UNDO, UndoPlan, UndoStep, compensations, plan_undo, result_value

if TYPE_CHECKING:
    from .._messages import ToolResult
    from ._agent import Agent
    from ._loop import Run

__all__ = ["declined_by", "undo", "undoing"]


async def undo(
    agent: Agent, to: str, by: str | None, skip: Sequence[str], dry_run: bool
) -> UndoPlan | AgentResult:
    """``agent.undo_async``: the plan (``dry_run``), or the run that carries it out."""
    from ._answering import check_by

    await agent.load()
    if agent.is_running:
        raise AgentBusyError("cannot undo while a run is going")
    who = "unknown" if by is None else check_by(by)
    plan, step = plan_undo(agent, to, skip)
    if dry_run:
        return plan
    if step is None:  # an open question: nothing ran after it
        return AgentResult(stop_reason="undone", interrupts=list(agent.interrupts))
    if agent._state.position is not None:  # paused: the pause goes (its calls are undone)
        from ._transitions import discard_async

        await discard_async(agent, f"undone (to {plan.to})")
    return await agent._start((replace(step, by=who), Progress(), False, []), None)


async def undoing(run: Run, step: Undoing, replay: bool) -> Outcome:
    """The handler of an ``Undoing`` step: its compensations, then the cut (or the note)."""
    spec = run.spec
    run.spec = respec(spec, tools=compensations(spec.tools))  # the compensations run by name
    try:
        for undone, call in zip(step.undone, step.batch.calls, strict=True):
            now = run.batch().call(call.tool_use.id)
            if now.phase == "done":
                continue
            if call.tool_use.name not in run.spec.tools:  # stays a stopped run: one that has
                raise ConfigurationError(  # the tool carries it on (nothing counted as failed)
                    f"the undo needs tool {call.tool_use.name!r} (the compensation of call "
                    f"{undone.call_id!r}), which this agent does not have: carry it on with "
                    "recover() where it does"
                )
            interrupts = await run_call(run, now, replay)
            if interrupts:
                return Paused(run.step, interrupts)  # type: ignore[arg-type]  # at the undo
            # recorded with the save that keeps it done: a trail that names every one that ran
            _record(run, step, [_undone_entry(run, step, undone, call.tool_use.id)])
    finally:
        run.spec = spec
    done = run.step
    assert isinstance(done, Undoing)
    _record(run, done, [_skipped_entry(run, done, s) for s in done.skipped])
    if done.keep < 0:  # a decline's rollback: the model is told, and goes on
        assert done.after is not None
        return await run.append(_told(done), BeforeModelCall())
    return await _cut(run, done)


async def _cut(run: Run, step: Undoing) -> Outcome:
    """Cut the conversation to the checkpoint and stand there, in one save."""
    agent = run.agent
    run.messages = run.messages[: step.keep]  # a new list: a run's own list only ever grows
    agent._live = run.messages
    run.seen_ids = run.clean = None
    run.progress = Progress()
    position = None if step.then is None else Position(step.then, [], Progress())
    run.commit(position=position, data=freeze(agent.state))
    if run.journal is not None:
        await run.journal.rewind(run.identity, agent._state, position)
    if step.then is None:
        return AgentResult(stop_reason="undone")
    return Paused(step.then, [])  # a stopped run: recover() carries it on from there


def _record(run: Run, step: Undoing, entries: list[AuditEntry]) -> None:
    """Add ``entries`` to the audit trail (saved with the run's next save)."""
    if not entries:
        return
    audit = run.agent._state.audit
    key, session = run.identity.key, run.agent.session_id
    run.commit(audit=(*audit, *chained(audit, entries, key, session)))


def _undone_entry(run: Run, step: Undoing, undone: UndoStep, call_id: str) -> AuditEntry:
    """The audit entry of one compensation that ran: the call it undid and how it went."""
    result = run.batch().call(call_id).result
    assert result is not None
    answer = _about(undone, step)
    answer.update(
        compensation=undone.compensation, status=result.status, result=result_value(result)
    )
    return _entry(answer, step.by, run.spec.clock())


def _skipped_entry(run: Run, step: Undoing, skipped: UndoStep) -> AuditEntry:
    answer = _about(skipped, step)
    answer["skipped"] = True
    return _entry(answer, step.by, run.spec.clock())


def _about(step: UndoStep, undo: Undoing) -> dict[str, JsonValue]:
    where: JsonValue = undo.to if undo.keep >= 0 else None  # None: a decline's rollback
    return {"checkpoint": where, "call": step.call_id, "tool": step.tool, "input": step.input}


def _entry(answer: dict[str, JsonValue], by: str, at: float) -> AuditEntry:
    return AuditEntry(interrupt_id="", name=UNDO, answer=answer, by=by, at=at, shown="")


def _told(step: Undoing) -> Message:
    """The batch's results and a note for the model of what the rollback undid."""
    from ._results import close_batch

    assert step.after is not None
    results = close_batch(step.after, "")
    parts = [_outcome(u, c.result) for u, c in zip(step.undone, step.batch.calls, strict=True)]
    note = (
        f"A person declined a call, so the calls made since the prompt were undone "
        f"(newest first): {'; '.join(parts) or 'none'}."
    )
    if step.skipped:
        note += " Not undone (no compensation): " + ", ".join(
            f"{s.tool} ({s.call_id})" for s in step.skipped
        )
        note += "."
    return Message("user", [*results.content, Text(note)])


def _outcome(step: UndoStep, result: ToolResult | None) -> str:
    status = "unknown" if result is None else result.status
    text = "" if result is None or not result.text else f": {result.text[:120]}"
    return f"{step.tool} ({step.call_id}) by {step.compensation}, {status}{text}"


def declined_by(run: Run, batch: ToolBatch) -> str | None:
    """Who declined a call of ``batch`` (its approval answered no), or None if no one did."""
    from ._approval import approval_id, decision_of

    answers = run.progress.answers.values
    for call in batch.calls:
        iid = approval_id(call.tool_use.id)
        if iid in answers and not decision_of(answers[iid]).approve:
            for entry in reversed((*run.agent._state.audit, *run.audit)):
                if entry.interrupt_id == iid:
                    return entry.by
            return "unknown"
    return None
