"""The agent's executor in workflow code: each model call and each tool body is an activity.

What a tool activity brings back besides its result (changes to ``agent.state``), what a lost
activity means (a tool that is not idempotent is in doubt: a person decides, as after a crash
in the embedded engine), and how a cancelled workflow ends its activities.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError
from temporalio.exceptions import TimeoutError as ActivityTimeoutError

from .._agent._codec import _decode_response
from .._exceptions import exception_from_dict
from .._interrupt import Interrupt
from .._messages import JsonValue, block_to_dict, tool_result_from_dict
from .._tools._context import RelaySignal
from ..errors import InterruptSignal, ModelError
from ._activities import MODEL_ACTIVITY, TOOL_ACTIVITY, answers_to_dict
from ._limits import Limits, json_size, too_large
from ._registry import DEFAULT_RETRY, ActivityOptions, Registration

if TYPE_CHECKING:
    from .._agent._agent import Agent
    from .._agent._loop import Run
    from .._agent._state import ToolCall
    from .._messages import ToolResult, ToolUse
    from .._stream import ModelResponse
    from .._tools._context import ToolContext
    from .._tools._spec import AgentTool

__all__ = ["ActivityExecutor", "activity_failure", "at_most_once", "execute", "merge_state"]


class ActivityExecutor:
    """Model calls and tool bodies as activities; everything else (hooks, answers, state)
    stays in the workflow."""

    def __init__(
        self, agent_name: str, registration: Registration, limits: Limits | None = None
    ) -> None:
        self.agent_name = agent_name
        self.registration = registration
        self.limits = limits or Limits()
        self.model_calls = 0
        """Model activities scheduled by this run (not counting earlier runs of the chain)."""
        self.in_doubt: list[ToolCall] = []
        """Calls whose single attempt was lost, asked about: see :meth:`settle`."""

    async def call_model(self, run: Run) -> ModelResponse:
        agent = run.agent
        request: dict[str, JsonValue] = {
            "agent": self.agent_name,
            "messages": [m.to_dict() for m in run._model_view()],
            "system_prompt": agent.system_prompt,
            "state": dict(agent.state),
            "now": agent.clock(),
            "max_result_bytes": self.limits.max_request_bytes,
        }
        size, limit = json_size(request), self.limits.max_request_bytes
        if size > limit:
            raise too_large(
                "the model call's request",
                size,
                limit,
                "Limits.max_request_bytes",
                "shorten the conversation or the agent state",
            )
        self.model_calls += 1
        try:
            out = await execute(MODEL_ACTIVITY, request, self.registration.model)
        except ActivityError as exc:  # retries exhausted: after-model hooks see a ModelError
            raise activity_failure(exc, "the model call") from None
        if "error" in out:
            raise exception_from_dict(out["error"], "model error")
        return _decode_response(out["response"], "model response")

    async def run_tool(
        self, run: Run, call: ToolCall, tool: AgentTool, tool_use: ToolUse, context: ToolContext
    ) -> ToolResult:
        agent = run.agent
        sent = dict(agent.state)
        limit = self.limits.max_request_bytes
        request: dict[str, JsonValue] = {
            "agent": self.agent_name,
            "tool": tool.name,
            "tool_use": block_to_dict(tool_use),
            "answers": answers_to_dict(context._answers),
            "state": sent,
            "now": agent.clock(),
            "max_result_bytes": limit,
        }
        if context._checkpoint is not None:  # what the body kept when it last stopped
            request["checkpoint"] = context._checkpoint
        size = json_size(request)
        if size > limit:  # the tool's error result says so (the model sees it)
            raise too_large(
                f"the request of tool {tool.name!r}",
                size,
                limit,
                "Limits.max_request_bytes",
                "send a smaller tool input, smaller answers or a smaller agent state",
            )
        options = self.registration.tool_options(tool.name)
        once = at_most_once(tool, agent)
        if once and options.retry_policy is DEFAULT_RETRY:
            options = dataclasses.replace(
                options, retry_policy=dataclasses.replace(DEFAULT_RETRY, maximum_attempts=1)
            )
        try:
            out = await execute(TOOL_ACTIVITY, request, options, wait_for_cancel=True)
        except ActivityError as exc:
            if once and isinstance(exc.cause, ActivityTimeoutError):
                # The body may have run, or not: a person decides (as after a crash).
                raise InterruptSignal(self._ask(run, call, exc)) from None
            raise activity_failure(exc, f"tool {tool.name!r}") from None
        changed = out.get("state")
        if isinstance(changed, dict):
            merge_state(agent.state, sent, changed)
        used = out.get("used")
        if isinstance(used, list):
            context._answers.forget([str(i) for i in used])
        checkpoint = out.get("checkpoint")
        if isinstance(checkpoint, str):
            context._checkpoint = checkpoint
        if "interrupts" in out:
            raise RelaySignal([Interrupt.from_dict(q) for q in out["interrupts"]])
        if "interrupt" in out:
            raise InterruptSignal(Interrupt.from_dict(out["interrupt"]))
        if "error" in out:  # the tool raised: the loop makes its error result, as embedded
            raise exception_from_dict(out["error"], "tool error")
        return tool_result_from_dict(out["result"], "tool result")

    def _ask(self, run: Run, call: ToolCall, exc: ActivityError) -> Interrupt:
        """The in-doubt question for ``call``, exactly as the embedded engine asks it."""
        from .._agent._batch import _settle_in_doubt

        question = _settle_in_doubt(run, call)
        if question is None:  # not reached: only tools a person decides on get here
            raise RuntimeError(f"tool {call.tool_name!r} failed in its activity: {exc.cause}")
        self.in_doubt.append(call)
        return question

    def settle(self, agent: Agent) -> None:
        """After a run stops: a call asked about because its activity was lost stands where
        the embedded engine leaves a call in doubt (its body started, no result kept), so the
        answer means the same: ``"rerun"``, ``"fail"`` or ``{"result": ...}``."""
        if agent.is_paused:
            asked = {
                i.tool_use.id for i in agent.interrupts if i.source == "in_doubt" and i.tool_use
            }
            for call in self.in_doubt:
                if call.phase == "body" and call.active_use and call.active_use.id in asked:
                    call.phase = "running"
        self.in_doubt.clear()


def at_most_once(tool: AgentTool, agent: Agent) -> bool:
    """Whether ``tool`` runs at most once: it is not idempotent and the agent asks a person
    about calls in doubt (``Agent(in_doubt="ask")``, the default)."""
    return not getattr(tool, "idempotent", False) and agent.in_doubt == "ask"


def merge_state(
    state: dict[str, JsonValue], sent: Mapping[str, JsonValue], now: Mapping[str, Any]
) -> None:
    """Apply to ``state`` what a tool body changed (``sent`` -> ``now``): keys it set or
    changed, and keys it removed. Changes made meanwhile by other calls stay."""
    for key, value in now.items():
        if key not in sent or sent[key] != value:
            state[key] = value
    for key in sent:
        if key not in now:
            state.pop(key, None)


async def execute(
    name: str, request: Mapping[str, Any], options: ActivityOptions, wait_for_cancel: bool = False
) -> Any:
    """Run activity ``name``. ``wait_for_cancel``: a cancelled workflow waits until the
    activity has stopped (its worker heard of the cancel at its next heartbeat)."""
    cancellation = (
        workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
        if wait_for_cancel
        else workflow.ActivityCancellationType.TRY_CANCEL
    )
    return await workflow.execute_activity(
        name,
        request,
        start_to_close_timeout=options.start_to_close_timeout,
        heartbeat_timeout=options.heartbeat_timeout,
        retry_policy=options.retry_policy,
        cancellation_type=cancellation,
    )


def activity_failure(exc: ActivityError, what: str) -> BaseException:
    """What a failed activity raises in the workflow: a cancelled one (the workflow is being
    cancelled) asyncio's CancelledError, so the run ends as cancelled; else the error it
    carries, or one naming ``what``."""
    cause = exc.cause
    if isinstance(cause, CancelledError):
        return asyncio.CancelledError(f"{what} was cancelled")
    if isinstance(cause, ApplicationError) and cause.details:
        rebuilt = exception_from_dict(cause.details[0], "activity failure")
        if isinstance(rebuilt, Exception):
            return rebuilt
    text = f"{what} failed in its activity: {cause or exc}"
    return ModelError(text) if what == "the model call" else RuntimeError(text)
