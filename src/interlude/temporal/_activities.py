"""The activities: a model call and a tool body, run on any worker by the agent built by name.

Both take and return plain JSON made by Interlude's own codecs. A tool's exception or a
model's non-retryable error comes back as data (the loop sees it as it would embedded); a
question a tool body asks comes back as the interrupt, raised again in the workflow.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from .._agent._executor import LOCAL
from .._agent._loop import Run
from .._agent._state import Progress, ToolCall
from .._exceptions import exception_to_dict
from .._interrupt import Answers, Interrupt
from .._messages import JsonValue, block_to_dict, messages_from_dicts, tool_use_from_dict
from .._tools._context import ToolContext
from ..errors import InterruptSignal, ModelError
from ._registry import build_agent, lookup

__all__ = ["MODEL_ACTIVITY", "TOOL_ACTIVITY", "model_activity", "tool_activity"]

MODEL_ACTIVITY = "interlude.model"
TOOL_ACTIVITY = "interlude.tool"


def _agent(name: str) -> Any:
    info = activity.info()
    return build_agent(lookup(info.task_queue).app, name, info.workflow_id or "temporal")


@activity.defn(name=MODEL_ACTIVITY)
async def model_activity(request: dict[str, Any]) -> dict[str, JsonValue]:
    """``{agent, messages, system_prompt, state, now}`` -> ``{"response"}`` or ``{"error"}``.

    A retryable ModelError fails the attempt (Temporal retries it per the model options)."""
    from .._agent._codec import _encode_response

    agent = _agent(request["agent"])
    now = float(request["now"])
    agent.clock = lambda: now
    agent._messages[:] = messages_from_dicts(request["messages"])
    agent.system_prompt = request.get("system_prompt")
    agent.state = dict(request.get("state") or {})
    run = Run(agent, Progress(), None, None)
    try:
        response = await LOCAL.call_model(run)
    except ModelError as exc:
        if exc.retryable:
            raise ApplicationError(
                str(exc), exception_to_dict(exc), type=type(exc).__name__
            ) from exc
        return {"error": exception_to_dict(exc)}
    except Exception as exc:
        return {"error": exception_to_dict(exc)}
    return {"response": _encode_response(response)}


@activity.defn(name=TOOL_ACTIVITY)
async def tool_activity(request: dict[str, Any]) -> dict[str, JsonValue]:
    """``{agent, tool, tool_use, answers, state, now}`` -> ``{"result"}``, ``{"error"}`` (the
    tool raised: its exception) or ``{"interrupt"}`` (the body asked a question)."""
    agent = _agent(request["agent"])
    now = float(request["now"])
    agent.clock = lambda: now
    agent.state = dict(request.get("state") or {})
    tool_use = tool_use_from_dict(request["tool_use"], "tool_use")
    tool = agent._tools[request["tool"]]
    context = ToolContext(tool_use, agent, _answers_from_dict(request["answers"], now))
    beat = _heartbeat_while_running()
    try:
        result = await LOCAL.run_tool(
            Run(agent, Progress(), None, None), ToolCall(tool_use), tool, tool_use, context
        )
    except InterruptSignal as signal:
        return {"interrupt": signal.interrupt.to_dict()}
    except Exception as exc:
        return {"error": exception_to_dict(exc)}
    finally:
        beat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beat
    return {"result": block_to_dict(result)}


def _heartbeat_while_running() -> asyncio.Task[None]:
    """Heartbeat for the body while it runs, so a lost worker is noticed (the SDK throttles
    heartbeats to a fraction of the heartbeat timeout)."""
    timeout = activity.info().heartbeat_timeout

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
    answers = Answers(
        data["values"],
        {k: tool_use_from_dict(v, "shown") for k, v in data["shown"].items()},
        data["expired"],
    )
    answers.asked = {k: Interrupt.from_dict(v) for k, v in data["asked"].items()}
    answers.clock = lambda: now
    return answers
