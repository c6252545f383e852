"""The workflow ``interlude.agent``: an agent's loop in workflow code, its model calls and tool
bodies DBOS steps, its pauses durable waits for answers sent as messages.

The workflow id is the session id. At a pause the workflow sets its attributes (the questions,
the agent, the earliest deadline, a pause number: what ``pending`` lists without a worker) and
waits in ``recv`` until a message comes or the next deadline passes (a durable sleep). Every
answer goes through the agent's one answer path: checked as ``resume`` checks it, refused
with the embedded error (nothing changes), or applied; its outcome is published as an event
keyed by the message's ticket. Messages are taken one at a time in order by the one
execution that owns the workflow: the first answer wins.

A run also starts from an ``export_state()`` (``{"state"}``, no prompt: a session moved here),
waiting on its questions (paused) or carried on (stopped between steps). A move-out message
(``interlude move``, on the answers' topic: in order with them) taken at the pause it was sent
at closes the run: a ``moved`` entry appended to its trail, its pause dropped, the state it
left with published and returned, the workflow ended as moved (``{"stop_reason": "moved",
"moved_to"}``); answers sent afterwards are refused with where it went.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from dbos import DBOS

from .._messages import JsonValue
from ..errors import (
    AgentBusyError,
    AlreadyAnsweredError,
    ConfigurationError,
    InterludeError,
    NotPausedError,
    ResumeError,
    ResumeInputError,
    UnknownAgentError,
)
from ..operate import AgentSession, App
from . import _common as c
from ._executor import Clock, DBOSExecutor

if TYPE_CHECKING:
    from .._agent import Agent
    from .._result import AgentResult
    from ..sessions import StoredSession

__all__ = ["agent_workflow", "build_agent", "install", "installed_app"]

WAIT_LIMIT = 24 * 3600.0
"""The longest single wait in ``recv`` with no deadline pending (it then waits again)."""

_APP: list[App] = []


def install(app: App) -> None:
    """Make ``app`` the App whose agents this process's workflows run."""
    if _APP and _APP[0] is not app:
        raise ConfigurationError("this process already runs another App's DBOS workflows")
    _APP[:] = [app]


def installed_app() -> App:
    if not _APP:
        raise ConfigurationError("no Interlude App is installed: start interlude.dbos.worker")
    return _APP[0]


class _NoStore:
    """The store a factory is given: it holds nothing (the DBOS record is the journal)."""

    async def load(self, session_id: str) -> StoredSession | None:
        return None


def build_agent(app: App, name: str, run_id: str) -> Agent:
    """Agent ``name`` of ``app``, built by its factory, detached from any store."""
    from .._agent import Agent

    factory = app._factories.get(name)
    if factory is None:
        raise UnknownAgentError(f"no agent {name!r} in this app (its agents: {list(app.names)!r})")
    agent = factory(AgentSession(id=run_id, store=cast("Any", _NoStore())))
    if not isinstance(agent, Agent):
        raise ConfigurationError(f"the factory of agent {name!r} returned {agent!r}, not an Agent")
    app.govern(agent)
    agent.detach_session()  # no journal, no claims: the DBOS record is the journal
    if agent.name is None:
        agent.name = name
    elif agent.name != name:
        raise ConfigurationError(
            f"the factory of agent {name!r} returned an agent named {agent.name!r}"
        )
    return agent


def summary(result: AgentResult | None, agent: Agent) -> dict[str, JsonValue]:
    return {
        "stop_reason": None if result is None else result.stop_reason,
        "text": None if result is None else str(result),
        "interrupts": [i.to_dict() for i in agent.interrupts],
    }


