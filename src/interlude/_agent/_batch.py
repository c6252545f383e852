"""Tool batches: each tool use through its before-hooks, body and after-hooks, and the executors.

A call's progress lives in its ``ToolCall`` (phase, kept result, retries), so a batch can stop
at any call and carry on later exactly there. Calls and batches are values: each change makes
a new one, which the run keeps as where it stands (``put_call``, ``put_batch``) before anything
can save or read it; the functions here return the call as they left it.
"""

from __future__ import annotations

import asyncio
from types import MappingProxyType
from typing import TYPE_CHECKING, TypeAlias, assert_never

from .._interrupt import Interrupt, interrupt_id
from .._messages import Json, Text, ToolResult, ToolUse
from .._stream import ToolCallFinished, ToolCallStarted
from .._tools import ToolContext
from ..errors import CallTakenError, RetryLimitError
from ..hooks import AfterToolCallEvent, BeforeToolCallEvent, BeforeToolsEvent
from ..models import INVALID_JSON_KEY
from ._approving import approve, denied_first, governed, invalid_input, noted
from ._executor import LOCAL, Asked, Lost, Raised, Returned, ToolOutcome, ToolRequest
from ._shared import shared_guard, starts_of
from ._state import ToolBatch, ToolCall

if TYPE_CHECKING:
    from .._tools import AgentTool
    from ._context import StepContext

__all__ = ["IN_DOUBT_CHOICES", "INVALID_JSON_KEY", "in_doubt_problem", "run_batch", "run_call"]


async def run_batch(run: StepContext, batch: ToolBatch, replay: bool) -> list[Interrupt]:
    """Open the batch (its ``BeforeToolsEvent``), then run its unfinished calls; return the
    interrupts that stop it (empty when done)."""
    if (
        not batch.opened
        and run.hooks.has_callbacks(BeforeToolsEvent)
        and all(c.phase == "pending" for c in batch.calls)  # else too late to show them all
    ):
        interrupts = await _open(run, batch, replay)
        if interrupts:
            return interrupts
        batch = run.batch()
    cancelled, approved = batch.cancelled, batch.approved
    pending = [c for c in batch.calls if c.phase != "done"]
    if run.spec.tool_executor == "sequential" or len(pending) == 1:
        for call in pending:
            interrupts = await run_call(
                run, call, replay, cancelled.get(call.tool_use.id), approved
            )
            if interrupts:
                return interrupts
        return []
    tasks = [
        asyncio.ensure_future(
            run_call(run, call, replay, cancelled.get(call.tool_use.id), approved)
        )
        for call in pending
    ]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        unfinished = [t for t in tasks if not t.done()]
        for t in unfinished:
            t.cancel()
        if unfinished:
            await asyncio.gather(*unfinished, return_exceptions=True)
    # In tool-use order: the first real failure wins (not a sibling we cancelled because of it).
    for t in tasks:
        if not t.cancelled() and t.exception() is not None:
            raise t.exception()  # type: ignore[misc]
    gathered: list[Interrupt] = []
    for t in tasks:
        gathered.extend(t.result())
    return gathered


async def _open(run: StepContext, batch: ToolBatch, replay: bool) -> list[Interrupt]:
    """Show the whole batch to its ``BeforeToolsEvent`` callbacks; once they pass, record that
    (and the calls they cancelled) so a later pause inside the batch does not ask again, and
    whether they used an answer (then the calls are approved as shown: see ``_changed``)."""
    agent = run.agent
    uses = [c.tool_use for c in batch.calls]
    tools = [run.spec.tools.get(u.name) for u in uses]
    scope = f"b{batch.message_index}"
    event, interrupts = await run.ask(BeforeToolsEvent, scope, replay, agent, uses, tools)
    if event is not None and not interrupts:
        cancelled = MappingProxyType(dict(event.cancelled))
        approved = bool(event._answered)
        run.put_batch(batch._replace(opened=True, cancelled=cancelled, approved=approved))
    return interrupts


