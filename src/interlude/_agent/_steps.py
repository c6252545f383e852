"""One handler per kind of step: what the loop does at it, and which step comes next.

``Run.drive`` looks up the handler of the step it stands at in ``HANDLERS`` and calls it with
the run; each returns the next step, a final ``AgentResult``, or a ``Paused`` (the step to
carry on from and its questions). Kept apart from ``Run`` so the state machine's transitions
read in one place, and the run's bookkeeping (commits, the journal, endings) in another.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from .._interrupt import Interrupt
from .._messages import Message, Text, ToolUse
from .._result import AgentResult, StopReason
from .._stream import MessageAppended
from ..errors import CycleLimitError, RetryLimitError
from ..hooks import (
    AfterInvocationEvent,
    AfterModelCallEvent,
    BeforeInvocationEvent,
    BeforeModelCallEvent,
    MessageAddedEvent,
)
from ._batch import run_batch
from ._executor import LOCAL
from ._output import after_reply, model_request
from ._results import close_batch
from ._state import (
    AfterInvocation,
    AfterModelCall,
    BeforeInvocation,
    BeforeModelCall,
    MessageAdded,
    Progress,
    Step,
    ToolBatch,
    ToolCall,
    Undoing,
)

if TYPE_CHECKING:
    from ._loop import Run

__all__ = ["HANDLERS", "Outcome", "Paused", "unique_calls"]

_tuple_new = tuple.__new__


class Paused:
    """A step the run stops at, and the questions it waits on there."""

    __slots__ = ("interrupts", "step")

    def __init__(self, step: Step, interrupts: list[Interrupt]) -> None:
        self.step = step
        self.interrupts = interrupts


Outcome = Step | AgentResult | Paused


async def before_invocation(run: Run, step: BeforeInvocation, replay: bool) -> Outcome:
    """Its callbacks, then the prompt is appended."""
    if run.hooks.has_callbacks(BeforeInvocationEvent):
        scope = f"m{len(run.messages)}"
        _, asked = await run.ask(BeforeInvocationEvent, scope, replay, run.agent, step.prompt)
        if asked:
            return Paused(step, asked)
    return await run.append(step.prompt, BeforeModelCall())


async def message_added(run: Run, step: MessageAdded, replay: bool) -> Outcome:
    """Its callbacks about the message just appended, then the step that follows it."""
    if run.hooks.has_callbacks(MessageAddedEvent):
        message = run.messages[step.index]
        scope = f"m{step.index}"
        _, asked = await run.ask(MessageAddedEvent, scope, replay, run.agent, message)
        if asked:
            return Paused(step, asked)
    return step.then


async def before_model_call(run: Run, step: BeforeModelCall, replay: bool) -> Outcome:
    """The cycle limit and its callbacks, then the model call (its outcome is the next step)."""
    agent = run.agent
    limit = run.spec.max_cycles
    if run.progress.cycles >= limit:
        raise CycleLimitError(
            f"the invocation reached max_cycles={limit} model calls without a final reply"
        )
    if run.hooks.has_callbacks(BeforeModelCallEvent):
        scope = f"m{len(run.messages)}"
        _, asked = await run.ask(BeforeModelCallEvent, scope, replay, agent)
        if asked:
            return Paused(step, asked)
    if run.progress.message is not None:  # sent with answers: the model sees it first
        _send_message(run)
    if run.journal is not None:
        await run.checkpoint()
    run.progressed = True
    try:
        manager = run.spec.conversation
        if manager is None and run.spec.executor is LOCAL and run.observer is None:
            specs, options = model_request(run)  # no one needs the ModelCall value
            spec = run.spec
            call = LOCAL.answer(
                spec.model, run.model_view(), specs, spec.system_prompt, options, run.emit
            )
        elif manager is None:
            call = run.spec.executor.call_model(run.model_call())
        else:
            from ._conversation import call_managed

            call = call_managed(run, manager)
        if run.observer is not None:  # the whole call: with its reductions, if any
            call = run.observer.observe_model(run.spec.model, call)
        response = await call
    except Exception as exc:
        return AfterModelCall(None, exc)
    return AfterModelCall(response, None)


async def after_model_call(run: Run, step: AfterModelCall, replay: bool) -> Outcome:
    """Its callbacks (which may ask for a retry), then the reply is appended with what follows
    it: a tool batch, another model call, or the end of the invocation."""
    agent = run.agent
    event = None
    if run.hooks.has_callbacks(AfterModelCallEvent):
        scope = f"m{len(run.messages)}"
        event, asked = await run.ask(
            AfterModelCallEvent, scope, replay, agent, step.response, step.exception
        )
        if asked:
            return Paused(step, asked)
    progress = run.progress
    if event is not None and event.retry:
        retries = progress.model_retries + 1
        run.progress = progress.but(
            answers=progress.answers.without(event._used_ids()), model_retries=retries
        )
        if retries > run.spec.max_retries:
            raise RetryLimitError(
                f"the model call was retried {retries - 1} times; "
                f"the limit is max_retries={run.spec.max_retries}"
            ) from step.exception
        return BeforeModelCall()
    if step.exception is not None:
        raise step.exception
    response = step.response
    assert response is not None
    run.progress = progress = _tuple_new(  # Progress(...), as its ``__new__`` makes it
        Progress, (progress.cycles + 1, 0, progress.usage + response.usage, *progress[3:])
    )
    message = response.message
    tool_uses = message.tool_uses
    if tool_uses and response.stop_reason == "max_tokens":
        # A tool call cut off by the token limit is incomplete: drop it, keep the text.
        message = Message("assistant", [b for b in message.content if not isinstance(b, ToolUse)])
        tool_uses = []
    if progress.output is not None:  # a final answer of the output type, or asked again
        answered_step = await after_reply(run, response, message)
        if answered_step is not None:
            return answered_step
    then: Step
    if tool_uses:
        then = ToolBatch(len(run.messages), unique_calls(tool_uses, run.tool_use_ids()))
    elif progress.message is not None:  # a person's message waits: the model answers it
        then = BeforeModelCall()
    else:
        stop: StopReason = (
            "end_turn" if response.stop_reason == "tool_use" else response.stop_reason
        )
        then = AfterInvocation(AgentResult(stop_reason=stop, message=message, usage=progress.usage))
    return await run.append(message, then)


async def tool_batch(run: Run, step: ToolBatch, replay: bool) -> Outcome:
    """The batch's calls (see ``_batch``), then their results are appended."""
    interrupts = await run_batch(run, step, replay)
    batch = run.batch()  # as its calls left it
    if interrupts:
        return Paused(batch, interrupts)
    if run.spec.on_decline == "compensate":
        rollback = _rollback(run, batch)
        if rollback is not None:  # a person declined a call: the run's calls are undone
            return rollback
    return await run.append(close_batch(batch, ""), BeforeModelCall())


