"""The agent's executor in a DBOS workflow: each model call and each tool body is a step.

Steps run in the worker's own process (no request to serialize): a step runs the body here,
with the loop's own :data:`LOCAL` executor, and records its outcome as JSON; the loop always
reads the outcome back from that JSON, so a replay (another process carrying the workflow on)
sees exactly what the first execution saw.

A tool that may not run twice (``at_most_once``) is two steps: a *started* marker, recorded
before the body, then the body. A recovered workflow that replays the marker but finds no
recorded body does not run the body: it reports the call :class:`Lost`, and the loop asks its
``in_doubt`` question as after a crash of the embedded engine. Both step ids are reserved when
the call starts, so concurrent bodies replay at the ids they were first given.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from typing import Any

from dbos import DBOS

from .._agent import (
    LOCAL,
    Asked,
    Lost,
    ModelCall,
    Raised,
    Returned,
    StateDelta,
    ToolOutcome,
    ToolRequest,
    outcome_from_json,
)
from .._exceptions import exception_from_dict, exception_to_dict
from .._messages import JsonValue, block_to_dict
from .._stream import ModelResponse
from ..errors import ModelError

__all__ = ["MODEL_STEP", "TOOL_STEP", "Clock", "DBOSExecutor", "outcome_from_record"]

MODEL_STEP = "interlude.model"
TOOL_STEP = "interlude.tool"
STARTED_STEP = "interlude.tool.started"
MODEL_ATTEMPTS = 5
"""Attempts of a model call that fails with a retryable ModelError (within its one step)."""
LOST = "the tool started in an earlier execution of the workflow and no result was recorded"


class Clock:
    """The workflow's time: it moves only with recorded values (a step's ``now``, a message's
    ``at``, a deadline reached), so a replay reads the same times."""

    def __init__(self, now: float) -> None:
        self.value = now

    def __call__(self) -> float:
        return self.value

    def advance(self, to: Any) -> None:
        if isinstance(to, int | float) and to > self.value:
            self.value = float(to)


class DBOSExecutor:
    """Model calls and tool bodies as DBOS steps; everything else (hooks, answers, state)
    stays in the workflow."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    async def call_model(self, call: ModelCall) -> ModelResponse:
        async def body() -> dict[str, JsonValue]:
            return await _model_body(call)

        out = await DBOS.run_step_async({"name": MODEL_STEP}, body)
        self.clock.advance(out.get("now"))
        if "error" in out:
            raise exception_from_dict(out["error"], "model error")
        return ModelResponse.from_dict(out["response"], "model response")

    async def run_tool(self, request: ToolRequest) -> ToolOutcome:
        name = f"{TOOL_STEP}:{request.tool.name}"
        if not request.at_most_once:  # may run again: the body step alone
            out = await DBOS.run_step_async({"name": name}, _tool_body, request)
            self.clock.advance(out.get("now"))
            return outcome_from_record(out)
        started, done = DBOS.reserve_step(), DBOS.reserve_step()  # ids in call order
        ran: list[bool] = []

        def mark() -> float:
            ran.append(True)
            return time.time()

        await started.run_async({"name": STARTED_STEP}, mark)
        replayed = not ran  # the marker came from the record: an earlier execution started it

        async def body() -> dict[str, JsonValue]:
            if replayed:
                return {"lost": f"tool {request.tool.name!r}: {LOST}"}
            return await _tool_body(request)

        out = await done.run_async({"name": name}, body)
        self.clock.advance(out.get("now"))
        return outcome_from_record(out)


async def _model_body(call: ModelCall) -> dict[str, JsonValue]:
    """The model's reply as JSON, or its error; a retryable ModelError is tried again here."""
    delay = 0.2
    for attempt in range(1, MODEL_ATTEMPTS + 1):
        try:
            response = await LOCAL.call_model(call)
        except ModelError as exc:
            if exc.retryable and attempt < MODEL_ATTEMPTS:
                await asyncio.sleep(delay)
                delay *= 2
                continue
            return {"error": exception_to_dict(exc), "now": time.time()}
        except Exception as exc:
            return {"error": exception_to_dict(exc), "now": time.time()}
        return {"response": response.to_dict(), "now": time.time()}
    raise AssertionError("unreachable")  # pragma: no cover


async def _tool_body(request: ToolRequest) -> dict[str, JsonValue]:
    """Run the body here; its outcome as JSON (what the loop reads back, now and on replay)."""
    outcome = await LOCAL.run_tool(request)
    out = outcome_to_json(outcome)
    out["now"] = time.time()
    return out


def outcome_to_json(outcome: ToolOutcome) -> dict[str, JsonValue]:
    """A body's outcome as the step's JSON output."""
    out: dict[str, JsonValue]
    match outcome:
        case Returned():
            out = {"result": block_to_dict(outcome.result)}
        case Raised():
            out = {"error": exception_to_dict(outcome.exception)}
        case Asked(relayed=True):
            out = {"interrupts": [q.to_dict() for q in outcome.interrupts]}
        case Asked():
            out = {"interrupt": outcome.interrupts[0].to_dict()}
        case Lost():
            return {"lost": outcome.reason}
    if isinstance(outcome, Asked) and outcome.checkpoint is not None:
        out["checkpoint"] = outcome.checkpoint
    if outcome.used:
        out["used"] = sorted(set(outcome.used))
    delta = outcome.state
    if delta is not None:
        try:
            changed = json.loads(json.dumps(dict(delta.set)))
        except (TypeError, ValueError) as exc:  # the loop could not keep it either
            problem = TypeError(f"a tool body left agent.state not JSON-compatible: {exc}")
            return {"error": exception_to_dict(problem)}
        out["state"] = {"set": changed, "removed": list(delta.removed)}
    return out


def outcome_from_record(out: Mapping[str, Any]) -> ToolOutcome:
    """The step's recorded output as the loop's outcome."""
    if "lost" in out:
        return Lost(reason=str(out["lost"]))
    changed = out.get("state")
    delta = None
    if isinstance(changed, dict):
        delta = StateDelta(set=changed.get("set") or {}, removed=tuple(changed.get("removed", ())))
    return outcome_from_json(out, delta)
