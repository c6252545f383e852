"""The loop: a state machine over steps, pausable at every step boundary.

``Run.drive`` takes the step to start from and works step by step. Each handler returns the
next step, a final ``AgentResult``, or a ``_Paused`` (the step to carry on from and its
questions). Hooks with no callbacks cost nothing: their events are not even built.

With a session, the run keeps a journal: before anything outside the loop happens (a hook
callback, a model call, a tool body) where the run stands is saved (``checkpoint``), so a
process that dies loses no completed step: whatever finished is saved before anything else can
happen, and a tool's result at once while other calls of its batch still run. Saves with
nothing new are skipped, so with no hooks a model+tool cycle costs two saves.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from .._frozen import freeze
from .._interrupt import Interrupt
from .._messages import Message, Text, ToolUse
from .._result import AgentResult, StopReason
from .._stream import InterruptRaised, MessageAppended, ModelResponse, StreamEvent
from ..errors import CycleLimitError, RetryLimitError
from ..hooks._events import (
    AfterInvocationEvent,
    AfterModelCallEvent,
    BeforeInvocationEvent,
    BeforeModelCallEvent,
    MessageAddedEvent,
)
from ._batch import run_batch
from ._executor import LOCAL, ModelCall
from ._observe import observer_for
from ._output import after_reply, finish, model_request
from ._results import answered, close_batch, closing_message
from ._standing import AgentState, Conversation
from ._state import (
    AfterInvocation,
    AfterModelCall,
    BeforeInvocation,
    BeforeModelCall,
    MessageAdded,
    Position,
    Progress,
    Step,
    ToolBatch,
    ToolCall,
)

if TYPE_CHECKING:
    from .._audit import AuditEntry
    from ..hooks._events import HookEvent
    from ..hooks._registry import HookRegistry
    from ._agent import Agent
    from ._observe import RunInfo
    from ._persist import SessionLink

__all__ = ["Emit", "Run", "close_batch", "closing_message"]

Emit = Callable[[StreamEvent], None]
E = TypeVar("E", bound="HookEvent")
_tuple_new = tuple.__new__


class _Paused:
    __slots__ = ("interrupts", "step")

    def __init__(self, step: Step, interrupts: list[Interrupt]) -> None:
        self.step = step
        self.interrupts = interrupts


_Outcome = Step | AgentResult | _Paused


class Run:
    """One run of an agent: from a prompt, a resume or a recovery to a result or a pause."""

    __slots__ = (
        "agent",
        "audit",
        "clean",
        "decisions",
        "direct",
        "emit",
        "hooks",
        "identity",
        "in_flight",
        "journal",
        "messages",
        "observer",
        "progress",
        "progressed",
        "save_state",
        "seen_ids",
        "spec",
        "started",
        "step",
    )

    def __init__(
        self,
        agent: Agent,
        progress: Progress,
        emit: Emit | None,
        journal: SessionLink | None,
        *,
        direct: bool = False,
    ) -> None:
        self.agent = agent
        self.direct = direct
        """A direct tool call's run (``agent.tool.x()``): it appends nothing and never
        commits where the agent stands (a run may be going meanwhile)."""
        self.progress = progress
        self.emit = emit
        self.journal = journal
        self.messages = list(agent._loaded().messages)
        """The run's own copy of the conversation; each append is committed at once."""
        self.identity = agent._identity()
        self.spec = agent._spec
        """The agent's configuration as the run started."""
        self.hooks = self.spec.hooks
        """Who saves the run's state (name, signing key, tools)."""
        self.observer = observer_for(agent)
        """Who watches the run (tracing), or None: see ``_observe``."""
        self.step: Step | None = None
        self.started = False
        self.seen_ids: dict[str, int] | None = None
        self.clean: bool | None = None
        self.audit: list[AuditEntry] = []
        """The audit entries of the answers this run applies (recorded when it starts)."""
        self.in_flight = 0
        """Tool bodies running now (a result is saved at once while siblings still run)."""
        self.progressed = False
        """Whether the run got anywhere: an event's callbacks all passed, a message was
        appended, a model asked, a tool body started. Until then a run that ends early (an
        exception, a cancel, Ctrl-C) leaves the agent, and its session, as it found them."""
        self.save_state = False
        """Whether the next checkpoint saves the agent state too (the conversation manager's
        state changed: a summary is saved before the model call that uses it)."""
        self.decisions: tuple[int, Mapping[str, tuple[bool, str | None]]] | None = None
        """The session's remembered approval decisions, and the audit length they were read
        at (read when a tool that needs approval first runs)."""

    def commit(self, **changes: Any) -> None:
        """Commit where the agent stands: the run's own conversation, if it grew since the
        last commit, and ``changes`` (see ``_standing``). Called before every save (a
        checkpoint, a lease renewal), when the conversation manager decides, and when the run
        ends or pauses. In between, a look at the agent (callbacks, tool bodies, a stream's
        reader) sees the run's conversation as far as it went (``Agent._loaded``)."""
        if self.direct:
            return
        agent = self.agent
        state = agent._state
        committed = state.messages  # most often the run's list, as far as it went
        count = committed._n if type(committed) is Conversation else len(committed)
        if len(self.messages) != count:
            # ``state.with_messages(...)``, inline: the loop's most frequent commit
            state = _tuple_new(AgentState, (Conversation(self.messages), *state[1:]))
        elif not changes:
            return
        agent._commit(state.but(**changes) if changes else state)

    def record(self, entry: AuditEntry) -> None:
        """Add ``entry`` to the audit trail (linked to the one before; saved with the next
        save): a remembered decision the run applied."""
        from .._audit import chained

        audit = self.agent._state.audit
        self.commit(audit=(*audit, *chained(audit, [entry], self.identity.key)))

    def session_decisions(self) -> Mapping[str, tuple[bool, str | None]]:
        """The approval decisions remembered for the session (see ``_approval``)."""
        audit = self.agent._state.audit
        cached = self.decisions
        if cached is None or cached[0] != len(audit):
            from ._approval import session_decisions

            cached = self.decisions = (
                len(audit),
                session_decisions(audit, bool(self.identity.key), self.messages),
            )
        return cached[1]

    def position(self) -> Position | None:
        """Where the run stands, as the journal keeps it (a pause with no questions)."""
        step = self.step  # made as its named tuple's own ``__new__`` makes it, one call less
        return None if step is None else _tuple_new(Position, (step, [], self.progress))

    async def checkpoint(self) -> None:
        """Save where the run stands, if anything changed since the last save."""
        if self.journal is not None:
            data, self.save_state = self.save_state, False
            if data:
                self.commit(data=freeze(self.agent.state))
            else:
                self.commit()
            await self.journal.save(
                self.identity,
                self.agent._state,
                self.position(),
                data=data,
                hold=True,
                if_changed=True,
            )

    async def invoke(self, hooks: HookRegistry, event: HookEvent) -> list[Interrupt]:
        """Run an event's callbacks, once the journal holds everything before them."""
        if self.journal is not None:
            await self.checkpoint()
        interrupts = await hooks.invoke(event)
        if not interrupts:
            self.progressed = True  # callbacks that passed used their answers: no way back
        return interrupts

    def info(self, replay: bool) -> RunInfo:
        """What an observer is told as the run starts."""
        from ._observe import RunInfo

        agent, progress = self.agent, self.progress
        kind: Literal["prompt", "resume", "recover"] = "prompt"
        if replay:
            kind = "resume" if agent.is_paused else "recover"
        return RunInfo(
            kind=kind,
            agent_name=agent.name,
            session_id=agent.session_id,
            model=agent.model,
            traceparent=progress.traceparent,
            answered=tuple(self.audit),
            usage=progress.usage,
            usage_now=lambda: self.progress.usage,
        )

    def traced(
        self, step: Step, replay: bool
    ) -> Callable[[str | None], Coroutine[Any, Any, AgentResult]]:
        """``drive`` for an observer: it hands over the trace context the run keeps."""

        def drive(traceparent: str | None) -> Coroutine[Any, Any, AgentResult]:
            if traceparent is not None:
                self.progress = self.progress.but(traceparent=traceparent)
            return self.drive(step, replay)

        return drive

    async def drive(self, step: Step, replay: bool) -> AgentResult:
        """Work from ``step`` until the invocation ends or pauses."""
        self.started = True
        standing = self.agent._state
        audit_mark = len(standing.audit)
        resumed = standing.position
        # The run has started: the pause it resumes is used up; the answers it applies are
        # in the audit trail (stored with the first checkpoint).
        self.commit(position=None, audit=standing.audit + tuple(self.audit))
        outcome: _Outcome = step
        handlers: dict[type, Callable[[Any, bool], Coroutine[Any, Any, _Outcome]]] = {
            BeforeInvocation: self._before_invocation,  # one handler per kind of step
            MessageAdded: self._message_added,
            BeforeModelCall: self._before_model_call,
            AfterModelCall: self._after_model_call,
            ToolBatch: self._tool_batch,
            AfterInvocation: self._after_invocation,
        }
        try:
            while True:
                self.step = step
                outcome = await handlers[type(step)](step, replay)
                if isinstance(outcome, AgentResult):
                    outcome = finish(self, outcome)  # the output as output_type, if any
                    await self._save(None)
                    return outcome
                if isinstance(outcome, _Paused):
                    result = self._pause(outcome)
                    await self._save(self.agent._state.position)
                    return result
                step, replay = outcome, False
        except asyncio.CancelledError:
            if not await self._give_back(resumed, audit_mark):
                await self._abandon("cancelled")
            if not self.agent._cancel_requested:
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            return AgentResult(
                stop_reason="cancelled",
                message=None,
                usage=self.progress.usage,
                interrupts=self.agent.interrupts,
            )
        except BaseException as exc:
            if not await self._give_back(resumed, audit_mark):
                await self._abandon(f"not run: the run failed with {type(exc).__name__}")
            raise

    # --- steps ------------------------------------------------------------------------------

    async def ask(
        self, kind: type[E], scope: str, replay: bool, *args: Any
    ) -> tuple[E | None, list[Interrupt]]:
        """Run the callbacks of event ``kind`` (``kind(*args, ...)`` with the event's common
        fields, built only when the agent has callbacks for it): (the event, its questions,
        empty when they passed), or (None, []) when nothing listens."""
        hooks = self.hooks
        if not hooks.has_callbacks(kind):
            return None, []
        event = kind(*args, scope=scope, is_replay=replay, answers=self.progress.answers)
        return event, await self.invoke(hooks, event)

    async def _before_invocation(self, step: BeforeInvocation, replay: bool) -> _Outcome:
        if self.hooks.has_callbacks(BeforeInvocationEvent):
            scope = f"m{len(self.messages)}"
            _, asked = await self.ask(BeforeInvocationEvent, scope, replay, self.agent, step.prompt)
            if asked:
                return _Paused(step, asked)
        return await self.append(step.prompt, BeforeModelCall())

    async def _message_added(self, step: MessageAdded, replay: bool) -> _Outcome:
        if self.hooks.has_callbacks(MessageAddedEvent):
            message = self.messages[step.index]
            scope = f"m{step.index}"
            _, asked = await self.ask(MessageAddedEvent, scope, replay, self.agent, message)
            if asked:
                return _Paused(step, asked)
        return step.then

    async def _before_model_call(self, step: BeforeModelCall, replay: bool) -> _Outcome:
        agent = self.agent
        limit = self.spec.max_cycles
        if self.progress.cycles >= limit:
            raise CycleLimitError(
                f"the invocation reached max_cycles={limit} model calls without a final reply"
            )
        if self.hooks.has_callbacks(BeforeModelCallEvent):
            scope = f"m{len(self.messages)}"
            _, asked = await self.ask(BeforeModelCallEvent, scope, replay, agent)
            if asked:
                return _Paused(step, asked)
        if self.progress.message is not None:  # sent with answers: the model sees it first
            self._send_message()
        if self.journal is not None:
            await self.checkpoint()
        self.progressed = True
        try:
            manager = self.spec.conversation
            if manager is None and self.spec.executor is LOCAL and self.observer is None:
                specs, options = model_request(self)  # no one needs the ModelCall value
                spec = self.spec
                call = LOCAL.answer(
                    spec.model, self.model_view(), specs, spec.system_prompt, options, self.emit
                )
            elif manager is None:
                call = self.spec.executor.call_model(self.model_call())
            else:
                from ._conversation import call_managed

                call = call_managed(self, manager)
            if self.observer is not None:  # the whole call: with its reductions, if any
                call = self.observer.observe_model(self.spec.model, call)
            response = await call
        except Exception as exc:
            return AfterModelCall(None, exc)
        return AfterModelCall(response, None)

    async def _after_model_call(self, step: AfterModelCall, replay: bool) -> _Outcome:
        agent = self.agent
        event = None
        if self.hooks.has_callbacks(AfterModelCallEvent):
            scope = f"m{len(self.messages)}"
            event, asked = await self.ask(
                AfterModelCallEvent, scope, replay, agent, step.response, step.exception
            )
            if asked:
                return _Paused(step, asked)
        progress = self.progress
        if event is not None and event.retry:
            retries = progress.model_retries + 1
            self.progress = progress.but(
                answers=progress.answers.without(event._used_ids()), model_retries=retries
            )
            if retries > self.spec.max_retries:
                raise RetryLimitError(
                    f"the model call was retried {retries - 1} times; "
                    f"the limit is max_retries={self.spec.max_retries}"
                ) from step.exception
            return BeforeModelCall()
        if step.exception is not None:
            raise step.exception
        response = step.response
        assert response is not None
        self.progress = progress = _tuple_new(  # Progress(...), as its ``__new__`` makes it
            Progress, (progress.cycles + 1, 0, progress.usage + response.usage, *progress[3:])
        )
        message = response.message
        tool_uses = message.tool_uses
        if tool_uses and response.stop_reason == "max_tokens":
            # A tool call cut off by the token limit is incomplete: drop it, keep the text.
            message = Message(
                "assistant", [b for b in message.content if not isinstance(b, ToolUse)]
            )
            tool_uses = []
        if progress.output is not None:  # a final answer of the output type, or asked again
            answered_step = await after_reply(self, response, message)
            if answered_step is not None:
                return answered_step
        then: Step
        if tool_uses:
            then = ToolBatch(len(self.messages), _unique_calls(tool_uses, self.tool_use_ids()))
        elif progress.message is not None:  # a person's message waits: the model answers it
            then = BeforeModelCall()
        else:
            stop: StopReason = (
                "end_turn" if response.stop_reason == "tool_use" else response.stop_reason
            )
            then = AfterInvocation(
                AgentResult(stop_reason=stop, message=message, usage=progress.usage)
            )
        return await self.append(message, then)

    def model_view(self) -> list[Message]:
        """The conversation as the model is sent it: the part the agent's conversation manager
        chooses (all of it without one) of :meth:`base_view`."""
        manager = self.spec.conversation
        base = self.base_view()
        if manager is None:
            return base
        from ..conversation import ConversationState

        return manager.view(base, self.agent._state.conversation or ConversationState())

    def base_view(self) -> list[Message]:
        """The conversation itself, unless a tool use in it has no result (a conversation
        given to the agent that way, a session from an older version): then a copy in which
        every tool use is answered (see :func:`answered`), made anew for each call. Whether it
        needs one is checked once per run: the run's own messages are always answered."""
        if self.clean is None:
            self.clean = answered(self.messages) is self.messages
        return self.messages if self.clean else answered(self.messages)

    def tool_use_ids(self) -> dict[str, int]:
        """How often each tool-use id occurs in the conversation, with the ids its calls ran
        under (counted once per run, as ``_unique_calls`` counted them)."""
        if self.seen_ids is None:
            seen: dict[str, int] = {}
            for m in self.messages:
                if m.role == "assistant":
                    uses = [b for b in m.content if isinstance(b, ToolUse)]
                    if uses:
                        _unique_calls(uses, seen)
            self.seen_ids = seen
        return self.seen_ids

    def batch(self) -> ToolBatch:
        """The tool batch the run stands at (its calls as they are now)."""
        step = self.step
        assert isinstance(step, ToolBatch)
        return step

    def put_call(self, call: ToolCall) -> ToolCall:
        """Where the run stands: its batch with ``call`` (a new value of one of its calls)."""
        self.step = self.step.with_call(call)  # type: ignore[union-attr]  # at a batch
        return call

    def put_batch(self, batch: ToolBatch) -> None:
        """Where the run stands: ``batch`` (a new value of the batch it stands at)."""
        self.batch()
        self.step = batch

    async def _tool_batch(self, step: ToolBatch, replay: bool) -> _Outcome:
        interrupts = await run_batch(self, step, replay)
        batch = self.batch()  # as its calls left it
        if interrupts:
            return _Paused(batch, interrupts)
        return await self.append(close_batch(batch, ""), BeforeModelCall())

    async def _after_invocation(self, step: AfterInvocation, replay: bool) -> _Outcome:
        if self.progress.message is not None:  # sent with answers: the model answers it (the
            return BeforeModelCall()  # reply held for review is superseded by the next one)
        if not self.hooks.has_callbacks(AfterInvocationEvent):
            return step.result
        scope = f"m{len(self.messages) - 1}"
        event, asked = await self.ask(AfterInvocationEvent, scope, replay, self.agent, step.result)
        if asked:
            return _Paused(step, asked)
        assert event is not None
        return event.result

    # --- helpers ------------------------------------------------------------------------------

    def _send_message(self) -> None:
        """Add the text a person sent with their answers as a user message, right before the
        model call its before-model hooks have already passed (so they are not asked again
        about a conversation one message longer); saved with the checkpoint that follows."""
        progress = self.progress
        assert progress.message is not None
        message = Message("user", [Text(progress.message)])
        self.progress = progress.but(message=None)
        self.messages.append(message)
        if self.emit is not None:
            self.emit(MessageAppended(message))

    async def append(self, message: Message, then: Step) -> MessageAdded:
        """Append ``message``; the run then stands at its message-added step (one change, so
        the journal never holds the message without the step that follows it). Nothing
        outside the loop happens before the next checkpoint, which saves both."""
        if self.progress.message is not None and message.role == "user":  # sent with answers
            message = Message("user", [*message.content, Text(self.progress.message)])
            self.progress = self.progress.but(message=None)
        self.messages.append(message)  # a look at the agent sees it; saved at the next save
        index = len(self.messages) - 1
        self.step = step = MessageAdded(index, then)
        self.progressed = True
        answers = self.progress.answers
        pruned = answers.pruned(index)
        if pruned is not answers:
            self.progress = self.progress.but(answers=pruned)
        if self.emit is not None:
            self.emit(MessageAppended(message))
        return step  # saved at the next checkpoint, before anything can depend on it

    async def _save(self, pause: Position | None) -> None:
        """The run's last save: the pause (or none) and agent.state; the claim is let go."""
        self.commit(data=freeze(self.agent.state))
        if self.journal is not None:
            await self.journal.save(self.identity, self.agent._state, pause, data=True)

    async def _give_back(self, resumed: Position | None, audit_mark: int) -> bool:
        """A run that ends early before doing anything irreversible leaves the pause it was
        resuming as it was, also in the store (with its answers in the audit trail only if
        they were stored: the store's trail is append-only). Returns whether it did."""
        if resumed is None or self.progressed:
            return False
        from ._transitions import put_back

        stored = audit_mark if self.journal is None else self.journal.audit_saved
        self.commit(audit=self.agent._state.audit[: max(audit_mark, stored)])
        await put_back(self.agent, resumed)
        return True

    def _pause(self, paused: _Paused) -> AgentResult:
        self.commit()  # the conversation as the run left it
        progress = self.progress
        if progress.votes:  # only the votes for questions still asked, as they were shown
            from types import MappingProxyType

            self.progress = progress = progress.but(
                votes=MappingProxyType(_standing_votes(progress.votes, paused.interrupts, self))
            )
        self.agent._commit(self.agent._state.at(Position(paused.step, paused.interrupts, progress)))
        if self.emit is not None:
            for interrupt in paused.interrupts:
                self.emit(InterruptRaised(interrupt))
        return AgentResult(
            stop_reason="interrupt", interrupts=list(paused.interrupts), usage=self.progress.usage
        )

    async def _abandon(self, reason: str) -> None:
        """End the invocation early, leaving a valid conversation (every tool use answered).

        The repair is saved if the agent has a session; a failure to save it does not hide
        the error that ended the run.
        """
        message = closing_message(self.messages, self.step, reason)
        if message is not None:
            self.messages.append(message)
            if self.emit is not None:
                self.emit(MessageAppended(message))
        self.commit(position=None)
        if self.journal is not None:
            with contextlib.suppress(Exception):
                await self._save(None)

    def model_call(self) -> ModelCall:
        """The model call the run makes now: the conversation as the model is sent it, the
        tools and the output options (the run's output schema, if any)."""
        agent, spec = self.agent, self.spec
        specs, options = model_request(self)
        return ModelCall(
            model=spec.model,
            messages=self.model_view(),
            tools=specs,
            system_prompt=spec.system_prompt,
            options=options,
            state=agent._data,
            now=spec.clock(),
            emit=self.emit,
        )

    async def call_model(self) -> ModelResponse:
        """One model call, through the agent's executor."""
        return await self.spec.executor.call_model(self.model_call())


def _standing_votes(votes: Mapping[str, Any], asked: list[Interrupt], run: Run) -> dict[str, Any]:
    """The votes that still count: for questions asked again, showing what the voters were
    shown (the digest their audit entries keep); a question that changed starts over."""
    pending = {q.id: q for q in asked}
    audit = run.agent._state.audit
    kept = {}
    for iid, vote in votes.items():
        question = pending.get(iid)
        if question is None:
            continue
        shown = next((e.shown for e in reversed(audit) if e.interrupt_id == iid and e.vote), None)
        if shown is None or shown == question.digest:
            kept[iid] = vote
    return kept


def _unique_calls(tool_uses: list[ToolUse], seen: dict[str, int]) -> tuple[ToolCall, ...]:
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
