"""The workflow: an agent's loop in workflow code, its model calls and tool bodies activities,
its pauses durable waits for answers delivered by an Update."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeAlias

from temporalio import workflow
from temporalio.common import SearchAttributeKey, SearchAttributeUpdate
from temporalio.exceptions import ApplicationError, TemporalError, is_cancelled_exception

from .._agent import Agent, resume_plan
from .._messages import JsonValue
from .._result import AgentResult
from ..errors import (
    AgentBusyError,
    InterludeError,
    ResumeError,
    ResumeInputError,
    UndoError,
    UnknownCheckpointError,
)
from ._executor import ActivityExecutor
from ._limits import Limits, PayloadLimitError, json_size, too_large
from ._notify import RunNotices
from ._registry import Registration, build_agent, build_graph, lookup
from ._undo import Answer, MoveOut, Recover, Request, Requests, Undo, refused, stands

if TYPE_CHECKING:
    from ..multiagent import Graph, MultiAgentResult, Orchestration, Swarm

Run: TypeAlias = "Agent | Graph | Swarm"
"""What a workflow runs: an agent, or a graph or swarm of agents (one workflow for it all)."""

__all__ = [
    "AGENT",
    "DEADLINE",
    "MEMO_PENDING",
    "NAMES",
    "PENDING",
    "SEARCH_ATTRIBUTES",
    "WORKFLOW",
    "AgentWorkflow",
    "Limits",
    "PayloadLimitError",
    "json_size",
]

WORKFLOW = "interlude.agent"
PENDING = SearchAttributeKey.for_bool("InterludePending")
AGENT = SearchAttributeKey.for_keyword("InterludeAgent")
NAMES = SearchAttributeKey.for_keyword_list("InterludeInterruptNames")
DEADLINE = SearchAttributeKey.for_datetime("InterludeDeadline")
SEARCH_ATTRIBUTES = {
    PENDING.name: "Bool",
    AGENT.name: "Keyword",
    NAMES.name: "KeywordList",
    DEADLINE.name: "Datetime",
}
"""The search attributes the workflow sets (name: type), to register on the namespace."""
MEMO_PENDING = "interlude_pending"
"""The memo key holding the questions of a paused run (``Interrupt.to_dict()`` each), so a
client reads them with the workflow's description, without a query to a worker."""
MEMO_LIMIT = 64 * 1024
"""Questions larger than this (as JSON) are not put in the memo: the ``pending`` query has them."""


def summary(result: AgentResult | MultiAgentResult | None, agent: Run) -> dict[str, JsonValue]:
    """How the run went on: its stop reason, its text, and the questions now pending."""
    return {
        "stop_reason": None if result is None else result.stop_reason,
        "text": None if result is None else str(result),
        "interrupts": [i.to_dict() for i in agent.interrupts],
    }