class _Run:
    """One execution of the workflow (a replay rebuilds the same one from the record)."""

    def __init__(self, request: Mapping[str, Any], workflow_id: str) -> None:
        self.name = str(request["agent"])
        self.id = workflow_id
        self.clock = Clock(float(request.get("now") or 0.0))
        self.agent = build_agent(installed_app(), self.name, workflow_id)
        self.agent.clock = self.clock
        self.agent.executor = DBOSExecutor(self.clock)
        if request.get("state") is not None:
            self.agent.import_state(request["state"])
        self.answered: dict[str, str | None] = {}
        """Interrupt id: who answered it (this run's answers; a later one is refused)."""
        self.pause = 0
        self.shown: tuple[str, ...] | None = None
        """The ids of the questions the attributes hold (None: no pause marked)."""
        self.moved: tuple[str, dict[str, JsonValue]] | None = None
        """Where the run went and the state it left with, once a move out was applied."""

    async def run(self, prompt: Any) -> dict[str, JsonValue]:
        agent = self.agent
        result: AgentResult | None = None
        if prompt is not None:
            result = await agent.invoke_async(prompt)
        elif agent.needs_recovery and not agent.is_paused:  # moved here stopped between steps
            result = await agent.recover_async()
        while agent.is_paused and self.moved is None:
            await self._mark_paused()
            carried = await self._next()
            if carried is not None:
                result = carried
        if self.shown is not None:
            await DBOS.update_workflow_attributes_async(
                self.id, {c.PENDING: False, c.QUESTIONS: None, c.DEADLINE: None}, merge=True
            )
        out = summary(result, agent)
        out["answered"] = dict(self.answered)
        out["state"] = agent.export_state()
        if self.moved is not None:  # the state it left with: a move cut short takes it again
            out.update(stop_reason=c.MOVED, moved_to=self.moved[0], state=self.moved[1])
        return out

    async def _mark_paused(self) -> None:
        """The attributes of the pause (only when its questions changed)."""
        interrupts = self.agent.interrupts
        ids = tuple(i.id for i in interrupts)
        if ids == self.shown:
            return
        self.pause += 1
        self.shown = ids
        deadlines = [i.expires_at for i in interrupts if i.expires_at is not None]
        questions: list[JsonValue] = [i.to_dict() for i in interrupts]
        attributes: dict[str, JsonValue] = {
            c.PENDING: True,
            c.AGENT: self.name,
            c.QUESTIONS: questions,
            c.DEADLINE: min(deadlines) if deadlines else None,
            c.PAUSE: self.pause,
            c.PAUSED_AT: self.clock(),
        }
        await DBOS.update_workflow_attributes_async(self.id, attributes, merge=True)

    async def _next(self) -> AgentResult | None:
        """Wait for a message (or the earliest deadline) and carry the run on with it."""
        agent = self.agent
        deadlines = [i.expires_at for i in agent.interrupts if i.expires_at is not None]
        timeout = WAIT_LIMIT
        if deadlines:
            timeout = min(WAIT_LIMIT, max(0.001, min(deadlines) - self.clock()))
        message = await DBOS.recv_async(c.TOPIC, timeout_seconds=timeout)
        if message is None:
            if not deadlines:
                return None
            self.clock.advance(min(deadlines))  # the durable sleep ended at the deadline
            try:
                return await agent.resume_expired_async()
            except ResumeInputError:  # none expired yet: wait again
                return None
        return await self._apply(message)

    async def _apply(self, message: Any) -> AgentResult | None:
        """Check and apply one answer message; publish its outcome under its ticket."""
        if not isinstance(message, dict) or not isinstance(message.get("ticket"), str):
            return None  # not ours: nothing to answer
        ticket = message["ticket"]
        self.clock.advance(message.get("at"))
        if c.MOVE_OUT in message:
            await self._move_out(ticket, message)
            return None
        answers, by, shown = message.get("answers"), message.get("by"), message.get("shown")
        try:
            self._check(answers, by, shown)
            assert isinstance(answers, dict)
        except ResumeError as exc:
            await DBOS.set_event_async(c.outcome_key(ticket), c.refusal_to_dict(exc))
            return None
        await DBOS.set_event_async(c.outcome_key(ticket), {"accepted": True})
        try:
            result = await self.agent.resume_async(answers, by=by, shown=shown)
        except ResumeError:  # checked just before, with the same clock: not expected
            return None
        waiting = {q.id for q in self.agent.interrupts}  # a quorum's question waits on votes
        for interrupt_id in answers:
            if interrupt_id not in waiting:
                self.answered[interrupt_id] = by
        return result

    async def _move_out(self, ticket: str, message: Mapping[str, Any]) -> None:
        """Leave (``interlude move``): applied only at the pause it was sent at and before
        its sender gave up (``until``, read from a step: a late one changes nothing)."""
        from .._agent import mark_moved

        move = message[c.MOVE_OUT]
        to = move.get("to") if isinstance(move, dict) else None
        source = move.get("from") if isinstance(move, dict) else None
        by = move.get("by") if isinstance(move, dict) else None
        refusal: InterludeError | None = None
        if not isinstance(to, str) or not to or not isinstance(source, str) or not source:
            refusal = ConfigurationError(f'move_out takes {{"to", "from"}}: got {move!r}')
        elif message.get("pause") != self.pause:
            refusal = AgentBusyError(
                "the run went on since the move was asked (an answer came first): nothing was "
                "moved; move it again once it pauses"
            )
        else:
            until = message.get("until")
            now = await DBOS.run_step_async({"name": c.CLOCK_STEP}, _now)
            if isinstance(until, int | float) and now > until:
                refusal = AgentBusyError("the move came after its sender gave up: not applied")
        if refusal is not None:
            await DBOS.set_event_async(c.outcome_key(ticket), c.refusal_to_dict(refusal))
            return
        assert isinstance(to, str) and isinstance(source, str)
        state = mark_moved(
            self.agent,
            session_id=self.id,
            source=source,
            target=to,
            by=by if isinstance(by, str) and by else "unknown",
        )
        self.moved = (to, state)
        await DBOS.set_event_async(c.outcome_key(ticket), {"moved_to": to, "state": state})

    def _check(self, answers: Any, by: Any, shown: Any) -> None:
        """The checks ``resume`` makes, and a question answered already in this run."""
        if not isinstance(answers, dict):
            raise ResumeInputError(f"answers must be a map of interrupt id to answer: {answers!r}")
        waiting = {q.id for q in self.agent.interrupts}
        for interrupt_id in answers:
            if interrupt_id in self.answered and interrupt_id not in waiting:
                who = self.answered[interrupt_id]
                raise AlreadyAnsweredError(
                    f"question {interrupt_id!r} was answered already"
                    + (f" (by {who})" if who else ""),
                    interrupt_id=interrupt_id,
                    by=who,
                )
        if not self.agent.is_paused:
            raise NotPausedError("the agent is not paused; there is nothing to answer")
        self.agent.check_resume(answers, by=by, shown=shown)


async def _now() -> float:
    return time.time()


@DBOS.workflow(name=c.WORKFLOW, max_recovery_attempts=None)
async def agent_workflow(request: dict[str, Any]) -> dict[str, JsonValue]:
    """Run agent ``request["agent"]`` of the worker's App on ``request["prompt"]`` (or carry
    on ``request["state"]``, an ``export_state()``), pausing for answers as long as needed."""
    workflow_id = DBOS.workflow_id
    assert workflow_id is not None
    return await _Run(request, workflow_id).run(request.get("prompt"))