async def run_call(
    run: StepContext,
    call: ToolCall,
    replay: bool,
    cancelled: str | None = None,
    approved: bool = False,
) -> list[Interrupt]:
    """Carry one tool use forward from its phase; on an interrupt, leave it in that phase.

    ``cancelled`` is the message of a call its batch's ``BeforeToolsEvent`` cancelled: its
    before-tool hooks and body do not run (also on a retry); it gets that error result.
    ``approved``: the batch event's callbacks passed using an answer, so a call its before-tool
    hooks change is not run unless one of their own answers covers it (``_changed``)."""
    replay_before = replay and call.phase == "before"
    replay_after = replay and call.phase == "after"
    if call.phase == "running":  # its process stopped while the body ran: in doubt
        call, question = _settle_in_doubt(run, call)
        if question is not None:
            return [question]
    while True:
        if call.phase != "after":  # pending, before, or run again: body (interrupted), running
            call, stopped = await _before_and_body(run, call, replay_before, cancelled, approved)
            if stopped or call.phase != "after":  # questions, or done at once
                return stopped
        if run.hooks.has_callbacks(AfterToolCallEvent):
            call, interrupts = await _after(run, call, replay_after)
            if interrupts is None:  # retried: from the before-hooks, afresh
                replay_before = replay_after = False
                continue
            if interrupts:
                return interrupts
        assert call.result is not None
        _done(run, call, call.result)
        return []


async def _before_and_body(
    run: StepContext, call: ToolCall, replay: bool, cancelled: str | None, approved: bool
) -> tuple[ToolCall, list[Interrupt]]:
    """The before-hooks (unless resumed past them) and the body: the call as they left it
    and the questions that stop it (empty once its body finished: phase ``after``)."""
    cancel_message: str | None = None
    if call.phase in ("pending", "before"):
        hooked = run.hooks.has_callbacks(BeforeToolCallEvent)
        asked_tool = run.spec.tools.get(call.tool_use.name)
        gated = getattr(asked_tool, "needs_approval", False) is not False or governed(run)
        if cancelled is None and asked_tool is not None and (hooked or gated):
            cancelled = invalid_input(asked_tool, call.tool_use)  # no one is asked about it
        if cancelled is None and asked_tool is not None and hooked and governed(run):
            cancelled = denied_first(run, call.tool_use, asked_tool)  # no hook asks about it
        if cancelled is None and hooked:
            call, interrupts, cancel_message = await _before(run, call, replay, approved)
            if interrupts:
                return run.put_call(call.but(phase="before")), interrupts
        else:  # no before-tool callbacks, or a call its batch cancelled: the call as asked
            cancel_message = cancelled  # (``_body`` selects its tool by name)
            if call.active_use is not None:  # selected by hooks an earlier attempt had
                call = call.selecting(None, None, None)
        if cancel_message is None and (hooked or gated):  # (hooks may select another tool)
            call, interrupts, cancel_message = approve(run, call)
            if interrupts:
                return run.put_call(call.but(phase="before")), interrupts
    # Else resumed after the body interrupted, or a person chose to run an in-doubt call
    # again: the body runs again from the top.
    reused: ToolResult | None = None
    if cancel_message is None and call.phase in ("pending", "before"):
        guard, reused = await shared_guard(run, call)  # shared with a fork: ask first
        if guard is not None:
            return run.put_call(call.but(phase="before")), [guard]
    lost = 0
    while True:
        ran: _Ran
        if reused is not None:  # the parent's result, taken as this call's
            ran, reused = (reused, None), None
        else:
            call, ran = await _body(run, call, cancel_message)
        if ran is None:  # lost: run it again, or settled by an answer given meanwhile
            if call.phase == "after":
                return call, []
            lost += 1
            if lost > run.spec.max_retries:
                ran = _error(call.active_use or call.tool_use, _LOST), RuntimeError(_LOST)
            else:
                continue
        if isinstance(ran, list):  # the body stopped with questions (or is in doubt)
            return call, ran
        result, exception = ran
        if call.active_use is None:  # it did not start: the call as asked, and its tool
            call = _as_asked(run, call)
        elif call.active_use.input is not call.tool_use.input and cancel_message is None:
            result = noted(run, call, result)
        if not run.hooks.has_callbacks(AfterToolCallEvent) and not (
            run.journal is not None and run.in_flight
        ):  # done at once: no callbacks to see the result first, no save to keep it for
            _done(run, call, result)
            return call, []
        call = call.but(
            result=result,
            exception=exception,
            cancel_message=cancel_message,
            checkpoint=None,  # the body finished: nothing to pick up from any more
            phase="after",
        )
        if run.journal is not None and run.in_flight:  # siblings run: keep it now
            run.put_call(call)
            await run.checkpoint()
        return call, []