@workflow.defn(name=WORKFLOW)
class AgentWorkflow(Requests):
    """Runs agent ``request["agent"]`` of the worker's App on ``request["prompt"]`` (or carries
    on ``request["state"]``, an ``export_state()``), pausing for answers as long as needed.

    A name the App registers with ``@app.graph`` runs that graph (or swarm) here, in this one
    workflow:
    the graph's engine (edges, node hooks, answers routed to nodes) in workflow code, each node
    agent's model calls and tool bodies as activities of that node (see
    :func:`configure_graph`); its questions are the graph's, answered by the same Update.

    An agent's run is taken back to a checkpoint by the Update ``undo`` (see
    :class:`~interlude.temporal._undo.Requests`); when that leaves it stopped at the
    checkpoint, the workflow waits for the Update ``recover`` to carry it on."""

    @workflow.init
    def __init__(self, request: dict[str, Any]) -> None:
        self._agent: Run | None = None
        self._inbox: list[tuple[int, Request]] = []
        self._tickets = 0
        self._applying: int | None = None
        self._outcomes: dict[int, dict[str, JsonValue] | ApplicationError] = {}
        self._failure: ApplicationError | None = None
        """The run's error, once it failed: waiting Updates raise it too."""
        self._ended = False
        """Whether the run loop is over (the workflow is completing)."""
        self._limits = Limits.from_dict(request.get("limits"))
        self._import_error: Exception | None = None
        self._warned = False
        """Whether this run warned that its state is too large to continue as new."""
        self._memo = False
        """Whether this run put questions in its memo (cleared when it ends)."""
        # The agent is built here, before any handler runs: an answer that reaches a run
        # continued as new in its first task is checked against the imported pause.
        name = request["agent"]
        info = workflow.info()
        self._notices = RunNotices(info.task_queue, info.workflow_id, name)
        try:
            # The factory builds its agent on a session store holding nothing (a blocking
            # load, made on a helper thread: outside the sandbox's checks; its result is
            # always "none").
            registration = lookup(info.task_queue)
            with workflow.unsafe.sandbox_unrestricted():
                agent: Run
                if name in registration.app.graph_names:
                    agent = build_graph(registration.app, name, info.workflow_id)
                else:
                    agent = build_agent(registration.app, name, info.workflow_id)
        except TemporalError:
            raise
        except Exception as exc:  # e.g. UnknownAgentError: the run fails (in run), no hang
            self._import_error = exc
            return
        self._executor = ActivityExecutor(name, registration, self._limits)
        if isinstance(agent, Agent):
            agent.clock = lambda: workflow.now().timestamp()  # the loop's time: workflow time
            agent.executor = self._executor
        if request.get("state") is not None:
            try:
                agent.import_state(request["state"])
            except InterludeError as exc:  # the run fails (in run), the workflow does not hang
                self._import_error = exc
        self._node_executors: list[ActivityExecutor] = []
        if not isinstance(agent, Agent):  # after an import: it makes the node agents anew
            self._node_executors = configure_graph(agent, name, registration, self._limits)
        self._agent = agent

    @workflow.run
    async def run(self, request: dict[str, Any]) -> dict[str, JsonValue]:
        name = request["agent"]
        result: AgentResult | MultiAgentResult | None = None
        try:
            if self._import_error is not None:
                raise self._import_error
            agent = self._agent
            assert agent is not None
            if request.get("prompt") is not None:
                result = await agent.invoke_async(request["prompt"])
            while agent.is_paused or _stopped(agent):
                if agent.is_paused:
                    self._mark_paused(agent, name)
                else:  # stopped by an undo: it waits for the recover Update, not on questions
                    self._clear_pending()
                await self._notices.send_due(agent.interrupts, workflow.now().timestamp())
                if (
                    not self._inbox
                    and self._should_continue_as_new(agent)
                    and self._carried(agent, name) is not None
                ):
                    # Let every Update finish; one accepted meanwhile is applied here instead.
                    await workflow.wait_condition(
                        lambda: workflow.all_handlers_finished() or bool(self._inbox)
                    )
                    carried = self._carried(agent, name)
                    if not self._inbox and carried is not None:
                        workflow.continue_as_new(carried)
                result = await self._next(agent)
        except asyncio.CancelledError:  # the workflow is cancelled: it ends so, nothing pending
            await self._cancelled()
            raise
        except ApplicationError as exc:  # e.g. from a hook activity: the workflow fails
            await self._fail(exc)
            raise
        except TemporalError as exc:  # nondeterminism (the task retries), cancellation
            if is_cancelled_exception(exc):
                await self._cancelled()
            raise
        except Exception as exc:  # the run failed: the workflow fails (not retried), as the
            # embedded run would raise; Updates waiting on it raise the same error
            failure = _as_failure(exc)
            await self._fail(failure)
            raise failure from exc
        self._ended = True
        self._clear_pending()
        await workflow.wait_condition(workflow.all_handlers_finished)
        out = summary(result, agent)
        out["state"] = agent.export_state()
        if self._moved is not None:  # the state it left with: a move cut short takes it again
            out.update(stop_reason="moved", moved_to=self._moved.to, state=self._moved_state)
        size, limit = json_size(out), self._limits.max_result_bytes
        if size > limit:
            out["state"] = None
            out["state_omitted"] = (
                f"the result with its state is {size} bytes of JSON, above the limit of {limit} "
                "bytes (Limits.max_result_bytes; Temporal refuses payloads above 2 MiB): the "
                "state (conversation, audit trail) is left out; the workflow's history holds "
                "its answers and activities"
            )
        return out

    async def _cancelled(self) -> None:
        """On the way out of a cancelled workflow: nothing is pending any more, and Updates
        still waiting raise that the workflow was cancelled."""
        cancelled = ApplicationError(
            "the workflow was cancelled", type="CancelledError", non_retryable=True
        )
        await self._fail(cancelled)

    def _carried(self, agent: Run, name: str) -> dict[str, JsonValue] | None:
        """The input to continue as new with, or None when it is larger than
        ``Limits.max_request_bytes`` (then the run stays in this run; a warning says so)."""
        carried: dict[str, JsonValue] = {
            "agent": name,
            "prompt": None,
            "state": agent.export_state(),
            "limits": self._limits.to_dict(),
        }
        size, limit = json_size(carried), self._limits.max_request_bytes
        if size <= limit:
            return carried
        if not self._warned:
            self._warned = True
            problem = too_large(
                "the input to continue as new (the exported state)",
                size,
                limit,
                "Limits.max_request_bytes",
                "the run does not continue as new; it waits in this run, its history growing",
            )
            workflow.logger.warning(str(problem))
        return None

    async def _fail(self, failure: ApplicationError) -> None:
        """Nothing is pending any more: hand the run's error to every Update still waiting,
        and let them finish."""
        self._clear_pending()
        self._failure = failure
        for ticket, _ in self._inbox:
            self._outcomes.setdefault(ticket, failure)
        self._inbox.clear()
        await workflow.wait_condition(workflow.all_handlers_finished)

    def _should_continue_as_new(self, agent: Run) -> bool:
        """Whether this paused run is long enough to continue as new (see :class:`Limits`).
        A run that has not called the model (e.g. one just continued as new) never does. A
        graph's model calls are its node agents'."""
        model_calls = self._model_calls()
        if model_calls == 0:
            return False
        limits, info = self._limits, workflow.info()
        if info.is_continue_as_new_suggested():
            return True
        calls = limits.continue_after_model_calls
        if calls is not None and model_calls >= calls:
            return True
        history = limits.continue_above_history_bytes
        if history is not None and info.get_current_history_size() > history:
            return True
        state = limits.continue_above_state_bytes
        return state is not None and json_size(agent.export_state()) > state

    def _model_calls(self) -> int:
        """Model activities this run scheduled (for a graph: its node agents')."""
        return self._executor.model_calls + sum(e.model_calls for e in self._node_executors)

    async def _next(self, agent: Run) -> AgentResult | MultiAgentResult | None:
        """Wait for answers (or the earliest deadline) and carry the run on with them."""
        asked = agent.interrupts
        deadlines = [i.expires_at for i in asked if i.expires_at is not None]
        notice = self._notices.next_moment(asked)  # an escalation or a warning owed
        moments = deadlines if notice is None else [*deadlines, notice]
        timeout = None
        if moments:
            timeout = max(0.001, min(moments) - workflow.now().timestamp())
        try:
            await workflow.wait_condition(lambda: bool(self._inbox), timeout=timeout)
        except TimeoutError:  # a deadline applies its default (the timer is in the history)
            now = workflow.now().timestamp()
            if notice is not None and notice <= now and not (deadlines and min(deadlines) <= now):
                await self._notices.send_due(asked, now)
                return None
            try:
                expired = await agent.resume_expired_async()
            except ResumeInputError:  # none expired yet (an answer came first): wait again
                return None
            await self._notices.send_closed(asked, agent, workflow.now().timestamp())
            return expired
        ticket, request = self._inbox.pop(0)
        if isinstance(request, MoveOut):  # checked by its validator: the run waits on people
            assert isinstance(agent, Agent)
            self._outcomes[ticket] = self._move(agent, request)
            return None
        self._applying = ticket
        try:
            result = await _apply(agent, request)
            await self._notices.send_closed(asked, agent, workflow.now().timestamp())
        except (ResumeError, UndoError, UnknownCheckpointError, AgentBusyError) as exc:
            # e.g. a deadline passed between validation and now: nothing was changed
            self._outcomes[ticket] = refused(exc)
            return None
        except TemporalError:
            raise
        except Exception as exc:  # the run fails: this Update raises the same error
            self._outcomes[ticket] = exc if isinstance(exc, ApplicationError) else _as_failure(exc)
            raise
        finally:
            self._applying = None
        outcome = summary(result, agent)
        if isinstance(request, Undo) and isinstance(agent, Agent):
            outcome["stands"] = stands(agent)
        self._outcomes[ticket] = outcome
        return result

    def _mark_paused(self, agent: Run, name: str) -> None:
        interrupts = agent.interrupts
        deadlines = [i.expires_at for i in interrupts if i.expires_at is not None]
        updates: list[SearchAttributeUpdate[Any]] = [
            PENDING.value_set(True),
            AGENT.value_set(name),
            NAMES.value_set(sorted({i.name for i in interrupts})),
        ]
        if deadlines:
            updates.append(DEADLINE.value_set(datetime.fromtimestamp(min(deadlines), UTC)))
        else:
            updates.append(DEADLINE.value_unset())
        workflow.upsert_search_attributes(updates)
        questions: list[JsonValue] = [i.to_dict() for i in interrupts]
        if json_size(questions) <= MEMO_LIMIT:
            workflow.upsert_memo({MEMO_PENDING: questions})
            self._memo = True
        elif self._memo:  # too large: clients ask the pending query instead
            workflow.upsert_memo({MEMO_PENDING: None})
            self._memo = False

    def _clear_pending(self) -> None:
        """The search attributes (and memo) of a run that waits on nothing (it ended, failed
        or was cancelled)."""
        workflow.upsert_search_attributes(
            [PENDING.value_set(False), NAMES.value_unset(), DEADLINE.value_unset()]
        )
        if self._memo:
            workflow.upsert_memo({MEMO_PENDING: None})
            self._memo = False

    @workflow.update(name="answer")
    async def answer(
        self,
        answers: dict[str, JsonValue],
        by: str | None = None,
        shown: dict[str, str] | None = None,
        partial: bool = False,
    ) -> dict[str, JsonValue]:
        """Apply ``answers`` ({interrupt id: answer}) as ``by``; returns how the run went on:
        ``{"stop_reason", "text", "interrupts"}`` once it pauses again or ends. ``partial``
        (a graph's only): the answered nodes' branches go on while other questions wait
        (``Graph.resume(partial=True)``)."""
        return await self._submit(Answer(answers, by, shown, partial))

    @answer.validator
    def _check_answer(
        self,
        answers: dict[str, JsonValue],
        by: str | None = None,
        shown: dict[str, str] | None = None,
        partial: bool = False,
    ) -> None:
        """Exactly the checks ``resume`` applies; a refused Update changes nothing."""
        try:
            agent = self._agent
            self._check_moved()
            if self._failure is not None:
                raise _not_paused(f" (the run failed: {self._failure.message})")
            if agent is None or not agent.is_paused or agent.is_running:
                raise _not_paused()
            if self._inbox or self._applying is not None:
                raise _not_paused(" (answers, or an undo, are being applied)")
            size, limit = json_size(answers), self._limits.max_answer_bytes
            if size > limit:
                raise ResumeInputError(
                    f"the answers are {size} bytes of JSON, above the limit of {limit} bytes "
                    "(Limits.max_answer_bytes): answer with less (e.g. a reference to the data)"
                )
            if not isinstance(partial, bool):
                raise ResumeInputError(f"partial must be true or false, got {partial!r}")
            if isinstance(agent, Agent):  # resume's own checks; the plan is unused
                if partial:
                    raise ResumeInputError("partial=True is for a graph's answers, not an agent's")
                resume_plan(agent, answers, by, shown)
            else:  # the graph's resume's checks, every node's answers at once
                agent.check_resume(answers, by=by, shown=shown)
        except ResumeError as exc:
            raise ApplicationError(
                str(exc), *_error_details(exc), type=type(exc).__name__
            ) from None

    @workflow.query(name="pending")
    def pending(self) -> list[dict[str, JsonValue]]:
        """The questions the run waits on (``Interrupt.to_dict()``); empty while it runs."""
        agent = self._agent
        if agent is None or agent.is_running:
            return []
        return [i.to_dict() for i in agent.interrupts]


