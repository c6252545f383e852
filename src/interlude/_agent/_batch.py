"""Tool batches: each tool use through its before-hooks, body and after-hooks, and the executors.

A call's progress lives in its ``ToolCall`` (phase, kept result, retries), so a batch can stop
at any call and carry on later exactly there.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .._interrupt import Interrupt
from .._messages import Text, ToolResult, ToolUse
from .._stream import ToolCallFinished, ToolCallStarted
from .._tools._context import ToolContext
from ..errors import InterruptSignal, RetryLimitError
from ..hooks._events import AfterToolCallEvent, BeforeToolCallEvent
from ._state import ToolBatch, ToolCall

if TYPE_CHECKING:
    from .._tools._spec import AgentTool
    from ._loop import Run

__all__ = ["INVALID_JSON_KEY", "run_batch", "run_call"]

INVALID_JSON_KEY = "__invalid_json__"
"""Key under which a tool use keeps arguments the model sent as malformed JSON."""


async def run_batch(run: Run, batch: ToolBatch, replay: bool) -> list[Interrupt]:
    """Run the batch's unfinished calls; return the interrupts that stop it (empty when done)."""
    pending = [c for c in batch.calls if c.phase != "done"]
    if run.agent.tool_executor == "sequential" or len(pending) == 1:
        for call in pending:
            interrupts = await run_call(run, call, replay)
            if interrupts:
                return interrupts
        return []
    tasks = [asyncio.ensure_future(run_call(run, call, replay)) for call in pending]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        unfinished = [t for t in tasks if not t.done()]
        for t in unfinished:
            t.cancel()
        if unfinished:
            await asyncio.gather(*unfinished, return_exceptions=True)
    # In tool-use order: the first real failure wins (not a sibling we cancelled because of it).
    for t in tasks:
        if not t.cancelled() and t.exception() is not None:
            raise t.exception()  # type: ignore[misc]
    gathered: list[Interrupt] = []
    for t in tasks:
        gathered.extend(t.result())
    return gathered


async def run_call(run: Run, call: ToolCall, replay: bool) -> list[Interrupt]:
    """Carry one tool use forward from its phase; on an interrupt, leave it in that phase."""
    agent = run.agent
    hooks = agent.hooks
    answers = run.progress.answers
    emit = run.emit
    replay_before = replay and call.phase == "before"
    replay_after = replay and call.phase == "after"
    while True:
        if call.phase in ("pending", "before"):
            tool_use = call.tool_use
            tool: AgentTool | None = agent._tools.get(tool_use.name)
            cancel_message: str | None = None
            if hooks.has_callbacks(BeforeToolCallEvent):
                before = BeforeToolCallEvent(
                    agent,
                    tool_use,
                    tool,
                    scope=tool_use.id,
                    is_replay=replay_before,
                    answers=answers,
                )
                interrupts = await hooks.invoke(before)
                if interrupts:
                    call.phase = "before"
                    return interrupts
                tool_use, tool, cancel_message = before.tool_use, before.tool, before.cancel_message
                if tool_use.id != call.tool_use.id:  # the result must answer the model's id
                    tool_use = ToolUse(call.tool_use.id, tool_use.name, tool_use.input)
            call.active_use, call.tool, call.tool_name = tool_use, tool, tool.name if tool else None
            call.phase = "body"
            result, exception = await _body(run, call, cancel_message)
            if result is None:  # the body interrupted
                assert isinstance(exception, InterruptSignal)
                return [exception.interrupt]
            call.result, call.exception, call.cancel_message = result, exception, cancel_message
            call.phase = "after"
        elif call.phase == "body":  # resumed after the body interrupted: run it again from the top
            result, exception = await _body(run, call, None)
            if result is None:
                assert isinstance(exception, InterruptSignal)
                return [exception.interrupt]
            call.result, call.exception, call.cancel_message = result, exception, None
            call.phase = "after"

        assert call.result is not None and call.active_use is not None
        final = call.result
        if hooks.has_callbacks(AfterToolCallEvent):
            after = AfterToolCallEvent(
                agent,
                call.active_use,
                _selected(run, call),
                call.result,
                call.exception,
                call.cancel_message,
                scope=call.tool_use.id,
                is_replay=replay_after,
                answers=answers,
            )
            interrupts = await hooks.invoke(after)
            if interrupts:  # an interrupt wins over a retry asked in the same pass
                return interrupts
            if after.retry:
                # The retried call's after-hooks ask their questions afresh.
                answers.forget(after._used_ids())
                call.retries += 1
                if call.retries > agent.max_retries:
                    call.result, call.phase = after.result, "done"
                    raise RetryLimitError(
                        f"tool {call.tool_use.name!r} (tool use {call.tool_use.id!r}) was retried "
                        f"{call.retries - 1} times; the limit is max_retries={agent.max_retries}"
                    )
                call.phase, call.result, call.exception = "pending", None, None
                replay_before = replay_after = False
                continue
            final = after.result
        call.result, call.phase = _json_checked(final), "done"
        call.exception = None
        if emit is not None:
            emit(ToolCallFinished(final))
        return []


def _json_checked(result: ToolResult) -> ToolResult:
    """The result, or an error result if a Json block holds something JSON cannot carry
    (it could not be saved, nor sent to a model)."""
    from .._messages import Json

    for block in result.content:
        if isinstance(block, Json):
            import json

            try:
                json.dumps(block.value)
            except (TypeError, ValueError) as exc:
                problem = f"the tool's result is not JSON-compatible ({exc})"
                return ToolResult(result.tool_use_id, "error", [Text(problem)])
    return result


def _selected(run: Run, call: ToolCall) -> AgentTool | None:
    if call.tool is None and call.tool_name is not None:
        call.tool = run.agent._tools.get(call.tool_name)
    return call.tool


async def _body(
    run: Run, call: ToolCall, cancel_message: str | None
) -> tuple[ToolResult | None, BaseException | None]:
    """Run the tool: (result, exception), or (None, signal) when the tool interrupted."""
    tool_use = call.active_use
    assert tool_use is not None
    if cancel_message is not None:
        return _error(tool_use, cancel_message), None
    tool = _selected(run, call)
    if tool is None:
        if tool_use.name in run.agent._tools:
            problem = f"tool {tool_use.name!r} was not run: a before-tool hook selected no tool"
        else:
            known = ", ".join(sorted(run.agent._tools)) or "none"
            problem = f"unknown tool {tool_use.name!r} (available: {known})"
        return _error(tool_use, problem), None
    raw = tool_use.input.get(INVALID_JSON_KEY)
    if isinstance(raw, str) and len(tool_use.input) == 1:
        problem = f"the arguments for tool {tool_use.name!r} are not valid JSON: {raw!r}"
        return _error(tool_use, problem), None
    if run.emit is not None:
        run.emit(ToolCallStarted(tool_use))
    context = ToolContext(tool_use, run.agent, run.progress.answers)
    try:
        return await tool.run(tool_use, context), None
    except InterruptSignal as signal:
        return None, signal
    except Exception as exc:
        return _error(tool_use, f"{type(exc).__name__}: {exc}"), exc


def _error(tool_use: ToolUse, text: str) -> ToolResult:
    return ToolResult(tool_use.id, "error", [Text(text)])
