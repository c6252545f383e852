"""The versioned JSON form of an agent's state: conversation, agent state and pause.

Readers check the format and version first and name any malformed part by its path;
nothing is half-loaded because parsing builds new objects and only returns when all is read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .._audit import AuditEntry
from .._exceptions import exception_from_dict, exception_to_dict
from .._frozen import freeze
from .._interrupt import Answers, Interrupt
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
    messages_from_dicts,
    tool_result_from_dict,
    tool_use_from_dict,
    tool_use_to_dict,
)
from .._result import AgentResult
from .._stream import ModelResponse
from ..errors import SessionCorruptError, StateFormatError, StateIntegrityError
from ._output import OutputState
from ._state import (
    AfterInvocation,
    AfterModelCall,
    BeforeInvocation,
    BeforeModelCall,
    MessageAdded,
    Position,
    Progress,
    Step,
    ToolBatch,
    ToolCall,
    outstanding_batch,
)

if TYPE_CHECKING:
    from ..sessions import StoredSession

__all__ = [
    "FORMAT",
    "VERSION",
    "Decoded",
    "check_answered",
    "decode_state",
    "decode_stored",
    "encode_state",
]

FORMAT = "interlude.agent-state"
VERSION = 3
"""2 added the journal: a pause may hold no questions (a run going, or stopped), tool calls in
phase ``running`` with their start time, and the model's own id of a tool use made unique.
3 added answers as data: the agent's name, the audit trail, typed and expiring questions
(``response_schema``, ``expires_at``, ``default``), questions settled by expiry, and the
pause's signature. Versions 1 and 2 read as they are. Later additions to 3 are optional and
written only when used (readers that do not know them ignore them; a pause without them reads as
before): a tool call's ``checkpoint`` (what its body kept, e.g. a sub-agent's state), a
question's ``via`` (the sub-agent tool calls it came up through), ``progress.traceparent``
(the W3C trace context of the run that paused, when it was traced: the resumed run's span
links to it), and for a run given an output type its schema in ``progress.output`` (and its
answer in an ``after_invocation`` step's ``output``); a message-added step may be followed by
one more (a reply, then what is wrong with it)."""
READS = (1, 2, 3)
_PHASES = ("pending", "before", "running", "body", "after", "done")
_MODEL_STOPS = ("end_turn", "tool_use", "max_tokens", "content_filtered")
_RESULT_STOPS = ("end_turn", "max_tokens", "content_filtered", "interrupt", "cancelled")


@dataclass(frozen=True, slots=True)
class Decoded:
    """A state as read from its JSON form, with what it says of the agent that saved it."""

    messages: list[Message]
    state: dict[str, JsonValue]
    pause: Position | None
    tools: list[str]
    """The tool names of the agent that saved the state."""
    agent: str | None = None
    """The name of the agent that saved it."""
    audit: list[AuditEntry] = field(default_factory=list)


def encode_state(
    messages: list[Message],
    state: Mapping[str, JsonValue],
    pause: Position | None,
    tools: list[str],
    *,
    agent: str | None = None,
    audit: list[AuditEntry] | None = None,
    key: bytes | None = None,
) -> dict[str, JsonValue]:
    try:
        agent_state = json.loads(json.dumps(dict(state)))
    except (TypeError, ValueError) as exc:
        raise StateFormatError(f"agent.state is not JSON-compatible: {exc}") from None
    encoded = [m.to_dict() for m in messages]
    digest = None
    if key is not None and pause is not None:
        from ._signing import NO_MESSAGES, chain

        digest = chain(NO_MESSAGES, encoded)
    return {
        "format": FORMAT,
        "version": VERSION,
        "messages": encoded,
        "state": agent_state,
        "pause": None if pause is None else encode_pause(pause, key, agent, digest),
        "tools": tools,
        "agent": agent,
        "audit": [e.to_dict() for e in audit or ()],
    }


def decode_state(
    data: Any,
    key: bytes | None = None,
    agent: str | None = None,
    session: str | None = None,
    *,
    plain_messages: bool = False,
) -> Decoded:
    """The state in ``data``; StateFormatError (and nothing else, quickly) for anything that
    is not a state this version reads: wrong shapes, values JSON cannot carry (sets, bytes,
    objects, NaN), nesting too deep to read, a pause that does not fit its conversation.
    With a signing ``key``, StateIntegrityError for a pause that is not signed with it for the
    agent named ``agent`` (the loading agent's name; None for an unnamed agent), and for an
    audit trail signed for another session than ``session`` (the session it is loaded as).
    ``plain_messages``: the messages were read from JSON text with no NaN or Infinity in it (a
    store's :class:`~interlude._json.PlainJson`), so they are not encoded again to check it."""
    try:
        if plain_messages and isinstance(data, dict):
            json.dumps({k: v for k, v in data.items() if k != "messages"}, allow_nan=False)
        else:
            json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise StateFormatError(f"the state is not plain JSON: {exc}") from None
    except RecursionError:
        raise StateFormatError("the state is nested too deeply to be a saved state") from None
    try:
        return _decode_state(data, key, agent, session)
    except RecursionError:
        raise StateFormatError("the state is nested too deeply to be a saved state") from None


def decode_stored(
    stored: StoredSession, key: bytes | None = None, name: str | None = None
) -> Decoded:
    """A session as a store returned it, decoded; SessionCorruptError naming the session if it
    is not a state this version reads. A pre-journal run marker in the pause slot reads as no
    pause (``split_marker`` gives it). With a signing ``key``, StateIntegrityError for a pause
    not signed with it for the agent named ``name``, as :func:`decode_state`."""
    from ..sessions import split_marker

    pause, _ = split_marker(stored.pause)
    data = {
        "format": FORMAT,
        "version": stored.format_version,
        "messages": stored.messages,
        "state": stored.state,
        "pause": pause,
        "tools": stored.tools,
        "agent": getattr(stored, "agent", None),
        "audit": getattr(stored, "audit", None) or [],
    }
    from .._json import PlainJson

    try:
        return decode_state(
            data,
            key,
            name,
            stored.session_id if key is not None else None,
            plain_messages=type(stored.messages) is PlainJson,
        )
    except StateFormatError as exc:
        raise SessionCorruptError(f"session {stored.session_id!r}: {exc}") from None


def _decode_state(
    data: Any, key: bytes | None, agent: str | None, session: str | None = None
) -> Decoded:
    d = _obj(data, "state")
    if d.get("format") != FORMAT:
        raise StateFormatError(f"not an Interlude agent state (format {_show(d.get('format'))})")
    version = d.get("version")
    if version not in READS or isinstance(version, bool):
        raise StateFormatError(
            f"agent state format version {_show(version)} is not supported (this Interlude reads "
            f"versions {', '.join(map(str, READS))})"
        )
    agent_state = d.get("state", {})
    if not isinstance(agent_state, dict):
        raise StateFormatError(f"state.state: expected an object, got {_show(agent_state)}")
    raw_pause = d.get("pause")
    tools = d.get("tools", [])
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        raise StateFormatError(f"state.tools: expected a list of tool names, got {_show(tools)}")
    name = d.get("agent")
    if name is not None and not isinstance(name, str):
        raise StateFormatError(f"state.agent: expected a name or null, got {_show(name)}")
    raw_audit = d.get("audit", [])
    if not isinstance(raw_audit, list):
        raise StateFormatError(f"state.audit: expected a list, got {_show(raw_audit)}")
    if key is not None and raw_pause is not None:
        from ._signing import NO_MESSAGES, chain, verify

        raw_messages = d.get("messages")
        digest = chain(NO_MESSAGES, raw_messages if isinstance(raw_messages, list) else [])
        verify(raw_pause, key, agent, digest)  # the loader's name: a stored name is not trusted
    messages = messages_from_dicts(d.get("messages"), "messages")
    pause = None if raw_pause is None else decode_pause(raw_pause, "pause")
    if pause is not None:
        _check_step(pause.step, messages, "pause.step")
    audit = [AuditEntry.from_dict(e, f"audit[{i}]") for i, e in enumerate(raw_audit)]
    if key is not None:  # a signed agent's trail: its signed links must hold
        from .._audit import check_chain

        broken = check_chain(audit, key, session)
        if broken is not None:
            raise StateIntegrityError(f"audit[{broken.index}]: {broken.problem}")
    return Decoded(messages, dict(agent_state), pause, list(tools), name, audit)


def _check_step(step: Step, messages: list[Message], where: str) -> None:
    """A pause must fit its conversation: indexes in range, a batch answering its message."""
    if isinstance(step, MessageAdded):
        if not 0 <= step.index < len(messages):
            raise StateFormatError(
                f"{where}.index: {step.index} is outside the conversation "
                f"({len(messages)} messages)"
            )
        _check_step(step.then, messages, f"{where}.then")
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


def check_answered(loaded: Decoded) -> None:
    """StateFormatError if the conversation ends in tool uses nobody is answering: with no
    pause (or journal) whose tool batch is about them, no model would accept it."""
    messages = loaded.messages
    if not messages or messages[-1].role != "assistant" or not messages[-1].tool_uses:
        return
    if loaded.pause is not None and outstanding_batch(loaded.pause.step) is not None:
        return  # checked by _check_step: the batch answers exactly that message
    ids = [t.id for t in messages[-1].tool_uses]
    raise StateFormatError(
        f"messages[{len(messages) - 1}]: the conversation ends in tool uses {_show(ids)} "
        "without results and without a pause that would answer them"
    )


# --- pause ------------------------------------------------------------------------------------


def encode_pause(
    pause: Position,
    key: bytes | None = None,
    agent: str | None = None,
    conversation: str | None = None,
) -> dict[str, JsonValue]:
    """The pause as JSON data; signed (see ``_signing``) when a ``key`` is given, for the agent
    named ``agent`` and the conversation whose digest (``_signing.chain``) is ``conversation``."""
    p = pause.progress
    out: dict[str, JsonValue] = {
        "step": _encode_step(pause.step),
        "interrupts": [i.to_dict() for i in pause.interrupts],
        "progress": {
            "cycles": p.cycles,
            "model_retries": p.model_retries,
            "usage": p.usage.to_dict(),
            "answers": dict(p.answers.values),
            "shown": {k: tool_use_to_dict(v) for k, v in p.answers.shown.items()},
        },
    }
    if p.answers.expired:
        out["progress"]["expired"] = sorted(p.answers.expired)
    if p.answers.asked:
        out["progress"]["asked"] = [i.to_dict() for i in p.answers.asked.values()]
    if p.traceparent is not None:  # only when traced: an untraced pause reads as before
        out["progress"]["traceparent"] = p.traceparent
    if p.output is not None:  # only when set: a state without it reads as before
        out["progress"]["output"] = {"schema": p.output.schema, "retries": p.output.retries}
    if p.decisions:  # only when some: a state without them reads as before
        out["progress"]["decisions"] = {
            tool: {"approve": approve} if note is None else {"approve": approve, "note": note}
            for tool, (approve, note) in p.decisions.items()
        }
    if p.votes:
        out["progress"]["votes"] = {
            iid: {"answer": answer, "by": list(voters)} for iid, (answer, voters) in p.votes.items()
        }
    if p.message is not None:
        out["progress"]["message"] = p.message
    if key is not None:
        from ._signing import sign

        if conversation is None:
            raise ValueError("a signed pause needs the digest of its conversation")
        sign(out, key, agent, conversation)
    return out


def decode_pause(data: Any, where: str) -> Position:
    d = _obj(data, where)
    raw_interrupts = d.get("interrupts")
    if not isinstance(raw_interrupts, list):
        raise StateFormatError(f"{where}.interrupts: expected a list, got {_show(raw_interrupts)}")
    interrupts = [
        Interrupt.from_dict(x, f"{where}.interrupts[{i}]") for i, x in enumerate(raw_interrupts)
    ]
    pw = f"{where}.progress"
    p = _obj(d.get("progress"), pw)
    answers = p.get("answers")
    if not isinstance(answers, dict):
        raise StateFormatError(f"{pw}.answers: expected an object, got {_show(answers)}")
    shown = p.get("shown", {})
    if not isinstance(shown, dict):
        raise StateFormatError(f"{pw}.shown: expected an object, got {_show(shown)}")
    expired = p.get("expired", [])
    if not isinstance(expired, list) or not all(isinstance(x, str) for x in expired):
        raise StateFormatError(f"{pw}.expired: expected a list of ids, got {_show(expired)}")
    asked = p.get("asked", [])
    if not isinstance(asked, list):
        raise StateFormatError(f"{pw}.asked: expected a list, got {_show(asked)}")
    traceparent = p.get("traceparent")
    if traceparent is not None and (not isinstance(traceparent, str) or len(traceparent) > 512):
        raise StateFormatError(
            f"{pw}.traceparent: expected a W3C traceparent, got {_show(traceparent)}"
        )
    questions = [Interrupt.from_dict(x, f"{pw}.asked[{i}]") for i, x in enumerate(asked)]
    decisions = _decode_decisions(p.get("decisions", {}), f"{pw}.decisions")
    votes = _decode_votes(p.get("votes", {}), f"{pw}.votes")
    message = p.get("message")
    if message is not None and not isinstance(message, str):
        raise StateFormatError(f"{pw}.message: expected text, got {_show(message)}")
    progress = Progress(
        cycles=_int(p, "cycles", pw),
        model_retries=_int(p, "model_retries", pw),
        usage=Usage.from_dict(p.get("usage"), f"{pw}.usage"),
        answers=Answers(
            answers,
            {k: tool_use_from_dict(v, f"{pw}.shown[{k!r}]") for k, v in shown.items()},
            expired,
            {q.id: q for q in questions},
        ),
        traceparent=traceparent,
        output=None if p.get("output") is None else _decode_output(p["output"], f"{pw}.output"),
        decisions=MappingProxyType(decisions) if decisions else Progress().decisions,
        message=message,
        votes=MappingProxyType(votes) if votes else Progress().votes,
    )
    return Position(_decode_step(d.get("step"), f"{where}.step"), interrupts, progress)


def _decode_decisions(data: Any, where: str) -> dict[str, tuple[bool, str | None]]:
    if not isinstance(data, dict):
        raise StateFormatError(f"{where}: expected an object, got {_show(data)}")
    out: dict[str, tuple[bool, str | None]] = {}
    for tool, decision in data.items():
        d = _obj(decision, f"{where}[{tool!r}]")
        approve, note = d.get("approve"), d.get("note")
        if not isinstance(approve, bool) or not (note is None or isinstance(note, str)):
            raise StateFormatError(f"{where}[{tool!r}]: expected approve (true/false), note")
        out[tool] = (approve, note)
    return out


def _decode_votes(data: Any, where: str) -> dict[str, tuple[JsonValue, tuple[str, ...]]]:
    if not isinstance(data, dict):
        raise StateFormatError(f"{where}: expected an object, got {_show(data)}")
    out: dict[str, tuple[JsonValue, tuple[str, ...]]] = {}
    for iid, vote in data.items():
        v = _obj(vote, f"{where}[{iid!r}]")
        voters = v.get("by")
        if not isinstance(voters, list) or not all(isinstance(b, str) for b in voters):
            raise StateFormatError(f"{where}[{iid!r}].by: expected a list of names")
        out[iid] = (freeze(v.get("answer")), tuple(voters))
    return out


def _decode_output(data: Any, where: str) -> OutputState:
    d = _obj(data, where)
    schema = d.get("schema")
    if not isinstance(schema, dict):
        raise StateFormatError(f"{where}.schema: expected a JSON Schema, got {_show(schema)}")
    retries = d.get("retries", 0)
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
        raise StateFormatError(f"{where}.retries: expected a count, got {_show(retries)}")
    return OutputState(dict(schema), None, retries)


# --- steps ------------------------------------------------------------------------------------


def _encode_step(step: Step) -> dict[str, JsonValue]:
    match step:
        case BeforeInvocation(prompt):
            return {"kind": "before_invocation", "prompt": prompt.to_dict()}
        case MessageAdded(index, then):
            return {"kind": "message_added", "index": index, "then": _encode_step(then)}
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
                "calls": [_encode_call(c) for c in calls],
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
    raise TypeError(f"not a step: {step!r}")


def _decode_step(data: Any, where: str, nested: int = 0) -> Step:
    d = _obj(data, where)
    kind = d.get("kind")
    # A loop chains at most two (a reply and what is wrong with it): refuse more, do not recurse.
    if nested > 1 and kind == "message_added":
        raise StateFormatError(f"{where}.kind: a message-added step cannot follow another twice")
    if kind == "before_invocation":
        return BeforeInvocation(message_from_dict(d.get("prompt"), f"{where}.prompt"))
    if kind == "message_added":
        then = _decode_step(d.get("then"), f"{where}.then", nested=nested + 1)
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
            tuple(_decode_call(c, f"{where}.calls[{i}]") for i, c in enumerate(calls)),
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
    raise StateFormatError(f"{where}.kind: unknown step {_show(kind)}")


def _encode_call(c: ToolCall) -> dict[str, JsonValue]:
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


def _decode_call(data: Any, where: str) -> ToolCall:
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
