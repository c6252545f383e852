"""What people ask of a running workflow besides answers: the ``undo`` Update (take the run
back to a checkpoint, the compensations of the calls since running as activities, newest
first) and the ``recover`` Update (carry on the run an undo left stopped at its checkpoint).

The workflow applies every request (an answer, an undo, a recover) one at a time from one
queue, in its run loop (``AgentWorkflow._next``): each Update's validator refuses what cannot
be applied now (a step in flight, a finished run, a checkpoint the record does not hold, a call
with no compensation...) with the error the embedded agent would raise, and a refused Update
changes nothing, not even the history. See docs/temporal.md, "Undo".
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from .._agent import Agent, UndoPlan
from .._messages import JsonValue
from ..errors import (
    AgentBusyError,
    ConfigurationError,
    InterludeError,
    NotPausedError,
    SessionMovedError,
    UndoError,
)

if TYPE_CHECKING:
    from ..multiagent import Graph, Swarm

__all__ = [
    "Answer",
    "MoveOut",
    "Recover",
    "Request",
    "Requests",
    "Undo",
    "parse_move",
    "parse_undo",
    "stands",
]


@dataclass(frozen=True, slots=True)
class Answer:
    """Answers to apply (the ``answer`` Update)."""

    answers: Mapping[str, JsonValue]
    by: str | None
    shown: Any
    partial: bool


@dataclass(frozen=True, slots=True)
class Undo:
    """An undo to carry out (the ``undo`` Update): ``agent.undo_async(to, by=, skip=)``."""

    to: str
    by: str | None
    skip: tuple[str, ...]
    dry_run: bool = False


@dataclass(frozen=True, slots=True)
class Recover:
    """Carry on the stopped run (the ``recover`` Update): ``agent.recover_async()``."""


@dataclass(frozen=True, slots=True)
class MoveOut:
    """Leave this engine (the ``move_out`` Update, ``interlude move``): the run's state goes
    to ``to``, from ``source`` (this place's name), moved by ``by``."""

    to: str
    source: str
    by: str


Request: TypeAlias = "Answer | Undo | Recover | MoveOut"
Outcome: TypeAlias = "dict[str, JsonValue] | ApplicationError"

_KEYS = ("to", "by", "skip", "dry_run")


def parse_undo(request: object) -> Undo:
    """The ``undo`` Update's argument ``{"to", "by", "skip", "dry_run"}`` as an :class:`Undo`;
    UndoError naming what is wrong."""
    if not isinstance(request, Mapping):
        raise UndoError(f'undo takes {{"to": CHECKPOINT, ...}}, got {request!r}')
    strays = sorted(str(k) for k in request if k not in _KEYS)
    if strays:
        raise UndoError(f"undo takes the keys {list(_KEYS)}, not {strays}")
    to, by = request.get("to"), request.get("by")
    skip, dry_run = request.get("skip") or [], request.get("dry_run", False)
    if not isinstance(to, str) or not to:
        raise UndoError(f"undo: to= names a checkpoint (e.g. 'm4'), got {to!r}")
    if by is not None and not isinstance(by, str):
        raise UndoError(f"undo: by= names who undoes, got {by!r}")
    if not isinstance(skip, list | tuple) or not all(isinstance(c, str) for c in skip):
        raise UndoError(f"undo: skip= is a list of call ids, got {skip!r}")
    if not isinstance(dry_run, bool):
        raise UndoError(f"undo: dry_run= is true or false, got {dry_run!r}")
    return Undo(to, by, tuple(skip), dry_run)


def parse_move(request: object) -> MoveOut:
    """The ``move_out`` Update's argument ``{"to", "from", "by"}`` as a :class:`MoveOut`."""
    if not isinstance(request, Mapping):
        raise ConfigurationError(f'move_out takes {{"to": PLACE, ...}}, got {request!r}')
    to, source, by = request.get("to"), request.get("from"), request.get("by")
    if not isinstance(to, str) or not to or not isinstance(source, str):
        raise ConfigurationError(f"move_out: to= and from= name places, got {to!r}, {source!r}")
    return MoveOut(to, source, by if isinstance(by, str) and by else "unknown")


def stands(agent: Agent) -> str:
    """Where the agent stands: ``"paused"`` (on questions), ``"stopped"`` (a run to carry on
    with the ``recover`` Update) or ``"idle"`` (its run ended)."""
    if agent.is_paused:
        return "paused"
    return "stopped" if agent.needs_recovery else "idle"


def planned(agent: Agent, undo: Undo) -> UndoPlan:
    """The plan of ``undo`` (nothing runs, nothing changes), or the error the undo would raise.

    Made by ``undo_async(dry_run=True)``, which completes without waiting on anything (the
    workflow's agent has no session to load): driven here at once, so a validator can call it."""
    coro = agent.undo_async(undo.to, by=undo.by, skip=undo.skip, dry_run=True)
    plan = _at_once(coro)
    assert isinstance(plan, UndoPlan)
    return plan


def _at_once(coro: Coroutine[Any, Any, Any]) -> Any:
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("the undo's plan waited on something: it cannot be made in a validator")


class Requests:
    """The Updates ``undo`` and ``recover`` of :class:`~interlude.temporal.AgentWorkflow`, and
    the queue every request waits in until the run loop has applied it."""

    _agent: Agent | Graph | Swarm | None
    _inbox: list[tuple[int, Request]]
    _tickets: int
    _applying: int | None
    _outcomes: dict[int, Outcome]
    _failure: ApplicationError | None
    _ended: bool
    _moved: MoveOut | None = None
    """Where the run went (``move_out``): the workflow is ending, answers are refused."""
    _moved_state: dict[str, JsonValue]

    async def _submit(self, request: Request) -> dict[str, JsonValue]:
        """Queue ``request`` for the run loop and wait for how the run went on with it."""
        self._tickets += 1
        ticket = self._tickets
        self._inbox.append((ticket, request))
        await workflow.wait_condition(lambda: ticket in self._outcomes or self._failure is not None)
        outcome = self._outcomes.pop(ticket, self._failure)
        assert outcome is not None
        if isinstance(outcome, ApplicationError):
            raise outcome
        return outcome

    @workflow.update(name="undo")
    async def undo(self, request: dict[str, Any]) -> dict[str, JsonValue]:
        """Take the run back to checkpoint ``request["to"]`` (``Agent.undo_async``): the
        compensations of the calls since run as activities, newest first. Returns the plan
        (``UndoPlan.to_dict()``) for ``"dry_run": true`` (nothing changes), else how the run
        stands: ``{"stop_reason", "text", "interrupts", "stands"}`` (``"undone"``, or
        ``"interrupt"`` when a compensation waits on a question: answer it as any)."""
        undo = parse_undo(request)
        agent = self._agent
        assert isinstance(agent, Agent)
        if undo.dry_run:
            return planned(agent, undo).to_dict()
        return await self._submit(undo)

    @undo.validator
    def _check_undo(self, request: dict[str, Any]) -> None:
        """The undo's own checks (its plan is made: an unknown checkpoint, a call with no
        compensation...), while the run waits on people; a refused Update changes nothing."""
        try:
            undo = parse_undo(request)
            agent = self._waiting("undo")
            if not isinstance(agent, Agent):
                raise UndoError(
                    f"this workflow runs {agent.kind} {agent.name!r}: the undo Update takes "
                    "back an agent's run"
                )
            if agent.needs_recovery and not agent.is_paused:
                raise UndoError(
                    "the run stands stopped at a checkpoint (an earlier undo): carry it on "
                    "with the recover Update first"
                )
            planned(agent, undo)
        except InterludeError as exc:
            raise refused(exc) from None

    @workflow.update(name="recover")
    async def recover(self) -> dict[str, JsonValue]:
        """Carry on the run an undo left stopped at its checkpoint (``Agent.recover_async``);
        returns ``{"stop_reason", "text", "interrupts"}`` once it pauses again or ends."""
        return await self._submit(Recover())

    @recover.validator
    def _check_recover(self) -> None:
        try:
            agent = self._waiting("recover")
            if not agent.needs_recovery or agent.is_paused:
                raise NotPausedError(
                    "the run holds no stopped run to recover"
                    + (" (it is paused: answer it)" if agent.is_paused else "")
                )
        except InterludeError as exc:
            raise refused(exc) from None

    @workflow.update(name="move_out")
    async def move_out(self, request: dict[str, Any]) -> dict[str, JsonValue]:
        """Leave this engine (``interlude move``): while the run waits on people with nothing
        in flight, its ``export_state()`` (a ``moved`` entry last in its trail, its pause) is
        returned and the workflow ends as moved, refusing answers with where it went."""
        return await self._submit(parse_move(request))

    @move_out.validator
    def _check_move_out(self, request: dict[str, Any]) -> None:
        try:
            parse_move(request)
            agent = self._waiting("move")
            if not isinstance(agent, Agent):
                raise ConfigurationError(
                    f"this workflow runs {agent.kind} {agent.name!r}: moving a graph's or "
                    "swarm's run is not built yet"
                )
        except InterludeError as exc:
            raise refused(exc) from None

    def _move(self, agent: Agent, move: MoveOut) -> dict[str, JsonValue]:
        """Apply ``move``: the agent closed as moved; its state (with the pause) returned."""
        from .._agent import mark_moved

        state = mark_moved(
            agent,
            session_id=workflow.info().workflow_id,
            source=move.source,
            target=move.to,
            by=move.by,
        )
        self._moved = move
        self._moved_state = state
        return {"moved_to": move.to, "state": state}

    def _check_moved(self) -> None:
        """SessionMovedError once the run has moved away."""
        if self._moved is not None:
            raise SessionMovedError(
                f"session {workflow.info().workflow_id!r} was moved to {self._moved.to}: "
                "answer it there; nothing was changed here",
                target=self._moved.to,
            )

    def _waiting(self, what: str) -> Agent | Graph | Swarm:
        """The run, when it waits on people (paused, or stopped after an undo) with nothing
        in flight; else the error saying why ``what`` cannot be applied now."""
        self._check_moved()
        agent = self._agent
        if self._failure is not None:
            raise UndoError(f"cannot {what}: the run failed ({self._failure.message})")
        if agent is None or self._ended:
            raise UndoError(f"cannot {what}: the run has ended (the workflow is completing)")
        if agent.is_running or self._inbox or self._applying is not None:
            raise AgentBusyError(
                f"cannot {what} while a step is in flight (the run is going, or a request is "
                "being applied): try again once it pauses"
            )
        if not agent.is_paused and not agent.needs_recovery:
            raise AgentBusyError(f"cannot {what} now: the run is not waiting on anyone")
        return agent


def refused(exc: InterludeError) -> ApplicationError:
    """A refused request as the Update's failure: the client raises the same error."""
    details: list[Any] = []
    if isinstance(exc, UndoError) and exc.calls:
        details.append({"calls": list(exc.calls)})
    if isinstance(exc, SessionMovedError):
        details.append({"target": exc.target})
    return ApplicationError(str(exc), *details, type=type(exc).__name__)
