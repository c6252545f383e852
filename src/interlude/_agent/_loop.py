"""The loop: a state machine over steps, pausable at every step boundary.

``Run.drive`` takes the step to start from and works step by step. Each handler (one per kind
of step, in ``_steps``) returns the next step, a final ``AgentResult``, or a ``Paused`` (the
step to carry on from and its questions). Hooks with no callbacks cost nothing: their events
are not even built.

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
from .._result import AgentResult
from .._stream import InterruptRaised, MessageAppended, ModelResponse, StreamEvent
from ._answering import check_consumed
from ._executor import ModelCall
from ._observe import observer_for
from ._output import finish, model_request
from ._results import answered, close_batch, closing_message
from ._standing import AgentState, Conversation
from ._state import MessageAdded, Position, Progress, Step, ToolBatch, ToolCall, Undoing
from ._steps import HANDLERS, Outcome, Paused, unique_calls

if TYPE_CHECKING:
    from .._audit import AuditEntry
    from ..hooks import HookEvent, HookRegistry
    from ._agent import Agent
    from ._observe import RunInfo
    from ._persist import SessionLink

__all__ = ["Emit", "Run", "close_batch", "closing_message"]

Emit = Callable[[StreamEvent], None]
E = TypeVar("E", bound="HookEvent")
_tuple_new = tuple.__new__
_unique_calls = unique_calls  # the name ``_history`` imports from here


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
        "judged",
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
        self.judged: set[str] | None = None
        """The ids of the policy decisions in the audit trail (see ``_policing``): read from
        the trail when a policy first judges a call in this run, then kept up to date."""
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
        self.commit(
            audit=(*audit, *chained(audit, [entry], self.identity.key, self.agent.session_id))
        )

    def session_decisions(self) -> Mapping[str, tuple[bool, str | None]]:
        """The approval decisions remembered for the session (see ``_approval``)."""
        audit = self.agent._state.audit
        cached = self.decisions
        if cached is None or cached[0] != len(audit):
            from ._approval import session_decisions

            cached = self.decisions = (
                len(audit),
                session_decisions(
                    audit,
                    bool(self.identity.key),
                    self.messages,
                    self.identity.key,
                    self.agent.session_id,
                ),
            )
        return cached[1]

    def position(self) -> Position | None:
        """Where the run stands, as the journal keeps it (a pause with no questions)."""
        step = self.step  # made as its named tuple's own ``__new__`` makes it, one call less
        return None if step is None else _tuple_new(Position, (step, [], self.progress))

    async def checkpoint(self, starts: list[str] | None = None) -> None:
        """Save where the run stands, if anything changed since the last save; ``starts``
        names the tool calls this save starts that forks may share (``_shared``)."""
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
                starts=starts,
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
        outcome: Outcome = step
        handlers = HANDLERS  # one handler per kind of step (see ``_steps``)
        try:
            while True:
                self.step = step
                outcome = await handlers[type(step)](self, step, replay)
                if isinstance(outcome, AgentResult):
                    outcome = finish(self, outcome)  # the output as output_type, if any
                    await self._save(None)
                    return outcome
                if isinstance(outcome, Paused):
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

    # --- what the steps use -------------------------------------------------------------------

    async def ask(
        self, kind: type[E], scope: str, replay: bool, *args: Any
    ) -> tuple[E | None, list[Interrupt]]:
        """Run the callbacks of event ``kind`` (``kind(*args, ...)`` with the event's common
        fields, built only when the agent has callbacks for it): (the event, its questions,
        empty when they passed), or (None, []) when nothing listens."""
        hooks = self.hooks
        if not hooks.has_callbacks(kind):
            return None, []
        answers, progressed = self.progress.answers, self.progressed
        event = kind(*args, scope=scope, is_replay=replay, answers=answers)
        asked = await self.invoke(hooks, event)
        if replay and answers.values:  # every answer to its questions taken, or refused
            try:
                check_consumed(event, answers)
            except BaseException:
                self.progressed = progressed  # its answer unused: the pause goes back
                raise
        return event, asked

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
        under (counted once per run, as ``unique_calls`` counted them)."""
        if self.seen_ids is None:
            seen: dict[str, int] = {}
            for m in self.messages:
                if m.role == "assistant":
                    uses = [b for b in m.content if isinstance(b, ToolUse)]
                    if uses:
                        unique_calls(uses, seen)
            self.seen_ids = seen
        return self.seen_ids

    def batch(self) -> ToolBatch:
        """The tool batch the run stands at (its calls as they are now): an undo's own batch
        of compensations while it stands at one."""
        step = self.step
        if type(step) is ToolBatch:
            return step
        assert isinstance(step, Undoing)
        return step.batch

    def put_call(self, call: ToolCall) -> ToolCall:
        """Where the run stands: its batch with ``call`` (a new value of one of its calls)."""
        self.step = self.step.with_call(call)  # type: ignore[union-attr]  # at a batch
        return call

    def put_batch(self, batch: ToolBatch) -> None:
        """Where the run stands: ``batch`` (a new value of the batch it stands at)."""
        self.batch()
        self.step = batch

    # --- helpers ------------------------------------------------------------------------------

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

    def _pause(self, paused: Paused) -> AgentResult:
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
        asked = list(paused.interrupts)  # none: an undo stopped at its checkpoint
        return AgentResult(
            stop_reason="interrupt" if asked else "undone", interrupts=asked, usage=progress.usage
        )

    async def _abandon(self, reason: str) -> None:
        """End the invocation early, leaving a valid conversation (every tool use answered).

        The repair is saved if the agent has a session; a failure to save it does not hide
        the error that ended the run.
        """
        step = self.step
        if isinstance(step, Undoing):  # an undo stops where it is: recover() finishes it (a
            position = Position(step, [], self.progress)  # started compensation in doubt)
            self.commit(position=position)
            if self.journal is not None:
                with contextlib.suppress(Exception):
                    await self._save(position)
            return
        message = closing_message(self.messages, step, reason)
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
