"""The workflow: an agent's loop in workflow code, its model calls and tool bodies activities,
its pauses durable waits for answers delivered by an Update."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey, SearchAttributeUpdate
from temporalio.exceptions import ActivityError, ApplicationError

from .._agent._agent import Agent
from .._agent._answering import resume_plan
from .._agent._codec import _decode_response
from .._exceptions import exception_from_dict
from .._interrupt import Interrupt
from .._messages import JsonValue, block_to_dict, tool_result_from_dict
from .._result import AgentResult
from ..errors import InterludeError, InterruptSignal, ModelError, ResumeError, ResumeInputError
from ._activities import MODEL_ACTIVITY, TOOL_ACTIVITY, answers_to_dict
from ._registry import ActivityOptions, Registration, build_agent, lookup

if TYPE_CHECKING:
    from .._agent._loop import Run
    from .._agent._state import ToolCall
    from .._messages import ToolResult, ToolUse
    from .._stream import ModelResponse
    from .._tools._context import ToolContext
    from .._tools._spec import AgentTool

__all__ = [
    "AGENT",
    "DEADLINE",
    "NAMES",
    "PENDING",
    "SEARCH_ATTRIBUTES",
    "WORKFLOW",
    "AgentWorkflow",
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


class ActivityExecutor:
    """The agent's executor in workflow code: each model call and each tool body is an
    activity; everything else (hooks, answers, state) stays in the workflow."""

    def __init__(self, agent_name: str, registration: Registration) -> None:
        self.agent_name = agent_name
        self.registration = registration

    async def call_model(self, run: Run) -> ModelResponse:
        agent = run.agent
        request: dict[str, JsonValue] = {
            "agent": self.agent_name,
            "messages": [m.to_dict() for m in run._model_view()],
            "system_prompt": agent.system_prompt,
            "state": dict(agent.state),
            "now": agent.clock(),
        }
        try:
            out = await _execute(MODEL_ACTIVITY, request, self.registration.model)
        except ActivityError as exc:  # retries exhausted: after-model hooks see a ModelError
            raise _activity_failure(exc, "the model call") from None
        if "error" in out:
            raise exception_from_dict(out["error"], "model error")
        return _decode_response(out["response"], "model response")

    async def run_tool(
        self, run: Run, call: ToolCall, tool: AgentTool, tool_use: ToolUse, context: ToolContext
    ) -> ToolResult:
        request: dict[str, JsonValue] = {
            "agent": self.agent_name,
            "tool": tool.name,
            "tool_use": block_to_dict(tool_use),
            "answers": answers_to_dict(context._answers),
            "state": dict(run.agent.state),
            "now": run.agent.clock(),
        }
        try:
            out = await _execute(TOOL_ACTIVITY, request, self.registration.tool_options(tool.name))
        except ActivityError as exc:  # lost workers / timeouts beyond the retry policy
            raise _activity_failure(exc, f"tool {tool.name!r}") from None
        if "interrupt" in out:
            raise InterruptSignal(Interrupt.from_dict(out["interrupt"]))
        if "error" in out:  # the tool raised: the loop makes its error result, as embedded
            raise exception_from_dict(out["error"], "tool error")
        return tool_result_from_dict(out["result"], "tool result")


async def _execute(name: str, request: Mapping[str, Any], options: ActivityOptions) -> Any:
    return await workflow.execute_activity(
        name,
        request,
        start_to_close_timeout=options.start_to_close_timeout,
        heartbeat_timeout=options.heartbeat_timeout,
        retry_policy=options.retry_policy,
    )


def _activity_failure(exc: ActivityError, what: str) -> Exception:
    cause = exc.cause
    if isinstance(cause, ApplicationError) and cause.details:
        rebuilt = exception_from_dict(cause.details[0], "activity failure")
        if isinstance(rebuilt, Exception):
            return rebuilt
    text = f"{what} failed in its activity: {cause or exc}"
    return ModelError(text) if what == "the model call" else RuntimeError(text)


def summary(result: AgentResult | None, agent: Agent) -> dict[str, JsonValue]:
    """How the run went on: its stop reason, its text, and the questions now pending."""
    return {
        "stop_reason": None if result is None else result.stop_reason,
        "text": None if result is None else str(result),
        "interrupts": [i.to_dict() for i in agent.interrupts],
    }


@workflow.defn(name=WORKFLOW)
class AgentWorkflow:
    """Runs agent ``request["agent"]`` of the worker's App on ``request["prompt"]`` (or carries
    on ``request["state"]``, an ``export_state()``), pausing for answers as long as needed."""

    def __init__(self) -> None:
        self._agent: Agent | None = None
        self._inbox: list[tuple[int, Mapping[str, JsonValue], str | None, Any]] = []
        self._tickets = 0
        self._applying: int | None = None
        self._outcomes: dict[int, dict[str, JsonValue] | ApplicationError] = {}

    @workflow.run
    async def run(self, request: dict[str, Any]) -> dict[str, JsonValue]:
        name = request["agent"]
        info = workflow.info()
        # The factory builds its agent on a session store holding nothing (a blocking load,
        # made on a helper thread: outside the sandbox's checks; its result is always "none").
        with workflow.unsafe.sandbox_unrestricted():
            agent = build_agent(lookup(info.task_queue).app, name, info.workflow_id)
        agent.clock = lambda: workflow.now().timestamp()  # the loop's time is workflow time
        agent._executor = ActivityExecutor(name, lookup(info.task_queue))
        if request.get("state") is not None:
            agent.import_state(request["state"])
        self._agent = agent
        result: AgentResult | None = None
        try:
            if request.get("prompt") is not None:
                result = await agent.invoke_async(request["prompt"])
            while agent.is_paused:
                self._mark_paused(agent, name)
                result = await self._next(agent)
        except InterludeError as exc:  # the run failed: the workflow fails (not retried)
            raise ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True) from exc
        workflow.upsert_search_attributes(
            [PENDING.value_set(False), NAMES.value_unset(), DEADLINE.value_unset()]
        )
        await workflow.wait_condition(workflow.all_handlers_finished)
        out = summary(result, agent)
        out["state"] = agent.export_state()
        return out

    async def _next(self, agent: Agent) -> AgentResult | None:
        """Wait for answers (or the earliest deadline) and carry the run on with them."""
        deadlines = [i.expires_at for i in agent.interrupts if i.expires_at is not None]
        timeout = None
        if deadlines:
            timeout = max(0.001, min(deadlines) - workflow.now().timestamp())
        try:
            await workflow.wait_condition(lambda: bool(self._inbox), timeout=timeout)
        except TimeoutError:  # the deadline applies its default (the timer is in the history)
            try:
                return await agent.resume_expired_async()
            except ResumeInputError:  # none expired yet (an answer came first): wait again
                return None
        ticket, answers, by, shown = self._inbox.pop(0)
        self._applying = ticket
        try:
            result = await agent.resume_async(answers, by=by, shown=shown)
        except ResumeError as exc:  # e.g. a deadline passed between validation and now
            self._outcomes[ticket] = ApplicationError(str(exc), type=type(exc).__name__)
            return None
        finally:
            self._applying = None
        self._outcomes[ticket] = summary(result, agent)
        return result

    def _mark_paused(self, agent: Agent, name: str) -> None:
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

    @workflow.update(name="answer")
    async def answer(
        self,
        answers: dict[str, JsonValue],
        by: str | None = None,
        shown: dict[str, str] | None = None,
    ) -> dict[str, JsonValue]:
        """Apply ``answers`` ({interrupt id: answer}) as ``by``; returns how the run went on:
        ``{"stop_reason", "text", "interrupts"}`` once it pauses again or ends."""
        self._tickets += 1
        ticket = self._tickets
        self._inbox.append((ticket, answers, by, shown))
        await workflow.wait_condition(lambda: ticket in self._outcomes)
        outcome = self._outcomes.pop(ticket)
        if isinstance(outcome, ApplicationError):
            raise outcome
        return outcome

    @answer.validator
    def _check_answer(
        self,
        answers: dict[str, JsonValue],
        by: str | None = None,
        shown: dict[str, str] | None = None,
    ) -> None:
        """Exactly the checks ``resume`` applies; a refused Update changes nothing."""
        try:
            agent = self._agent
            if agent is None or not agent.is_paused or agent._running:
                raise _not_paused()
            if self._inbox or self._applying is not None:
                raise _not_paused(" (answers are being applied)")
            resume_plan(agent, answers, by, shown)  # resume's own checks; the plan is unused
        except ResumeError as exc:
            raise ApplicationError(
                str(exc), *_error_details(exc), type=type(exc).__name__
            ) from None

    @workflow.query(name="pending")
    def pending(self) -> list[dict[str, JsonValue]]:
        """The questions the run waits on (``Interrupt.to_dict()``); empty while it runs."""
        agent = self._agent
        if agent is None or agent._running:
            return []
        return [i.to_dict() for i in agent.interrupts]


def _not_paused(more: str = "") -> ResumeError:
    from ..errors import NotPausedError

    return NotPausedError("the agent is not paused; there is nothing to answer" + more)


def _error_details(exc: ResumeError) -> list[JsonValue]:
    """What the client needs to raise the same error: the question, or the field."""
    from ..errors import AnswerValidationError, InterruptExpiredError

    if isinstance(exc, AnswerValidationError):
        return [{"interrupt_id": exc.interrupt_id, "path": list(exc.path)}]
    if isinstance(exc, InterruptExpiredError) and exc.interrupt is not None:
        return [{"interrupt": exc.interrupt.to_dict()}]
    return []