def _rollback(run: Run, batch: ToolBatch) -> Undoing | None:
    """The rollback of a batch with a declined call (``on_decline="compensate"``), or None."""
    from ._undo_plan import rollback_step
    from ._undoing import declined_by

    by = declined_by(run, batch)
    if by is None:
        return None
    audit = (*run.agent._state.audit, *run.audit)
    return rollback_step(run.messages, batch, run.spec.tools, by, audit)


async def undoing(run: Run, step: Undoing, replay: bool) -> Outcome:
    """Compensations, newest first, then the cut or the note (see ``_undoing``)."""
    from ._undoing import undoing as carry_out

    return await carry_out(run, step, replay)


async def after_invocation(run: Run, step: AfterInvocation, replay: bool) -> Outcome:
    """Its callbacks, which may change the result; a message sent with answers goes to the
    model first."""
    if run.progress.message is not None:  # sent with answers: the model answers it (the
        return BeforeModelCall()  # reply held for review is superseded by the next one)
    if not run.hooks.has_callbacks(AfterInvocationEvent):
        return step.result
    scope = f"m{len(run.messages) - 1}"
    event, asked = await run.ask(AfterInvocationEvent, scope, replay, run.agent, step.result)
    if asked:
        return Paused(step, asked)
    assert event is not None
    return event.result


def _send_message(run: Run) -> None:
    """Add the text a person sent with their answers as a user message, right before the
    model call its before-model hooks have already passed (so they are not asked again
    about a conversation one message longer); saved with the checkpoint that follows."""
    progress = run.progress
    assert progress.message is not None
    message = Message("user", [Text(progress.message)])
    run.progress = progress.but(message=None)
    run.messages.append(message)
    if run.emit is not None:
        run.emit(MessageAppended(message))


def unique_calls(tool_uses: list[ToolUse], seen: dict[str, int]) -> tuple[ToolCall, ...]:
    """The batch's calls, each with a tool-use id unique in the conversation.

    A model may repeat an id in one reply or reuse one from an earlier turn; questions and
    results are keyed by the id, so the n-th use of an id (n > 1) runs as ``<id>#<n>`` (or the
    next free ``#<k>``: the model may itself send an id of that form). ``seen`` counts the uses
    of each id so far and is updated. The conversation keeps the model's own ids, and each
    result answers its call's model id.
    """
    calls: list[ToolCall] = []
    taken: set[str] | None = None
    for tu in tool_uses:
        n = seen[tu.id] = seen.get(tu.id, 0) + 1
        if n == 1:
            calls.append(ToolCall(tu))
            continue
        if taken is None:  # every id the conversation and this batch use
            taken = set(seen) | {u.id for u in tool_uses} | {c.tool_use.id for c in calls}
        k = n
        while f"{tu.id}#{k}" in taken:
            k += 1
        unique = f"{tu.id}#{k}"
        taken.add(unique)
        seen[unique] = seen.get(unique, 0) + 1  # a later call the model names so is renamed
        calls.append(ToolCall(ToolUse(unique, tu.name, tu.input), model_id=tu.id))
    return tuple(calls)


HANDLERS: dict[type, Callable[[Run, Any, bool], Coroutine[Any, Any, Outcome]]] = {
    BeforeInvocation: before_invocation,
    MessageAdded: message_added,
    BeforeModelCall: before_model_call,
    AfterModelCall: after_model_call,
    ToolBatch: tool_batch,
    AfterInvocation: after_invocation,
    Undoing: undoing,
}
"""The handler of each kind of step."""
