"""The agent's executor in workflow code: each model call and each tool body is an activity.

It speaks the loop's typed seam (``ModelCall``, ``ToolRequest`` -> ``ToolOutcome``): what a tool
activity brings back besides its result (the answers it used, a ``StateDelta`` of
``agent.state``), what a lost activity means (``Lost``: a tool that is not idempotent is in
doubt, and the loop asks a person as after a crash in the embedded engine), and how a cancelled
workflow ends its activities.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError
from temporalio.exceptions import TimeoutError as ActivityTimeoutError

from .._agent import (
    Lost,
    ModelCall,
    Raised,
    StateDelta,
    ToolOutcome,
    ToolRequest,
    outcome_from_json,
)
from .._exceptions import exception_from_dict
from .._messages import JsonValue, block_to_dict
from .._stream import ModelResponse
from ..errors import ModelError
from ._activities import MODEL_ACTIVITY, TOOL_ACTIVITY, answers_to_dict
from ._limits import Limits, json_size, too_large
from ._registry import DEFAULT_RETRY, ActivityOptions, Registration

__all__ = ["ActivityExecutor", "activity_failure", "execute"]


class ActivityExecutor:
    """Model calls and tool bodies as activities; everything else (hooks, answers, state)
    stays in the workflow."""

    def __init__(
        self,
        agent_name: str,
        registration: Registration,
        limits: Limits | None = None,
        node: str | None = None,
    ) -> None:
        self.agent_name = agent_name
        self.node = node
        """The node of graph ``agent_name`` whose agent this executor serves (None: the agent
        ``agent_name`` itself); the activities rebuild that node's agent."""
        self.registration = registration
        self.limits = limits or Limits()
        self.model_calls = 0
        """Model activities scheduled by this run (not counting earlier runs of the chain)."""

    async def call_model(self, call: ModelCall) -> ModelResponse:
        request: dict[str, JsonValue] = {
            "agent": self.agent_name,
            "messages": [m.to_dict() for m in call.messages],
            "system_prompt": call.system_prompt,
            "state": dict(call.state),
            "now": call.now,
            "max_result_bytes": self.limits.max_request_bytes,
        }
        if self.node is not None:
            request["node"] = self.node
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
        options = self.registration.model
        local = options.runs_locally(True, self.registration.local_activities)
        try:
            out = await execute(MODEL_ACTIVITY, request, options, local=local)
        except ActivityError as exc:  # retries exhausted: after-model hooks see a ModelError
            raise activity_failure(exc, "the model call") from None
        if "error" in out:
            raise exception_from_dict(out["error"], "model error")
        return ModelResponse.from_dict(out["response"], "model response")

    async def run_tool(self, request: ToolRequest) -> ToolOutcome:
        tool = request.tool
        sent = dict(request.state)
        limit = self.limits.max_request_bytes
        payload: dict[str, JsonValue] = {
            "agent": self.agent_name,
            "tool": tool.name,
            "tool_use": block_to_dict(request.tool_use),
            "answers": answers_to_dict(request.answers),
            "state": sent,
            "now": request.now,
            "max_result_bytes": limit,
        }
        if self.node is not None:
            payload["node"] = self.node
        if request.checkpoint is not None:  # what the body kept when it last stopped
            payload["checkpoint"] = request.checkpoint
        size = json_size(payload)
        if size > limit:  # the tool's error result says so (the model sees it)
            return Raised(
                exception=too_large(
                    f"the request of tool {tool.name!r}",
                    size,
                    limit,
                    "Limits.max_request_bytes",
                    "send a smaller tool input, smaller answers or a smaller agent state",
                )
            )
        options = self.registration.tool_options(tool.name)
        if request.at_most_once and options.retry_policy is DEFAULT_RETRY:
            options = dataclasses.replace(
                options, retry_policy=dataclasses.replace(DEFAULT_RETRY, maximum_attempts=1)
            )
        local = options.runs_locally(not request.at_most_once, self.registration.local_activities)
        try:
            out = await execute(TOOL_ACTIVITY, payload, options, wait_for_cancel=True, local=local)
        except ActivityError as exc:
            if request.at_most_once and isinstance(exc.cause, ActivityTimeoutError):
                # The body may have run, or not: a person decides (as after a crash).
                return Lost(reason=f"tool {tool.name!r} was lost in its activity: {exc.cause}")
            failure = activity_failure(exc, f"tool {tool.name!r}")
            if isinstance(failure, Exception):
                return Raised(exception=failure)
            raise failure from None
        return _outcome(out, sent)


def _outcome(out: Mapping[str, Any], sent: Mapping[str, JsonValue]) -> ToolOutcome:
    """What the tool activity reported, as the loop's outcome (its state change: the state it
    sent back against the state it was ``sent``)."""
    changed = out.get("state")
    delta = StateDelta.between(sent, changed) if isinstance(changed, dict) else None
    return outcome_from_json(out, delta)


LOCAL_PATCH = "interlude.local-activities"
"""The patch marking runs that may use local activities: a history recorded before them (no
such marker) replays with regular activities, as it ran."""


async def execute(
    name: str,
    request: Mapping[str, Any],
    options: ActivityOptions,
    wait_for_cancel: bool = False,
    local: bool = False,
) -> Any:
    """Run activity ``name``. ``wait_for_cancel``: a cancelled workflow waits until the
    activity has stopped (its worker heard of the cancel at its next heartbeat; a local one
    at once). ``local``: as a local activity (in this worker, within the workflow task; its
    result is recorded as a marker), retried in the worker per ``options.retry_policy``."""
    cancellation = (
        workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
        if wait_for_cancel
        else workflow.ActivityCancellationType.TRY_CANCEL
    )
    if local and workflow.patched(LOCAL_PATCH):
        return await workflow.execute_local_activity(
            name,
            request,
            start_to_close_timeout=options.start_to_close_timeout,
            retry_policy=options.retry_policy,
            cancellation_type=cancellation,
        )
    return await workflow.execute_activity(
        name,
        request,
        task_queue=options.task_queue,
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
