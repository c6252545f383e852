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
from .._frozen import freeze
from .._interrupt import Answers, Interrupt
from .._messages import (
    JsonValue,
    Message,
    Usage,
    _int,
    _obj,
    _show,
    messages_from_dicts,
    tool_use_from_dict,
    tool_use_to_dict,
)
from ..errors import SessionCorruptError, StateFormatError, StateIntegrityError
from ._codec_steps import check_step as _check_step
from ._codec_steps import decode_step as _decode_step
from ._codec_steps import encode_step as _encode_step
from ._output import OutputState
from ._state import (
    Position,
    Progress,
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
