"""The JSON form of the loop's steps (a pause's ``step``) and of a batch's tool calls.

Part of the versioned state format (``_codec``): each reader checks its part and names what is
wrong by its path; an unknown kind of step is refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from .._exceptions import exception_from_dict, exception_to_dict
from .._messages import (
    JsonValue,
    Message,
    Usage,
    _int,
    _obj,
    _opt_str,
    _show,
    block_to_dict,
    message_from_dict,
    tool_result_from_dict,
    tool_use_from_dict,
    tool_use_to_dict,
)
from .._result import AgentResult
from .._stream import ModelResponse
from ..errors import StateFormatError
from ._state import (
    AfterInvocation,
    AfterModelCall,
    BeforeInvocation,
    BeforeModelCall,
    MessageAdded,
    Step,
    ToolBatch,
    ToolCall,
    Undoing,
)

__all__ = ["check_step", "decode_call", "decode_step", "encode_call", "encode_step"]

_PHASES = ("pending", "before", "running", "body", "after", "done")
_RESULT_STOPS = ("end_turn", "max_tokens", "content_filtered", "interrupt", "cancelled", "undone")


def check_step(step: Step, messages: list[Message], where: str) -> None:
    """A pause must fit its conversation: indexes in range, a batch answering its message."""
    if isinstance(step, MessageAdded):
        if not 0 <= step.index < len(messages):
            raise StateFormatError(
                f"{where}.index: {step.index} is outside the conversation "
                f"({len(messages)} messages)"
            )
        check_step(step.then, messages, f"{where}.then")
    elif isinstance(step, ToolBatch):
        i = step.message_index
        if i != len(messages) - 1 or messages[i].role != "assistant":
            raise StateFormatError(
                f"{where}.message_index: {i} is not the conversation's last (assistant) message"
            )
        asked = [t.id for t in messages[i].tool_uses]
        batch = [c.answer_id for c in step.calls]
        if asked != batch:
            raise StateFormatError(
                f"{where}.calls: tool uses {batch!r} do not match the message's {asked!r}"
            )
    elif isinstance(step, Undoing):
        if step.after is not None:
            check_step(step.after, messages, f"{where}.after")
        if not -1 <= step.keep <= len(messages):
            raise StateFormatError(
                f"{where}.keep: {step.keep} is outside the conversation ({len(messages)} messages)"
            )
        if isinstance(step.then, ToolBatch):  # the batch of the message the undo keeps last
            check_step(step.then, messages[: step.keep], f"{where}.then")


def encode_step(step: Step) -> dict[str, JsonValue]:
    match step:
        case BeforeInvocation(prompt):
            return {"kind": "before_invocation", "prompt": prompt.to_dict()}
        case MessageAdded(index, then):
            return {"kind": "message_added", "index": index, "then": encode_step(then)}
        case BeforeModelCall():
            return {"kind": "before_model_call"}
        case AfterModelCall(response, exception):
            return {
                "kind": "after_model_call",
                "response": None if response is None else response.to_dict(),
                "exception": None if exception is None else exception_to_dict(exception),
            }
        case ToolBatch(message_index, calls, opened, cancelled, approved):
            batch: dict[str, JsonValue] = {
                "kind": "tool_batch",
                "message_index": message_index,
                "calls": [encode_call(c) for c in calls],
            }
            if opened:  # only when set: a state without it reads as before
                batch["opened"] = True
            if cancelled:
                batch["cancelled"] = {k: m for k, m in cancelled.items()}
            if approved:
                batch["approved"] = True
            return batch
        case AfterInvocation(result):
            after: dict[str, JsonValue] = {
                "kind": "after_invocation",
                "stop_reason": result.stop_reason,
                "message": None if result.message is None else result.message.to_dict(),
                "usage": result.usage.to_dict(),
            }
            if result.output is not None:  # structured output, as JSON data (see _output)
                after["output"] = result.output
            return after
        case Undoing():
            return _encode_undoing(step)
    raise TypeError(f"not a step: {step!r}")


def _encode_undoing(step: Undoing) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {
        "kind": "undoing",
        "to": step.to,
        "by": step.by,
        "calls": [encode_call(c) for c in step.batch.calls],
        "undone": [u.to_dict() for u in step.undone],
        "keep": step.keep,
    }
    if step.skipped:
        out["skipped"] = [u.to_dict() for u in step.skipped]
    if step.then is not None:
        out["then"] = encode_step(step.then)
    if step.after is not None:
        out["after"] = encode_step(step.after)
    return out


def _decode_undoing(d: Mapping[str, Any], where: str) -> Undoing:
    from ._undo_plan import UndoStep

    to, by, keep = d.get("to"), d.get("by"), d.get("keep")
    if not isinstance(to, str) or not isinstance(by, str):
        raise StateFormatError(f"{where}: expected to and by as text, got {_show(d)}")
    if not isinstance(keep, int) or isinstance(keep, bool) or keep < -1:
        raise StateFormatError(f"{where}.keep: expected a message count, got {_show(keep)}")
    lists = {}
    for name in ("calls", "undone", "skipped"):
        items = d.get(name, [])
        if not isinstance(items, list):
            raise StateFormatError(f"{where}.{name}: expected a list, got {_show(items)}")
        lists[name] = items
    calls = tuple(decode_call(c, f"{where}.calls[{i}]") for i, c in enumerate(lists["calls"]))
    undone = tuple(
        UndoStep.from_dict(u, f"{where}.undone[{i}]") for i, u in enumerate(lists["undone"])
    )
    if len(undone) != len(calls):
        raise StateFormatError(
            f"{where}.undone: {len(undone)} calls for {len(calls)} compensations"
        )
    skipped = tuple(
        UndoStep.from_dict(u, f"{where}.skipped[{i}]") for i, u in enumerate(lists["skipped"])
    )
    then: Step | None = None
    after: ToolBatch | None = None
    if d.get("then") is not None:
        then = decode_step(d["then"], f"{where}.then", nested=2)
        if not isinstance(then, BeforeModelCall | ToolBatch):
            raise StateFormatError(f"{where}.then: an undo stands at a model call or a batch")
    if d.get("after") is not None:
        batch = decode_step(d["after"], f"{where}.after", nested=2)
        if not isinstance(batch, ToolBatch):
            raise StateFormatError(f"{where}.after: expected a tool batch")
        after = batch
    _check_undoing(calls, undone, keep, then, after, where)
    return Undoing(to, by, ToolBatch(-1, calls), undone, skipped, keep, then, after)


def _check_undoing(
    calls: tuple[ToolCall, ...],
    undone: tuple[Any, ...],
    keep: int,
    then: Step | None,
    after: ToolBatch | None,
    where: str,
) -> None:
    """An undo's step must be one the loop makes: each call the compensation of the call it
    undoes (by id and tool), a decline's rollback (``keep`` -1) with its batch and nothing to
    stand at, an undo with no batch, and a standing only where a message is kept."""
    if (keep == -1) != (after is not None):
        raise StateFormatError(
            f"{where}.after: a decline's rollback (keep -1), and only one, has it"
        )
    if then is not None and keep < 1:
        raise StateFormatError(f"{where}.then: an undo keeping {keep} messages stands nowhere")
    seen = set()
    for i, (call, step) in enumerate(zip(calls, undone, strict=True)):
        use = call.tool_use
        if use.id != f"undo.{step.call_id}" or use.name != step.compensation or use.id in seen:
            raise StateFormatError(
                f"{where}.calls[{i}]: {use.name!r} ({use.id!r}) is not the compensation of "
                f"call {step.call_id!r} ({step.compensation!r})"
            )
        seen.add(use.id)


def decode_step(data: Any, where: str, nested: int = 0) -> Step:
    d = _obj(data, where)
    kind = d.get("kind")
    # A loop chains at most two (a reply and what is wrong with it): refuse more, do not recurse.
    if nested > 1 and kind == "message_added":
        raise StateFormatError(f"{where}.kind: a message-added step cannot follow another twice")
    if kind == "before_invocation":
        return BeforeInvocation(message_from_dict(d.get("prompt"), f"{where}.prompt"))
    if kind == "message_added":
        then = decode_step(d.get("then"), f"{where}.then", nested=nested + 1)
        index = _int(d, "index", where)
        if isinstance(then, MessageAdded) and then.index != index + 1:
            raise StateFormatError(
                f"{where}.then: a message-added step cannot follow another but for the next "
                f"message (index {index + 1}), got index {then.index}"
            )
        return MessageAdded(index, then)
    if kind == "before_model_call":
        return BeforeModelCall()
    if kind == "after_model_call":
        response = d.get("response")
        exception = d.get("exception")
        return AfterModelCall(
            None if response is None else ModelResponse.from_dict(response, f"{where}.response"),
            None if exception is None else exception_from_dict(exception, f"{where}.exception"),
        )
    if kind == "tool_batch":
        calls = d.get("calls")
        if not isinstance(calls, list) or not calls:
            raise StateFormatError(f"{where}.calls: expected a non-empty list, got {_show(calls)}")
        opened, cancelled = d.get("opened", False), d.get("cancelled", {})
        if not isinstance(opened, bool):
            raise StateFormatError(f"{where}.opened: expected true or false, got {_show(opened)}")
        approved = d.get("approved", False)
        if not isinstance(approved, bool):
            raise StateFormatError(
                f"{where}.approved: expected true or false, got {_show(approved)}"
            )
        if not isinstance(cancelled, dict) or any(type(m) is not str for m in cancelled.values()):
            raise StateFormatError(
                f"{where}.cancelled: expected tool use ids to messages, got {_show(cancelled)}"
            )
        batch = ToolBatch(
            _int(d, "message_index", where),
            tuple(decode_call(c, f"{where}.calls[{i}]") for i, c in enumerate(calls)),
            opened,
            MappingProxyType(dict(cancelled)),
            approved,
        )
        unknown = sorted(set(cancelled) - {c.tool_use.id for c in batch.calls})
        if unknown:
            raise StateFormatError(f"{where}.cancelled: no call has tool use id {unknown[0]!r}")
        return batch
    if kind == "after_invocation":
        stop = d.get("stop_reason")
        if stop not in _RESULT_STOPS:
            raise StateFormatError(f"{where}.stop_reason: unknown stop reason {_show(stop)}")
        message = d.get("message")
        return AfterInvocation(
            AgentResult(
                stop_reason=stop,
                message=None if message is None else message_from_dict(message, f"{where}.message"),
                usage=Usage.from_dict(d.get("usage"), f"{where}.usage"),
                output=d.get("output"),
            )
        )
    if kind == "undoing" and nested == 0:
        return _decode_undoing(d, where)
    raise StateFormatError(f"{where}.kind: unknown step {_show(kind)}")


def encode_call(c: ToolCall) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {"tool_use": tool_use_to_dict(c.tool_use), "phase": c.phase}
    if c.retries:
        out["retries"] = c.retries
    if c.active_use is not None and c.active_use != c.tool_use:
        out["active_use"] = tool_use_to_dict(c.active_use)
    if c.phase in ("running", "body", "after"):
        out["tool_name"] = c.tool_name
    if c.started_at is not None:
        out["started_at"] = c.started_at
    if c.model_id is not None:
        out["model_id"] = c.model_id
    if c.result is not None:
        out["result"] = block_to_dict(c.result)
    if c.exception is not None:
        out["exception"] = exception_to_dict(c.exception)
    if c.cancel_message is not None:
        out["cancel_message"] = c.cancel_message
    if c.checkpoint is not None:  # only when kept: a state without it reads as before
        out["checkpoint"] = json.loads(c.checkpoint)
    return out


def decode_call(data: Any, where: str) -> ToolCall:
    d = _obj(data, where)
    phase = d.get("phase")
    if phase not in _PHASES:
        raise StateFormatError(f"{where}.phase: unknown phase {_show(phase)}")
    tool_use = tool_use_from_dict(d.get("tool_use"), f"{where}.tool_use")
    active = d.get("active_use")
    result = d.get("result")
    exception = d.get("exception")
    retries = d.get("retries", 0)
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
        raise StateFormatError(f"{where}.retries: expected a count, got {_show(retries)}")
    started_at = d.get("started_at")
    if started_at is not None and (
        not isinstance(started_at, int | float) or isinstance(started_at, bool)
    ):
        raise StateFormatError(f"{where}.started_at: expected a time, got {_show(started_at)}")
    call = ToolCall(
        tool_use=tool_use,
        phase=phase,
        retries=retries,
        active_use=(
            tool_use_from_dict(active, f"{where}.active_use")
            if active is not None
            else tool_use
            if phase in ("running", "body", "after")
            else None
        ),
        tool_name=_opt_str(d, "tool_name", where),
        result=None if result is None else tool_result_from_dict(result, f"{where}.result"),
        exception=(
            None if exception is None else exception_from_dict(exception, f"{where}.exception")
        ),
        cancel_message=_opt_str(d, "cancel_message", where),
        started_at=None if started_at is None else float(started_at),
        model_id=_opt_str(d, "model_id", where),
        checkpoint=None if d.get("checkpoint") is None else json.dumps(d["checkpoint"]),
    )
    if phase in ("after", "done") and call.result is None:
        raise StateFormatError(f"{where}.result: a call in phase {phase!r} needs its result")
    return call