async def _before(
    run: StepContext, call: ToolCall, replay: bool, approved: bool
) -> tuple[ToolCall, list[Interrupt], str | None]:
    """Run the before-tool hooks and select what runs (``active_use``, ``tool``): the call,
    the questions, and the cancel message if the call is not to run."""
    tool_use = call.tool_use
    tool: AgentTool | None = run.spec.tools.get(tool_use.name)
    before, interrupts = await run.ask(
        BeforeToolCallEvent, tool_use.id, replay, run.agent, tool_use, tool
    )
    assert before is not None
    if not interrupts and before.cancel_message is None and before.tool:
        interrupts = _unbound(run, before)
    if interrupts:
        return call, interrupts, None
    cancel_message = before.cancel_message
    if approved and cancel_message is None and not before._answered:
        cancel_message = _changed(call.tool_use, tool, before)
    tool_use, tool = before.tool_use, before.tool
    if tool_use.id != call.tool_use.id:  # the result must answer the model's id
        tool_use = ToolUse(call.tool_use.id, tool_use.name, tool_use.input)
    call = call.selecting(tool_use, tool, tool.name if tool else None)
    return call, [], cancel_message  # kept where the run stands with its next phase


async def _after(
    run: StepContext, call: ToolCall, replay: bool
) -> tuple[ToolCall, list[Interrupt] | None]:
    """The after-tool hooks: the call and the questions that stop it, [] when they passed
    (the call then has the result they left), or None when a callback asked for a retry (the
    call is pending again)."""
    assert call.result is not None and call.active_use is not None
    run.put_call(call)  # what the body came to is where the run stands before the callbacks
    after, interrupts = await run.ask(
        AfterToolCallEvent,
        call.tool_use.id,
        replay,
        run.agent,
        call.active_use,
        _selected(run, call),
        call.result,
        call.exception,
        call.cancel_message,
    )
    assert after is not None
    if interrupts:  # an interrupt wins over a retry asked in the same pass
        return call, interrupts
    if after.retry:
        # The retried call's after-hooks ask their questions afresh.
        progress = run.progress
        run.progress = progress.but(answers=progress.answers.without(after._used_ids()))
        retries = call.retries + 1
        if retries > run.spec.max_retries:
            run.put_call(call.but(retries=retries, result=after.result, phase="done"))
            raise RetryLimitError(
                f"tool {call.tool_use.name!r} (tool use {call.tool_use.id!r}) was retried "
                f"{retries - 1} times; the limit is max_retries={run.spec.max_retries}"
            )
        call = call.but(
            retries=retries,
            phase="pending",
            result=None,
            exception=None,
            active_use=None,  # selected afresh
            tool=None,
            tool_name=None,
        )
        return run.put_call(call), None
    return run.put_call(call.but(result=after.result)), []


def _done(run: StepContext, call: ToolCall, final: ToolResult) -> None:
    """The call is done with ``final`` (checked to be JSON)."""
    final = _json_checked(final)
    run.put_call(call.done(final))
    if run.emit is not None:
        run.emit(ToolCallFinished(final))


_LOST = "the tool call was lost again and again by where it runs (its executor); not run again"


def _json_checked(result: ToolResult) -> ToolResult:
    """The result, or an error result if a Json block holds something JSON cannot carry
    (it could not be saved, nor sent to a model)."""
    for block in result.content:
        if isinstance(block, Json):
            import json

            try:
                json.dumps(block.value)
            except (TypeError, ValueError) as exc:
                problem = f"the tool's result is not JSON-compatible ({exc})"
                return ToolResult(result.tool_use_id, "error", [Text(problem)])
    return result


def _selected(run: StepContext, call: ToolCall) -> AgentTool | None:
    """The tool the before-hooks selected: this process's own object, or the agent's tool of
    the name kept (a call that paused in another process)."""
    if call.tool is None and call.tool_name is not None:
        return run.spec.tools.get(call.tool_name)
    return call.tool


_Ran: TypeAlias = "tuple[ToolResult, BaseException | None] | list[Interrupt] | None"
"""What running a body came to: (result, exception), questions, or None (run it again)."""


