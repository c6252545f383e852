"""The activities: a model call and a tool body, run on any worker by the agent built by name.

Both take and return plain JSON made by Interlude's own codecs. A tool's exception or a
model's non-retryable error comes back as data (the loop sees it as it would embedded); a
question a tool body asks comes back as the interrupt, raised again in the workflow.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from .._agent import LOCAL, Asked, ModelCall, Raised, Returned, ToolOutcome, ToolRequest
from .._exceptions import exception_to_dict
from .._interrupt import Answers, Interrupt
from .._messages import JsonValue, block_to_dict, messages_from_dicts, tool_use_from_dict
from .._tools import AgentTool, ToolContext
from ..errors import ModelError
from ._limits import MAX_REQUEST_BYTES, json_size, too_large
from ._registry import build_agent, build_node_agent, lookup

__all__ = ["MODEL_ACTIVITY", "TOOL_ACTIVITY", "model_activity", "tool_activity", "tool_named"]

MODEL_ACTIVITY = "interlude.model"
TOOL_ACTIVITY = "interlude.tool"


def _agent(name: str, node: str | None = None) -> Any:
    """The agent ``name`` of the worker's App, or (``node`` given) the agent of that node of
    graph ``name``."""
    info = activity.info()
    app, run_id = lookup(info.task_queue).app, info.workflow_id or "temporal"
    if node is not None:
        return build_node_agent(app, name, node, run_id)
    return build_agent(app, name, run_id)


def tool_named(agent: Any, name: str) -> AgentTool:
    """The tool ``name`` of ``agent``: one of its tools, or the compensation of one
    (``@tool(compensate=...)``: what an undo or a decline's rollback runs, e.g. ``car.undo``).
    KeyError naming the tools when there is none."""
    from .._tools import compensation_of

    tools: Mapping[str, AgentTool] = agent.tools
    found = tools.get(name)
    if found is not None:
        return found
    for tool in tools.values():
        comp = compensation_of(tool)
        if comp is not None and comp.name == name:
            return comp
    raise KeyError(f"agent {agent.name!r} has no tool {name!r} (its tools: {sorted(tools)!r})")


@activity.defn(name=MODEL_ACTIVITY)
async def model_activity(request: dict[str, Any]) -> dict[str, JsonValue]:
    """``{agent, messages, system_prompt, state, now, max_result_bytes}`` -> ``{"response"}``
    or ``{"error"}``.

    A retryable ModelError fails the attempt (Temporal retries it per the model options). A
    response larger than ``max_result_bytes`` (as JSON) comes back as the error
    PayloadLimitError naming both sizes (once: Temporal would refuse it)."""
    agent = _agent(request["agent"], request.get("node"))
    call = ModelCall(
        model=agent.model,
        messages=messages_from_dicts(request["messages"]),
        tools=[t.spec for t in agent.tools.values()],
        system_prompt=request.get("system_prompt"),
        options={},
        state=dict(request.get("state") or {}),
        now=float(request["now"]),
    )
    try:
        response = await LOCAL.call_model(call)
    except ModelError as exc:
        if exc.retryable:
            raise ApplicationError(
                str(exc), exception_to_dict(exc), type=type(exc).__name__
            ) from exc
        return {"error": exception_to_dict(exc)}
    except Exception as exc:
        return {"error": exception_to_dict(exc)}
    out: dict[str, JsonValue] = {"response": response.to_dict()}
    size, limit = json_size(out), int(request.get("max_result_bytes") or MAX_REQUEST_BYTES)
    if size > limit:
        error = too_large(
            "the model's response",
            size,
            limit,
            "Limits.max_request_bytes",
            "ask the model for a shorter reply",
        )
        return {"error": exception_to_dict(error)}
    return out


@activity.defn(name=TOOL_ACTIVITY)
async def tool_activity(request: dict[str, Any]) -> dict[str, JsonValue]:
    """``{agent, tool, tool_use, answers, state, now, max_result_bytes, checkpoint?}`` ->
    ``{"result"}``, ``{"error"}`` (the tool raised: its exception), ``{"interrupt"}`` (the
    body asked a question) or ``{"interrupts"}`` (it relayed several, e.g. a sub-agent's), with
    ``"checkpoint"`` (what a body that stopped kept for its re-run), ``"used"`` (the ids of the
    answers it took) and ``"state"`` (the agent state, when the body changed it).

    An outcome larger than ``max_result_bytes`` (as JSON) comes back as the error
    PayloadLimitError naming both sizes (once, not retried: Temporal would refuse it)."""
    agent = _agent(request["agent"], request.get("node"))
    now = float(request["now"])
    agent.clock = lambda: now
    sent = dict(request.get("state") or {})
    agent.state = dict(sent)
    tool_use = tool_use_from_dict(request["tool_use"], "tool_use")
    tool = tool_named(agent, request["tool"])
    answers = _answers_from_dict(request["answers"], now)
    checkpoint = request.get("checkpoint")
    beat = _heartbeat_while_running()
    try:
        outcome = await LOCAL.run_tool(
            ToolRequest(
                tool=tool,
                tool_use=tool_use,
                answer_id=tool_use.id,
                context=ToolContext(tool_use, agent, answers, checkpoint),
                answers=answers,
                checkpoint=checkpoint,
                state=agent.state,
                now=now,
                at_most_once=False,
            )
        )
    finally:
        beat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beat
    out = _as_json(outcome)
    delta = getattr(outcome, "state", None)  # what the body changed of its copy of agent.state
    if delta is not None:
        delta.apply(agent.state)
    used = sorted(set(getattr(outcome, "used", ())))
    if used:  # answers the body took (each is handed out once): gone in the workflow too
        out["used"] = list(used)
    if agent.state != sent:
        try:
            out["state"] = _json_state(agent.state)
        except (TypeError, ValueError) as exc:  # the loop could not keep it either
            problem = TypeError(f"tool {tool.name!r} left agent.state not JSON-compatible: {exc}")
            out = {"error": exception_to_dict(problem)}
    return _bounded(out, tool.name, int(request.get("max_result_bytes") or MAX_REQUEST_BYTES))


def _as_json(outcome: ToolOutcome) -> dict[str, JsonValue]:
    """The body's outcome as the activity's JSON result (the workflow reads it back)."""
    out: dict[str, JsonValue]
    match outcome:
        case Returned():
            out = {"result": block_to_dict(outcome.result)}
        case Raised():
            out = {"error": exception_to_dict(outcome.exception)}
        case Asked(relayed=True):  # several questions at once (e.g. a sub-agent's)
            out = {"interrupts": [q.to_dict() for q in outcome.interrupts]}
        case Asked():
            out = {"interrupt": outcome.interrupts[0].to_dict()}
        case _:  # a body run here is never lost
            raise AssertionError(f"unexpected outcome {outcome!r}")
    if isinstance(outcome, Asked) and outcome.checkpoint is not None:
        out["checkpoint"] = outcome.checkpoint  # what the body kept for its re-run
    return out


def _json_state(state: dict[str, Any]) -> JsonValue:
    """The state as plain JSON (what the workflow's agent could export)."""
    import json

    value: JsonValue = json.loads(json.dumps(state))
    return value


def _bounded(out: dict[str, JsonValue], name: str, limit: int) -> dict[str, JsonValue]:
    """``out``, or the error saying it is too large (with the state changes if they fit)."""
    size = json_size(out)
    if size <= limit:
        return out
    kind = next(k for k in ("result", "interrupt", "interrupts", "error") if k in out)
    what = {
        "result": "result",
        "interrupt": "question",
        "interrupts": "questions",
        "error": "exception",
    }[kind]
    error = too_large(
        f"the {what} of tool {name!r}",
        size,
        limit,
        "Limits.max_request_bytes",
        "return less (e.g. a reference to where the data is)",
    )
    bounded: dict[str, JsonValue] = {"error": exception_to_dict(error)}
    if "state" in out and json_size({**bounded, "state": out["state"]}) <= limit:
        bounded["state"] = out["state"]
    return bounded


def _heartbeat_while_running() -> asyncio.Task[None]:
    """Heartbeat for the body while it runs, so a lost worker is noticed (the SDK throttles
    heartbeats to a fraction of the heartbeat timeout). A local activity does not heartbeat:
    its worker is the workflow's, whose task times out when it is lost."""
    info = activity.info()
    timeout = None if info.is_local else info.heartbeat_timeout

    async def beat() -> None:
        if not timeout:
            return
        while True:
            activity.heartbeat()
            await asyncio.sleep(max(0.05, timeout.total_seconds() / 4))

    return asyncio.ensure_future(beat())


def answers_to_dict(answers: Answers) -> dict[str, JsonValue]:
    """What a tool body can be asked about: the answers of this invocation so far."""
    from .._messages import tool_use_to_dict

    return {
        "values": dict(answers.values),
        "shown": {k: tool_use_to_dict(v) for k, v in answers.shown.items()},
        "expired": sorted(answers.expired),
        "asked": {k: q.to_dict() for k, q in answers.asked.items()},
    }


def _answers_from_dict(data: dict[str, Any], now: float) -> Answers:
    return Answers(
        data["values"],
        {k: tool_use_from_dict(v, "shown") for k, v in data["shown"].items()},
        data["expired"],
        {k: Interrupt.from_dict(v) for k, v in data["asked"].items()},
        clock=lambda: now,
    )