def configure_graph(
    graph: Orchestration,
    name: str,
    registration: Registration,
    limits: Limits,
    path: tuple[str, ...] = (),
) -> list[ActivityExecutor]:
    """Make ``graph`` (built for this workflow) run in workflow code: its time and each node
    agent's is workflow time, and each node agent's model calls and tool bodies are
    activities of that node (the activity rebuilds graph ``name`` and takes the node's agent,
    by its path ``outer/inner`` in a graph or swarm that is a node: configured likewise). A
    node's finished calls are in the history as activity results: a replay, or another
    worker carrying the workflow on after one was lost, runs none of them again. Returns the
    node agents' executors."""
    from ..multiagent import AgentNode

    graph.clock = _workflow_time
    executors: list[ActivityExecutor] = []
    for node_name, node in graph.nodes.items():
        where = (*path, node_name)
        if not isinstance(node, AgentNode):  # a graph or swarm as a node: its own nodes
            executors += configure_graph(node.inner, name, registration, limits, where)
            continue
        executor = ActivityExecutor(name, registration, limits, node="/".join(where))
        node.agent.clock = _workflow_time
        node.agent.executor = executor
        executors.append(executor)
    return executors


async def _apply(agent: Run, request: Request) -> AgentResult | MultiAgentResult:
    """Carry the run on with ``request`` (checked by its Update's validator)."""
    if isinstance(request, Answer):
        answers, by, shown = request.answers, request.by, request.shown
        if isinstance(agent, Agent):
            return await agent.resume_async(answers, by=by, shown=shown)
        return await agent.resume_async(answers, by=by, shown=shown, partial=request.partial)
    assert isinstance(agent, Agent)  # the validators refuse an undo or a recover of a graph
    if isinstance(request, Recover):
        return await agent.recover_async()
    assert isinstance(request, Undo)  # a move out is applied by the run loop itself
    return await agent.undo_async(request.to, by=request.by, skip=request.skip)