async def _body(
    run: StepContext, call: ToolCall, cancel_message: str | None
) -> tuple[ToolCall, _Ran]:
    """Run the tool through the agent's executor, or make the error result of a call that
    cannot run: the call as it left it, and what it came to. A call no before-tool hook saw
    (``active_use`` None) runs as the model asked, by the agent's tool of that name."""
    tool_use = call.active_use
    if tool_use is None:
        tool_use = call.tool_use
        tool = run.spec.tools.get(tool_use.name)
        selected = tool_use, tool, tool.name if tool else None
    else:
        tool = _selected(run, call)
        selected = None
    if cancel_message is not None:
        return call, (_error(tool_use, cancel_message), None)
    if tool is None:
        if tool_use.name in run.spec.tools:
            problem = f"tool {tool_use.name!r} was not run: a before-tool hook selected no tool"
        else:
            known = ", ".join(sorted(run.spec.tools)) or "none"
            problem = f"unknown tool {tool_use.name!r} (available: {known})"
        return call, (_error(tool_use, problem), None)
    raw = tool_use.input.get(INVALID_JSON_KEY)
    if isinstance(raw, str) and len(tool_use.input) == 1:
        problem = f"the arguments for tool {tool_use.name!r} are not valid JSON: {raw!r}"
        return call, (_error(tool_use, problem), None)
    agent, spec = run.agent, run.spec
    if selected is None:
        started = call.started(spec.clock(), tool_use, call.tool, call.tool_name)
    else:
        started = call.started(spec.clock(), *selected)
    call = run.put_call(started)
    if run.journal is not None:  # started, before the body: after a crash it is in doubt
        try:
            await run.checkpoint(starts_of(run, call))
        except CallTakenError as exc:  # a fork of this session claimed the call first
            from ._shared import ran_in_fork_question

            call = run.put_call(call.but(phase="before"))
            return call, [ran_in_fork_question(call.tool_use, exc.holder, spec.clock())]
    run.progressed = True
    if run.emit is not None:
        run.emit(ToolCallStarted(tool_use))
    answers = run.progress.answers
    context = ToolContext(tool_use, agent, answers, call.checkpoint, run.emit)
    run.in_flight += 1
    try:
        if spec.executor is LOCAL and run.observer is None:  # no one needs the request value
            body = LOCAL.run_body(tool, tool_use, context)
        else:
            request = ToolRequest(
                tool=tool,
                tool_use=tool_use,
                answer_id=call.answer_id,
                context=context,
                answers=answers,
                checkpoint=call.checkpoint,
                state=MappingProxyType(agent._data),
                now=call.started_at,  # type: ignore[arg-type]  # set just above
                at_most_once=spec.in_doubt == "ask" and not getattr(tool, "idempotent", False),
            )
            body = spec.executor.run_tool(request)
            if run.observer is not None:
                body = run.observer.observe_tool(request, body)
        outcome = await body
    except Exception as exc:
        return call, (_error(tool_use, f"{type(exc).__name__}: {exc}"), exc)
    finally:
        run.in_flight -= 1
    return _take(run, call, outcome)


def _as_asked(run: StepContext, call: ToolCall) -> ToolCall:
    """A call no before-tool hook saw: as the model asked for it, by the agent's tool of that
    name (if any)."""
    tool = run.spec.tools.get(call.tool_use.name)
    return call.selecting(call.tool_use, tool, tool.name if tool else None)


def _take(run: StepContext, call: ToolCall, outcome: ToolOutcome) -> tuple[ToolCall, _Ran]:
    """Apply what the body did (answers it used, agent.state it changed elsewhere)."""
    if isinstance(outcome, Lost):  # it may or may not have run: as after a crash
        call, question = _settle_in_doubt(run, call)
        return call, (None if question is None else [question])
    if outcome.used:
        progress = run.progress
        run.progress = progress.but(answers=progress.answers.without(outcome.used))
    if outcome.state is not None:
        outcome.state.apply(run.agent._data)  # merged at the step boundary
    match outcome:
        case Asked():
            call = run.put_call(call.but(checkpoint=outcome.checkpoint, phase="body"))
            return call, list(outcome.interrupts)  # the checkpoint is kept for the re-run
        case Raised():
            exc = outcome.exception
            assert call.active_use is not None
            return call, (_error(call.active_use, f"{type(exc).__name__}: {exc}"), exc)
        case Returned():
            return call, (outcome.result, None)
        case _:
            assert_never(outcome)


def _error(tool_use: ToolUse, text: str) -> ToolResult:
    return ToolResult(tool_use.id, "error", [Text(text)])


def _unbound(run: StepContext, before: BeforeToolCallEvent) -> list[Interrupt]:
    """The questions to ask again because their answer was given for another call than the
    one the before-hooks finally chose (fail closed: the person approves what runs); their
    answers are forgotten."""
    answered = before._answered
    if not answered:
        return []
    assert before.tool is not None
    answers = run.progress.answers
    final = ToolUse(before.tool_use.id, before.tool.name, before.tool_use.input)
    again: list[Interrupt] = []
    for iid, (name, reason) in answered.items():
        shown = answers.shown.get(iid)
        if shown is not None and (shown.name, shown.input) == (final.name, final.input):
            continue
        again.append(
            Interrupt(
                id=iid,
                name=name,
                reason=reason,
                source="before_tool_call",
                tool_use=final,
                raised_at=answers.clock(),
            )
        )
    if again:
        run.progress = run.progress.but(answers=answers.without([q.id for q in again]))
    return again


