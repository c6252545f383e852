"""One AG-UI run: the thread's session opened, the prompt run or the answers applied, the
events streamed, the end reported (RUN_FINISHED with its outcome, or RUN_ERROR).

The session holds the conversation and the state: of the input's messages only the newest,
a user message, is read (the prompt of a new run); the input's state is not applied (a
client's copy cannot overwrite what the agent keeps). A refused run changes nothing. A graph
or swarm registered with ``@app.graph`` runs through the same route (see ``_graph``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._agent import Agent
from .._stream import RunFinished
from ..errors import (
    AgentPausedError,
    AlreadyAnsweredError,
    AnswerValidationError,
    InterludeError,
    InterruptExpiredError,
    NotAllowedToAnswerError,
    NotPausedError,
    ResumeInputError,
    SessionConflictError,
    SessionError,
    StaleAnswerError,
    StateIntegrityError,
    UnconsumedAnswerError,
    UnknownAgentError,
    UnknownInterruptError,
)
from ._graph import NodeTranslator, graph_events
from ._resume import Refused, Resume, prompt_of, resume_of, stored_view
from ._translate import Translator, finished

if TYPE_CHECKING:
    from ag_ui.core import BaseEvent, RunAgentInput

    from .._result import AgentResult
    from ..operate import App, Operator, SessionView

__all__ = ["Runner", "error_code"]

_log = logging.getLogger("interlude.ag_ui")

_CODES: tuple[tuple[type[InterludeError], str], ...] = (
    (AlreadyAnsweredError, "already_answered"),
    (StaleAnswerError, "stale"),
    (UnconsumedAnswerError, "unconsumed_answer"),
    (UnknownInterruptError, "unknown_interrupt"),
    (InterruptExpiredError, "expired"),
    (AnswerValidationError, "invalid_answer"),
    (NotAllowedToAnswerError, "not_allowed"),
    (NotPausedError, "not_paused"),
    (AgentPausedError, "paused"),
    (ResumeInputError, "invalid_resume"),
    (StateIntegrityError, "integrity"),
    (SessionConflictError, "conflict"),
    (UnknownAgentError, "unknown_agent"),
    (SessionError, "session"),
)


def error_code(exc: InterludeError) -> str:
    """The RUN_ERROR ``code`` of an error (the kind of refusal, for a program to read)."""
    if isinstance(exc, Refused):
        return exc.code
    return next((code for kind, code in _CODES if isinstance(exc, kind)), "error")


@dataclass(frozen=True, slots=True)
class Runner:
    """Runs the App's agents, graphs and swarms for AG-UI requests on one store, answering
    through the operator floor (``operator``: its inbox verifies signed pauses with the
    agents' key)."""

    operator: Operator

    @property
    def app(self) -> App:
        return self.operator.app

    async def events(
        self, name: str, run: RunAgentInput, by: str, groups: tuple[str, ...]
    ) -> AsyncIterator[BaseEvent]:
        """The AG-UI events of one run, RUN_STARTED to RUN_FINISHED or RUN_ERROR."""
        from ag_ui.core import RunErrorEvent, RunStartedEvent

        yield RunStartedEvent(thread_id=run.thread_id, run_id=run.run_id)
        translator: Translator | NodeTranslator
        if name in self.app.graph_names:
            translator = NodeTranslator(run.thread_id)
            events = graph_events(self.operator, name, run, by, groups, translator)
        else:
            translator = Translator()
            events = self._run(name, run, by, groups, translator)
        try:
            async for event in events:
                yield event
        except InterludeError as exc:
            for event in translator.close():
                yield event
            yield RunErrorEvent(message=str(exc), code=error_code(exc))
        except Exception:  # a bug: logged here, not shown to the client
            _log.exception("AG-UI run %r of thread %r failed", run.run_id, run.thread_id)
            for event in translator.close():
                yield event
            yield RunErrorEvent(message="the run failed (see the server's log)", code="internal")

    async def _run(
        self,
        name: str,
        run: RunAgentInput,
        by: str,
        groups: tuple[str, ...],
        translator: Translator,
    ) -> AsyncIterator[BaseEvent]:
        agent, view = await self._open(name, run)
        try:
            state = dict(agent.state)
            if state:
                yield _snapshot(state)
            if run.resume and view is not None:
                plan = resume_of(run.thread_id, run.resume, agent.interrupts, time.time())
                stream = self._resumed(agent, run.thread_id, plan, by, groups)
            elif agent.needs_recovery:
                stream = _whole(agent.recover_async())
            else:
                stream = agent.stream_async(prompt_of(run))
            async for event in stream:
                if isinstance(event, RunFinished):
                    now = await self._standing(agent, run.thread_id)
                    if dict(now.state) != state:
                        yield _snapshot(dict(now.state))
                    done = event.result
                    for out in finished(
                        run.thread_id,
                        run.run_id,
                        done.stop_reason,
                        done.interrupts,
                        translator,
                        output=done.output,
                    ):
                        yield out
                else:
                    for out in translator.events(event):
                        yield out
        finally:
            await agent.aclose()

    async def _resumed(
        self, agent: Agent, thread: str, plan: Resume, by: str, groups: tuple[str, ...]
    ) -> AsyncIterator[Any]:
        """The events of the resume ``plan``: its answers through the floor (the rules every
        door applies, the first answer wins), or, when it only cancels expired questions,
        their settling by their deadlines."""
        if plan.answers:
            async for event in self.operator.answer_stream(
                thread, plan.answers, by=by, groups=groups, shown=plan.shown or None
            ):
                yield event
        else:
            yield RunFinished(await agent.resume_expired_async())

    async def _standing(self, agent: Agent, thread: str) -> Agent:
        """The agent whose state the run ended with: ``agent`` when it ran here, else (the
        floor resumed the session on an agent of its own) the session as stored."""
        if agent.is_running or not agent.is_paused:
            return agent
        opened = await self.operator.open(thread)
        return opened if isinstance(opened, Agent) else agent

    async def _open(self, name: str, run: RunAgentInput) -> tuple[Agent, SessionView | None]:
        """The thread's agent and its stored session (read, verified), or a new session of
        ``name`` (None)."""
        thread = run.thread_id
        view = await stored_view(self.operator, name, run)
        if view is None:
            opened = await self.operator.start(name, thread)
        else:
            opened = await self.operator.open(thread)
        if not isinstance(opened, Agent):  # a graph's session recorded under an agent's name
            raise Refused("not_an_agent", f"thread {thread!r} is not an agent's session")
        return opened, view


async def _whole(result: Any) -> AsyncIterator[Any]:
    """A run that is not streamed (a recovery): its reply, then its end."""
    done: AgentResult = await result
    from .._stream import MessageAppended

    if done.message is not None:
        yield MessageAppended(done.message)
    yield RunFinished(done)


def _snapshot(state: dict[str, Any]) -> BaseEvent:
    from ag_ui.core import StateSnapshotEvent

    from .._frozen import thaw

    return StateSnapshotEvent(snapshot=thaw(state))
