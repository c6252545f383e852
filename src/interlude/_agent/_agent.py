"""The Agent: a model, tools and hooks, run in a loop that can pause and resume.

Here: making an agent, running it, and changing it between runs. Reading what it holds (its
settings, standing, session and record) is inherited from ``_holding.AgentHolding``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from .._interrupt import EXPIRY
from .._messages import ContentBlock, JsonValue, Message
from .._result import AgentResult
from .._stream import RunFinished, StreamEvent
from .._sync import run_sync
from .._tools import AgentTool, ToolSpec
from ..errors import AgentBusyError, ConfigurationError, NotPausedError, StateMismatchError
from ..hooks import HookProvider, HookRegistry
from ..models import Model
from ._answering import Plan, bind_output, check_queued, prompt_plan, resume_plan
from ._executor import current_body
from ._holding import AgentHolding
from ._spec import AgentSpec, Approver, SpecField, respec, tools_by_name
from ._standing import AgentState, Conversation, check_reserved
from ._travel import AgentTravel

if TYPE_CHECKING:
    import asyncio

    from ..conversation import ConversationManager
    from ..policy import Policy
    from ..sessions import SessionStore, StoredSession
    from ._direct import ToolCaller
    from ._loop import Emit
    from ._observe import Observer
    from ._persist import SessionLink

# The loop, asyncio and the JSON codec load on first use, keeping `import interlude` light.

__all__ = ["Agent", "Prompt"]

Prompt = str | Sequence[ContentBlock] | Sequence[Mapping[str, Any]]
"""A new prompt (text or content blocks), or the list form of interrupt answers."""


class Agent(AgentTravel, AgentHolding):
    """An agent: it calls ``model``, runs the ``tools`` it asks for, and repeats until it answers.

    Hook callbacks and tools may ``interrupt(...)`` at any step; the run then stops with
    ``stop_reason == "interrupt"`` and :meth:`resume` carries on from exactly there.
    """

    kind: ClassVar[str] = "agent"
    """What it is to the operator floor (a Graph's is ``"graph"``, a Swarm's ``"swarm"``)."""

    model: SpecField[Model] = SpecField()
    system_prompt: SpecField[str | None] = SpecField()
    tool_executor: SpecField[Literal["concurrent", "sequential"]] = SpecField()
    max_cycles: SpecField[int] = SpecField()
    max_retries: SpecField[int] = SpecField()
    output_retries: SpecField[int] = SpecField()
    """How often a final answer that does not fit a run's ``output_type`` is sent back to
    the model with what is wrong, before the run fails with OutputValidationError."""
    in_doubt: SpecField[Literal["ask", "rerun"]] = SpecField()
    """What recovery does with a call whose process stopped while it ran, for tools not
    marked ``idempotent``: ask a person (``"ask"``) or run it again (``"rerun"``)."""
    name: SpecField[str | None] = SpecField()
    """The agent's name, recorded with its session: an :class:`~interlude.App` maps it to
    the code that builds the agent (stored data never names code)."""
    clock: SpecField[Callable[[], float]] = SpecField()
    """Epoch seconds now: when questions are raised, and whether their deadlines passed."""
    conversation: SpecField[ConversationManager | None] = SpecField()
    """What part of the conversation the model is sent (None: all of it); see
    :mod:`interlude.conversation`."""
    observer: SpecField[Observer | None] = SpecField()
    """Who watches this agent's runs (``Agent(observer=...)``, or
    ``interlude.otel.instrument(agent)``); None: the process-wide observer, if any."""
    hooks: SpecField[HookRegistry] = SpecField()
    approver: SpecField[Approver | None] = SpecField()
    """An in-process resolver, called with each question when a run pauses (sync or async):
    it returns an answer, applied as ``by="approver:<its name>"``, or None to leave the
    question to a person (see docs/approvals.md)."""

    policy: SpecField[Policy | None] = SpecField()
    """Who must approve what, for every tool call the agent makes (see docs/policy.md)."""
    shadow: SpecField[Policy | None] = SpecField()
    """A candidate policy judged and recorded beside ``policy`` on each call, never acted on."""
    on_decline: SpecField[Literal["tell", "compensate"]] = SpecField()
    """What follows a person's decline of a call: the model is told (``"tell"``), or the calls
    the run made since its prompt are undone first (``"compensate"``, see docs/undo.md)."""

    def __init__(
        self,
        model: Model | str,
        tools: Iterable[AgentTool | Any] = (),
        hooks: Iterable[HookProvider] = (),
        system_prompt: str | None = None,
        tool_executor: Literal["concurrent", "sequential"] = "concurrent",
        *,
        messages: Iterable[Message] = (),
        state: Mapping[str, JsonValue] | None = None,
        max_cycles: int = 50,
        max_retries: int = 3,
        output_retries: int = 2,
        session: SessionStore | str | None = None,
        session_id: str | None = None,
        session_lease: float = 30.0,
        in_doubt: Literal["ask", "rerun"] = "ask",
        name: str | None = None,
        signing_key: bytes | str | None = None,
        clock: Callable[[], float] | None = None,
        conversation: ConversationManager | None = None,
        observer: Observer | None = None,
        approver: Approver | None = None,
        policy: Policy | None = None,
        shadow: Policy | None = None,
        on_decline: Literal["tell", "compensate"] = "tell",
    ) -> None:
        registry = HookRegistry()
        for provider in hooks:
            registry.add_hook(provider)
        spec = AgentSpec(
            model=model,
            tools=tools_by_name(tools),
            hooks=registry,
            system_prompt=system_prompt,
            tool_executor=tool_executor,
            max_cycles=max_cycles,
            max_retries=max_retries,
            output_retries=output_retries,
            in_doubt=in_doubt,
            name=name,
            signing_key=signing_key,  # type: ignore[arg-type]  # text: encoded by the spec
            clock=clock or time.time,
            conversation=conversation,
            observer=observer,
            session_lease=session_lease,
            approver=approver,
            policy=policy,
            shadow=shadow,
            on_decline=on_decline,
        )
        self._setup(spec, messages, state, session, session_id)

    @classmethod
    def from_spec(
        cls,
        spec: AgentSpec,
        *,
        messages: Iterable[Message] = (),
        state: Mapping[str, JsonValue] | None = None,
        session: SessionStore | str | None = None,
        session_id: str | None = None,
    ) -> Agent:
        """An agent of ``spec`` (see :class:`AgentSpec`), with its own conversation, state and
        session."""
        agent = cls.__new__(cls)
        # Its own hook registry (the same callbacks): one added to a copy stays the copy's.
        agent._setup(respec(spec, hooks=spec.hooks.copy()), messages, state, session, session_id)
        return agent

    @classmethod
    async def open(cls, *args: Any, **kwargs: Any) -> Agent:
        """``Agent(*args, **kwargs)`` with its session loaded (asynchronously) before it is
        returned: errors in the stored session are raised here."""
        agent = cls(*args, **kwargs)
        await agent.load()
        return agent

    def _setup(
        self,
        spec: AgentSpec,
        messages: Iterable[Message],
        state: Mapping[str, JsonValue] | None,
        session: SessionStore | str | None,
        session_id: str | None,
    ) -> None:
        self._spec = spec
        self._specs: list[ToolSpec] | None = None
        self._data: dict[str, JsonValue] = dict(state or {})
        if self._data:
            check_reserved(self._data, ConfigurationError)
        self._state = AgentState(messages=tuple(messages))
        """Where the agent stands (see ``_standing``); replaced only by :meth:`_commit`."""
        self._lock = threading.Lock()
        self._load_lock = threading.Lock()
        self._running = False
        self._live: list[Message] | None = None  # the running run's own list (see _loaded)
        self._task: asyncio.Task[AgentResult] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._cancel_requested = False
        self._tool: ToolCaller | None = None  # made at first use (see tool)
        self._session: SessionLink | None = None
        self._detached_id: str | None = None
        """The id of the session it was detached from (a durable engine's run), if any."""
        self._unloaded = False
        """Whether the session is still to be loaded (at first use: see :meth:`load`)."""
        if (session is None) != (session_id is None):
            raise ConfigurationError("give both session= and session_id=, or neither")
        if session is not None and session_id is not None:
            from ._persist import SessionLink

            self._session = SessionLink(
                session, session_id, spec.session_lease, list_pending=spec.list_pending
            )
            self._unloaded = True

    @property
    def tool(self) -> ToolCaller:
        """``agent.tool.name(**input)``: tool ``name`` run directly, hooks included, not
        recorded in the conversation (see ``ToolCaller``)."""
        caller = self._tool
        if caller is None:
            from ._direct import ToolCaller

            caller = self._tool = ToolCaller(self)
        return caller

    def _set_spec(self, spec: AgentSpec) -> None:
        if self._running and spec.executor is not self._spec.executor:
            raise AgentBusyError("the executor cannot change while a run is going")
        self._spec = spec
        self._specs = None

    @property
    def state(self) -> dict[str, JsonValue]:
        """The agent's own data: hooks and tools may change it; it is committed with the
        agent's standing at each run's end (and saved with its session)."""
        if self._unloaded:
            self._load_now()
        body = current_body()
        if body is not None and body.agent is self:  # inside one of its tool bodies
            return body.state(self._data)
        return self._data

    @state.setter
    def state(self, value: Mapping[str, JsonValue]) -> None:
        if self._unloaded:
            self._load_now()
        body = current_body()
        if body is not None and body.agent is self:
            body.state(self._data).replace_all(dict(value))
        else:
            self._data = dict(value)

    # --- the session ------------------------------------------------------------------------

    async def load(self, stored: StoredSession | None = None) -> None:
        """Load the agent's session now (its conversation, state and pause, if stored); the
        first run, or the first look at what the agent holds, does it otherwise. ``stored`` is
        the session as already read from the store (it is not read again). Errors in the
        stored session (SessionCorruptError, StateIntegrityError, ...) are raised here, and
        nothing is loaded then. Does nothing once loaded."""
        link = self._session
        if not self._unloaded or link is None:
            return
        if stored is None:
            stored = await link.read()
        self._adopt_stored(link, stored)

    def _load_now(self) -> None:
        """:meth:`load` from sync code (a property read before any run)."""
        link = self._session
        assert link is not None
        self._adopt_stored(link, run_sync(link.read()))

    def _adopt_stored(self, link: SessionLink, stored: StoredSession | None) -> None:
        from ._transitions import adopt_stored

        adopt_stored(self, link, stored)

    def detach_session(self) -> None:
        """Stop saving to the session: no journal, no claims (a durable engine keeps the
        run's history itself). The agent keeps what it loaded."""
        if self._running:
            raise AgentBusyError("cannot detach the session while a run is going")
        if self._session is not None:  # still names its calls (their idempotency keys)
            self._detached_id = self._session.session_id
        self._session = None
        self._unloaded = False  # nothing to load any more

    # --- the conversation -----------------------------------------------------------------

    @property
    def messages(self) -> list[Message]:
        """The conversation, read-only (a copy that refuses edits; so are its messages).
        Assign a new list to replace the conversation between runs."""
        from .._frozen import FrozenList

        return FrozenList(self._loaded().messages)

    @messages.setter
    def messages(self, messages: Iterable[Message]) -> None:
        from ._transitions import replace_conversation

        replace_conversation(self, list(messages))

    def _loaded(self) -> AgentState:
        """Where the agent stands, its session loaded first if it was not yet; while a run
        goes, with the run's conversation as far as it went (a view: nothing is written)."""
        if self._unloaded:
            self._load_now()
        state, live = self._state, self._live
        if live is not None and len(live) != len(state.messages):
            return state.with_messages(Conversation(live))
        return state

    # --- runs -----------------------------------------------------------------------------

    def __call__(self, prompt: Prompt, *, output_type: Any = None) -> AgentResult:
        """Run to the end (or to a pause) from sync code."""
        return run_sync(self.invoke_async(prompt, output_type=output_type))

    async def invoke_async(self, prompt: Prompt, *, output_type: Any = None) -> AgentResult:
        """Run to the end, or to a pause (``stop_reason == "interrupt"``).

        With ``output_type`` (a pydantic model, dataclass, TypedDict or a plain type such as
        ``int``, ``list[str]`` or a ``Literal``), the final answer must be a value of it:
        ``result.output`` holds it, validated (see docs/structured-output.md)."""
        await self.load()
        plan = bind_output(prompt_plan(self, prompt), output_type)
        return await self._start(plan, None, output_type)

    def resume(
        self,
        answers: Mapping[str, JsonValue],
        *,
        by: str | None = None,
        shown: Mapping[str, str] | None = None,
        output_type: Any = None,
        message: str | None = None,
    ) -> AgentResult:
        """Answer pending interrupts (``{interrupt_id: answer}``) and carry on, from sync code."""
        return run_sync(
            self.resume_async(answers, by=by, shown=shown, output_type=output_type, message=message)
        )

    async def resume_async(
        self,
        answers: Mapping[str, JsonValue],
        *,
        by: str | None = None,
        shown: Mapping[str, str] | None = None,
        output_type: Any = None,
        message: str | None = None,
    ) -> AgentResult:
        """Answer pending interrupts and carry on from where the run paused.

        Every answer is checked before anything changes: the id must be pending, the answer
        JSON and of the question's response type (AnswerValidationError naming the field),
        and its deadline not passed (InterruptExpiredError). Pending questions whose deadline
        has passed are settled by expiry in the same resume. Each answer is added to the audit
        trail as given ``by`` (default ``"unknown"``; names are plain text, and ``"expiry"`` is
        kept for deadlines). ``shown`` maps interrupt ids to the digest of the question the
        person was shown (``Interrupt.digest``, as in ``AuditEntry.shown``): if the pending
        question differs (its data changed meanwhile), the resume is refused and nothing
        changes.

        A run started with ``output_type`` keeps its JSON Schema in the pause: give the type
        again as ``output_type`` to get ``result.output`` as that type (a type with another
        schema raises OutputTypeMismatchError, nothing changed); without it the answer is
        still checked against the stored schema and ``result.output`` is its JSON data.

        ``message`` is text from the person sent to the model with the answers: it joins the
        next user message of the run (the tool results of a paused batch), or is sent as one
        before the next model call (also when the run would otherwise end)."""
        loading = self._unloaded
        await self.load()
        plan = bind_output(resume_plan(self, answers, by, shown, message=message), output_type)
        await check_queued(self, answers, just_loaded=loading)
        return await self._start(plan, None, output_type)

    def check_resume(
        self,
        answers: Mapping[str, JsonValue],
        *,
        by: str | None = None,
        shown: Mapping[str, str] | None = None,
    ) -> None:
        """Raise the error :meth:`resume_async` would refuse these answers with (an edit the
        tool's own validation refuses among them); change nothing. For a check made where the
        answer arrives, before it is recorded or sent on (a door, a workflow's validator)."""
        self._loaded()
        resume_plan(self, answers, by, shown)

    def resume_expired(self, *, output_type: Any = None) -> AgentResult:
        """Settle the questions whose deadline has passed and carry on, from sync code."""
        return run_sync(self.resume_expired_async(output_type=output_type))

    async def resume_expired_async(self, *, output_type: Any = None) -> AgentResult:
        """Settle every pending question whose deadline has passed (with its default, or as
        declined when it has none: see InterruptExpiredError) and carry on. The others stay
        pending. ResumeInputError if none has expired; nothing changes then."""
        await self.load()
        plan = resume_plan(self, {}, EXPIRY, expiry_only=True)
        return await self._start(bind_output(plan, output_type), None, output_type)

    def recover(self, *, output_type: Any = None) -> AgentResult:
        """Carry on a run whose process stopped before it finished, from sync code."""
        return run_sync(self.recover_async(output_type=output_type))

    async def recover_async(self, *, output_type: Any = None) -> AgentResult:
        """Carry on a run whose process stopped (see :attr:`needs_recovery`) from its journal.

        Completed steps are kept: a model reply is not asked for again, a finished tool keeps
        its result. A tool call that started but has no result is *in doubt*: it runs again if
        its tool is ``idempotent`` (or ``Agent(in_doubt="rerun")``), otherwise the run pauses
        with an ``in_doubt`` question for it, answered ``"rerun"``, ``"fail"`` or
        ``{"result": ...}``. SessionConflictError if the run's claim is still live.
        """
        await self.load()
        position = self._state.position
        if position is None or position.interrupts:
            raise NotPausedError(
                "the agent holds no stopped run to recover"
                + (" (it is paused: answer it with resume())" if position is not None else "")
            )
        plan = bind_output((position.step, position.progress, True, []), output_type)
        return await self._start(plan, None, output_type)

    async def stream_async(
        self, prompt: Prompt, *, output_type: Any = None
    ) -> AsyncIterator[StreamEvent]:
        """Run, yielding typed events as they happen; the last one is :class:`RunFinished`."""
        await self.load()
        plan = bind_output(prompt_plan(self, prompt), output_type)
        async with contextlib.aclosing(self._streamed(plan, output_type)) as events:
            async for event in events:  # closed with this stream: its run stops at once
                yield event

    async def resume_stream_async(
        self,
        answers: Mapping[str, JsonValue],
        *,
        by: str | None = None,
        shown: Mapping[str, str] | None = None,
        output_type: Any = None,
        message: str | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """:meth:`resume_async`, yielding the rest of the run's events as they happen (the last
        one is :class:`RunFinished`). The answers are checked as ``resume`` checks them before
        the first event: a refused resume raises on the first iteration and changes nothing."""
        loading = self._unloaded
        await self.load()
        plan = bind_output(resume_plan(self, answers, by, shown, message=message), output_type)
        await check_queued(self, answers, just_loaded=loading)
        async with contextlib.aclosing(self._streamed(plan, output_type)) as events:
            async for event in events:  # closed with this stream: its run stops at once
                yield event

    async def _streamed(self, plan: Plan, output_type: Any) -> AsyncGenerator[StreamEvent, None]:
        """Run ``plan``, yielding its events; the last one is :class:`RunFinished`."""
        import asyncio

        queue: asyncio.Queue[StreamEvent | None] = asyncio.Queue()
        task = asyncio.ensure_future(self._start(plan, queue.put_nowait, output_type))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
            yield RunFinished(task.result())
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    def cancel(self) -> None:
        """Stop the current run soon; safe from any thread or task.

        The run returns ``stop_reason == "cancelled"``; tool uses without a result get a
        "cancelled" error result, so the conversation stays valid. No run: nothing happens.
        """
        with self._lock:
            if not self._running or self._cancel_requested:
                return  # no run, or its cancel is already on its way
            self._cancel_requested = True  # seen by _start if the run task does not exist yet
            task, loop = self._task, self._loop
        if task is not None and loop is not None and not task.done():
            loop.call_soon_threadsafe(task.cancel)

    def forget_decisions(self, tool: str | None = None, *, by: str | None = None) -> None:
        """Forget the remembered approval decisions (``tool``'s, or all of them): the next
        call of such a tool asks again. Recorded in the audit trail as given ``by``."""
        if self._running:
            raise AgentBusyError("cannot forget decisions while a run is going")
        if tool is not None and not isinstance(tool, str):
            raise ConfigurationError(f"forget_decisions(tool) takes a tool name, got {tool!r}")
        if by is not None:
            from ._answering import check_by

            check_by(by)
        self._loaded()
        from ._transitions import forget

        forget(self, tool, "unknown" if by is None else by)

    def discard_pause(self) -> None:
        """Drop the pause (or a stopped run) so the agent takes new prompts; pending tool calls
        become "cancelled" (a call that had started is said to have maybe had effects)."""
        if self._running:
            raise AgentBusyError("cannot discard the pause while a run is going")
        if self._loaded().position is None:
            raise NotPausedError("the agent is not paused; there is nothing to discard")
        from ._transitions import discard

        discard(self)

    def as_tool(self, name: str | None = None, description: str | None = None) -> AgentTool:
        """This agent as a tool of another: it takes ``{"prompt": text}`` and returns the final
        text of a fresh copy of this agent run on it. The copy's questions pause the calling
        agent (under ids scoped by its tool call); the answers given there resume the copy
        where it stopped. ``name`` defaults to the agent's name. See docs/agents-as-tools.md.
        """
        from ._subagent import SubAgentTool

        return SubAgentTool(self, name, description)

    # --- state ------------------------------------------------------------------------------

    def import_state(self, data: Mapping[str, JsonValue]) -> None:
        """Replace this agent's state with ``data`` from :meth:`export_state`.

        Raises StateFormatError for an unknown version or malformed data, StateMismatchError if
        the pause needs a tool this agent lacks, StateIntegrityError if this agent has a
        signing key and the pause is not signed with it; in every case nothing changes.
        """
        if self._running:
            raise AgentBusyError("cannot import state while a run is going")
        if self._session is not None:
            raise ConfigurationError(
                "this agent's state comes from its session; import into an agent without one"
            )
        from ._codec import check_answered, decode_state
        from ._transitions import adopt

        loaded = decode_state(data, self._key, self.name)
        check_answered(loaded)
        if self.name is not None and loaded.agent not in (None, self.name):
            raise StateMismatchError(
                f"the state was saved by agent {loaded.agent!r}; this agent is {self.name!r}"
            )
        adopt(self, loaded)

    # --- internals --------------------------------------------------------------------------

    def _with_data(self, state: AgentState) -> AgentState:
        """``state`` with ``agent.state`` as it is now committed into it (read-only copy)."""
        from .._frozen import freeze

        return state.but(data=freeze(self.state))

    def _commit(self, state: AgentState) -> None:
        """Make ``state`` where the agent stands: the one place its standing changes (called
        by the loop during a run, by the transitions between runs)."""
        self._state = state

    async def _start(self, plan: Plan, emit: Emit | None, output_type: Any = None) -> AgentResult:
        from ._running import start

        result = await start(self, plan, emit)
        if self._spec.approver is not None and result.stop_reason == "interrupt":
            from ._approver import resolve

            result = await resolve(self, result, emit, output_type)
        return result