def _changed(
    shown: ToolUse, shown_tool: AgentTool | None, before: BeforeToolCallEvent
) -> str | None:
    """Why a call of an approved batch does not run, or None if it runs.

    The batch answer approved the call as its ``BeforeToolsEvent`` showed it (``shown``, run
    by ``shown_tool``). If the before-tool hooks changed it (another input, tool use name or
    tool) and no answer of theirs covers the final call (the caller checks: ``_unbound`` has
    bound any such answer to it), it does not run: fail closed."""
    final, tool = before.tool_use, before.tool
    if tool is None:  # runs nothing anyway
        return None
    if tool is shown_tool and (final.name, final.input) == (shown.name, shown.input):
        return None
    approved = _show_call(shown.name, shown.input)
    changed = _show_call(tool.name if tool is not shown_tool else final.name, final.input)
    if changed == approved:
        changed += " (another tool of that name)"
    return (
        f"not run: the call was changed after the batch was approved "
        f"(approved: {approved}; changed to: {changed})"
    )


def _show_call(name: str, tool_input: object) -> str:
    import json

    try:
        shown = json.dumps(tool_input, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        shown = repr(tool_input)
    return f"{name} {shown}"


IN_DOUBT_CHOICES = "'rerun', 'fail' or {'result': <what the tool returned>}"


def in_doubt_problem(answer: object) -> str | None:
    """Why ``answer`` cannot settle an in-doubt call, or None if it can."""
    if answer in ("rerun", "fail"):
        return None
    if isinstance(answer, dict) and set(answer) == {"result"}:
        return None
    return f"an in-doubt call is settled with {IN_DOUBT_CHOICES}, got {answer!r:.80}"


def _settle_in_doubt(run: StepContext, call: ToolCall) -> tuple[ToolCall, Interrupt | None]:
    """Decide a call whose body started but whose result was never kept (its process stopped).

    Idempotent tools (and every tool under ``Agent(in_doubt="rerun")``) run again; otherwise a
    person decides: run it again, give the result it had, or tell the model it failed. Leaves
    the call ready to carry on (and returns it), or returns the question."""
    assert call.active_use is not None
    iid = interrupt_id("in_doubt", call.tool_use.id, "in_doubt")
    answers = run.progress.answers
    found, answer = answers.lookup(iid, call.active_use)
    if found:  # used once: if it stops in doubt again, ask again
        run.progress = run.progress.but(answers=answers.without([iid]))
        run.progressed = True
    else:
        tool = _selected(run, call)
        if tool is not None and (
            getattr(tool, "idempotent", False) or run.spec.in_doubt == "rerun"
        ):
            answer = "rerun"
        else:
            import datetime

            started = call.started_at or 0.0
            when = datetime.datetime.fromtimestamp(started, datetime.UTC).isoformat(
                timespec="seconds"
            )
            from .._tools import idempotency_key

            agent = run.agent
            key = idempotency_key(agent.run_session_id, agent.name, call.tool_use.id)
            return call, Interrupt(
                id=iid,
                name="in_doubt",
                reason={
                    "message": (
                        f"tool {call.tool_name or call.active_use.name!r} started at {when} and "
                        "its run stopped before it kept the result (its process ended, or "
                        "stalled past its lease: then it may still finish the call, but its "
                        "result will be refused): it may or may not have had effects. Before "
                        "answering 'rerun', check the system it acts on for the call's "
                        f"idempotency key {key}. Answer {IN_DOUBT_CHOICES}."
                    ),
                    "started_at": started,
                    "idempotency_key": key,
                },
                source="in_doubt",
                tool_use=call.active_use,
                raised_at=run.spec.clock(),
            )
    if answer == "rerun":
        return call, None  # phase "running": the loop runs the body again from the top
    if answer == "fail":
        result = _error(
            call.active_use,
            "the tool call was interrupted (its process stopped) after it started; it may have "
            "had effects, and its outcome is unknown",
        )
    else:
        from .._tools import to_tool_result

        assert isinstance(answer, dict)
        result = to_tool_result(call.active_use.id, answer["result"])
    if call.active_use.input != call.tool_use.input:  # a person's edit ran: say so
        result = noted(run, call, result)
    call = call.but(result=result, exception=None, cancel_message=None, phase="after")
    return run.put_call(call.but(checkpoint=None)), None