def _stopped(agent: Run) -> bool:
    """Whether ``agent`` holds a stopped run (an undo left it at its checkpoint): the
    workflow waits for the recover Update to carry it on."""
    return isinstance(agent, Agent) and agent.needs_recovery and not agent.is_paused


def _workflow_time() -> float:
    return workflow.now().timestamp()


def _as_failure(exc: Exception) -> ApplicationError:
    """The run's error as the workflow's failure: not retried, named by its type."""
    message = str(exc) or type(exc).__name__
    return ApplicationError(message, type=type(exc).__name__, non_retryable=True)


def _not_paused(more: str = "") -> ResumeError:
    from ..errors import NotPausedError

    return NotPausedError("the agent is not paused; there is nothing to answer" + more)


def _error_details(exc: ResumeError) -> list[JsonValue]:
    """What the client needs to raise the same error: the question, or the field."""
    from ..errors import AnswerValidationError, InterruptExpiredError, SessionMovedError

    if isinstance(exc, SessionMovedError):
        return [{"target": exc.target}]
    if isinstance(exc, AnswerValidationError):
        return [{"interrupt_id": exc.interrupt_id, "path": list(exc.path)}]
    if isinstance(exc, InterruptExpiredError) and exc.interrupt is not None:
        return [{"interrupt": exc.interrupt.to_dict()}]
    return []
