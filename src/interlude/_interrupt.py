"""Interrupts: a question for a person, raised at a step boundary, answered on resume."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, get_args

from ._frozen import freeze
from ._interrupt_answers import Answers
from ._interrupt_args import (
    NO_DEFAULT,
    as_answer,
    check_json,
    check_name,
    policy_fields,
    seconds_of,
    typed_and_timed,
)
from ._messages import JsonValue, ToolUse, tool_use_from_dict, tool_use_to_dict
from .errors import InterruptError, InterruptSignal, StateFormatError

if TYPE_CHECKING:
    from datetime import timedelta

__all__ = [
    "EXPIRY",
    "Answers",
    "Interrupt",
    "InterruptSource",
    "Interrupter",
    "approval_id",
    "interrupt_id",
    "policy_id",
    "shown_digest",
]

EXPIRY = "expiry"
"""The ``by`` of an answer given by a deadline passing (see ``AuditEntry``)."""

InterruptSource = Literal[
    "before_invocation",
    "after_invocation",
    "message_added",
    "before_model_call",
    "after_model_call",
    "before_tools",
    "before_tool_call",
    "tool_call",
    "after_tool_call",
    "in_doubt",
    "before_node_call",
    "after_node_call",
]

SOURCES: frozenset[str] = frozenset(get_args(InterruptSource))
_NAMESPACE_OID = bytes.fromhex("6ba7b8129dad11d180b400c04fd430c8")  # uuid.NAMESPACE_OID


@lru_cache(maxsize=256)  # question names are few, named in code
def _uuid5(name: str) -> str:
    """uuid.uuid5(uuid.NAMESPACE_OID, name) as text, without importing uuid."""
    import hashlib

    digest = bytearray(hashlib.sha1(_NAMESPACE_OID + name.encode("utf-8")).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50
    digest[8] = (digest[8] & 0x3F) | 0x80
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def interrupt_id(source: InterruptSource, scope: str, name: str) -> str:
    """The deterministic id ``v1:<source>:<scope>:<uuid5(NAMESPACE_OID, name)>``."""
    return id_prefix(source, scope) + _uuid5(name)


APPROVAL_ID_NAME = "interlude.approval"  # not "approval": a hook's question of that name differs
"""The name the id of the built-in approval question is made from (see ``_agent._approval``)."""


def approval_id(tool_use_id: str) -> str:
    """The id of the built-in approval question about tool use ``tool_use_id``."""
    return interrupt_id("before_tool_call", tool_use_id, APPROVAL_ID_NAME)


def policy_id(tool_use_id: str) -> str:
    """The id under which the audit trail records a policy's decision about tool use
    ``tool_use_id`` (see ``interlude.policy``): not a question anyone answers."""
    return interrupt_id("before_tool_call", tool_use_id, "interlude.policy")


def id_prefix(source: InterruptSource, scope: str) -> str:
    """The start every :func:`interrupt_id` of ``source`` and ``scope`` shares, whatever the
    question's name."""
    return f"v1:{source}:{scope}:"


_PLAIN = re.compile(r"v\d+:[a-z_]+:")
"""The start of a plain question id (whose tool-use id may itself hold a ``/``)."""


def answer_key(session_id: str, question_id: str) -> str:
    """The key the doors show for question ``question_id`` of session ``session_id``:
    ``<session id>/<question id>`` (a session id never holds ``/``). Two sessions whose models
    numbered their tool calls alike ask questions with the same id; their keys differ."""
    return f"{session_id}/{question_id}"


def question_id_of(session_id: str, key: str) -> str:
    """The question id an answer key names for an answer sent to ``session_id`` (a plain id
    is itself): UnknownInterruptError for a key of another session's question."""
    if not isinstance(key, str) or "/" not in key:
        return key  # a plain id (or not a string: the answer rules say what is wrong)
    session, _, question = key.partition("/")
    if session == session_id:
        return question
    if _PLAIN.match(key):
        return key  # a plain id whose tool-use id holds a "/"
    from .errors import UnknownInterruptError

    raise UnknownInterruptError(
        f"{key!r} is a question of session {session!r}, not of {session_id!r}, where this "
        "answer was sent: nothing was answered"
    )


def shown_digest(interrupt: Interrupt) -> str:
    """``sha256:<hex>`` of what the question showed (canonical JSON)."""
    import hashlib
    import json

    shown = {
        "id": interrupt.id,
        "name": interrupt.name,
        "reason": interrupt.reason,
        "source": interrupt.source,
        "tool_use": None if interrupt.tool_use is None else tool_use_to_dict(interrupt.tool_use),
    }
    if interrupt.via:  # a sub-agent's question: the calls it came through (absent: as before)
        shown["via"] = [tool_use_to_dict(u) for u in interrupt.via]
    text = json.dumps(shown, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # surrogatepass: a lone surrogate (not text, but a model may send one) still gets a digest
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class Interrupt:
    """A question raised by a hook callback or a tool, waiting for an answer.

    ``tool_use`` is the tool use as it stood when the question was asked (tool events only):
    that is what the person is shown and approves. ``response_schema`` is the JSON Schema an
    answer must meet (None: any JSON). ``expires_at`` is the deadline (epoch seconds, None:
    none); after it, the question is answered by ``default`` if it ``has_default``, else it
    declines (see :class:`~interlude.errors.InterruptExpiredError`). ``via`` is empty for a
    question of this agent; for one a sub-agent asked (see ``Agent.as_tool``), the tool calls
    it came up through, outermost first.
    """

    id: str
    name: str
    reason: JsonValue = None
    response: JsonValue = None
    source: InterruptSource
    tool_use: ToolUse | None = None
    raised_at: float = 0.0
    response_schema: dict[str, JsonValue] | None = None
    expires_at: float | None = None
    default: JsonValue = None
    has_default: bool = False
    via: tuple[ToolUse, ...] = ()
    approvers: tuple[str, ...] = ()
    """The groups whose members may answer (empty: anyone who may answer at all); checked
    where people answer (the inbox and its API): ``resume`` is the application's own call."""
    quorum: int = 1
    """How many different people must give the same answer; one decline (``False``, or
    ``{"approve": false, ...}``) settles it at once."""
    escalate_after: float | None = None
    """Seconds after ``raised_at`` when ``escalate_to`` may answer too (and is notified)."""
    escalate_to: tuple[str, ...] = ()
    warn_before: float | None = None
    """Seconds before ``expires_at`` when a warning is sent (see ``interlude.notify``)."""

    def __post_init__(self) -> None:
        # What the person is shown and answers: read-only, all the way down.
        for name in ("reason", "response", "response_schema", "default"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, freeze(value))

    @property
    def digest(self) -> str:
        """``sha256:<hex>`` of what this question shows (id, name, reason, source, tool use):
        pass it back as ``resume(..., shown={id: digest})`` to answer only this question."""
        return shown_digest(self)

    def to_dict(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {
            "id": self.id,
            "name": self.name,
            "reason": self.reason,
            "response": self.response,
            "source": self.source,
            "tool_use": None if self.tool_use is None else tool_use_to_dict(self.tool_use),
            "raised_at": self.raised_at,
        }
        if self.response_schema is not None:
            out["response_schema"] = self.response_schema
        if self.expires_at is not None:
            out["expires_at"] = self.expires_at
            if self.has_default:
                out["default"] = self.default
        if self.via:
            out["via"] = [tool_use_to_dict(u) for u in self.via]
        if self.approvers:  # each only when set: a question without them reads as before
            out["approvers"] = list(self.approvers)
        if self.quorum != 1:
            out["quorum"] = self.quorum
        if self.escalate_after is not None:
            out["escalate_after"] = self.escalate_after
            out["escalate_to"] = list(self.escalate_to)
        if self.warn_before is not None:
            out["warn_before"] = self.warn_before
        return out

    def may_answer(self, groups: Iterable[str], now: float) -> bool:
        """Whether a member of ``groups`` may answer at ``now``: any group of ``approvers``,
        or of ``escalate_to`` once ``escalate_after`` has passed (no ``approvers``: anyone)."""
        allowed = set(self.approvers)
        if not allowed:
            return True
        if self.escalated(now):
            allowed.update(self.escalate_to)
        return not allowed.isdisjoint(groups)

    def escalated(self, now: float) -> bool:
        """Whether the question has been escalated by ``now``."""
        after = self.escalate_after
        return after is not None and now >= self.raised_at + after

    @classmethod
    def from_dict(cls, data: Any, where: str = "interrupt") -> Interrupt:
        from ._messages import _obj, _str

        d = _obj(data, where)
        source = _str(d, "source", where)
        if source not in SOURCES:
            raise StateFormatError(f"{where}.source: unknown interrupt source {source!r}")
        raised_at = d.get("raised_at", 0.0)
        tu = d.get("tool_use")
        schema = d.get("response_schema")
        if schema is not None and not isinstance(schema, dict):
            raise StateFormatError(f"{where}.response_schema: expected an object or null")
        expires = d.get("expires_at")
        via = d.get("via", [])
        if not isinstance(via, list):
            raise StateFormatError(f"{where}.via: expected a list of tool uses")
        return cls(
            id=_str(d, "id", where),
            name=_str(d, "name", where),
            reason=d.get("reason"),
            response=d.get("response"),
            source=source,  # type: ignore[arg-type]
            tool_use=None if tu is None else tool_use_from_dict(tu, f"{where}.tool_use"),
            raised_at=_time(raised_at, f"{where}.raised_at"),
            response_schema=schema,
            expires_at=None if expires is None else _time(expires, f"{where}.expires_at"),
            default=d.get("default"),
            has_default=expires is not None and "default" in d,
            via=tuple(tool_use_from_dict(u, f"{where}.via[{i}]") for i, u in enumerate(via)),
            **_policy_from_dict(d, where),
        )


def _policy_from_dict(d: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Who may answer and how many, escalation and warning (checked), as Interrupt fields."""
    out: dict[str, Any] = {}
    for name in ("approvers", "escalate_to"):
        groups = d.get(name, [])
        if not isinstance(groups, list) or not all(isinstance(g, str) and g for g in groups):
            raise StateFormatError(f"{where}.{name}: expected a list of group names")
        out[name] = tuple(groups)
    quorum = d.get("quorum", 1)
    if not isinstance(quorum, int) or isinstance(quorum, bool) or quorum < 1:
        raise StateFormatError(f"{where}.quorum: expected a whole number >= 1")
    out["quorum"] = quorum
    for name in ("escalate_after", "warn_before"):
        seconds = d.get(name)
        out[name] = None if seconds is None else _time(seconds, f"{where}.{name}")
    return out


def _time(value: object, where: str) -> float:
    """A stored time as a float (0.0 when absent); StateFormatError if it is not a time."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise StateFormatError(f"{where}: expected a time in seconds, got {type(value).__name__}")
    try:
        seconds = float(value)
    except OverflowError:
        raise StateFormatError(f"{where}: {str(value)[:20]}... is not a time") from None
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        raise StateFormatError(f"{where}: {seconds} is not a time")
    return seconds


class Interrupter:
    """The ``interrupt(...)`` mechanics shared by hook events and the tool context.

    A subclass sets ``_source`` and ``_scope``; the loop sets ``_answers`` (answers given so far
    in this invocation) before handing the object to user code.
    """

    __slots__ = ()

    _source: InterruptSource
    _scope: str
    _answers: Answers
    _names: dict[str, int] | None
    _callback_index: int
    _answered: dict[str, tuple[str, JsonValue]] | None
    """Questions answered through this object: id -> (name, reason). Kept only by events
    whose answers are bound to the call that finally runs (checked once all callbacks ran)."""

    def _interrupt_tool_use(self) -> ToolUse | None:
        return None

    def _used_ids(self) -> list[str]:
        """The ids of the questions asked (or answered) through this object."""
        return [interrupt_id(self._source, self._scope, n) for n in self._names or ()]

    def interrupt(
        self,
        name: str,
        reason: JsonValue = None,
        response: JsonValue = None,
        *,
        response_type: Any = None,
        expires_in: float | timedelta | None = None,
        default: Any = NO_DEFAULT,
        approvers: Iterable[str] = (),
        quorum: int = 1,
        escalate_after: float | timedelta | None = None,
        escalate_to: Iterable[str] = (),
        warn_before: float | timedelta | None = None,
    ) -> Any:
        """Ask for outside input.

        Returns the answer when one is known (given up front as ``response``, or on resume);
        otherwise records an :class:`Interrupt` and stops the caller: the run pauses at the end
        of this step with ``stop_reason == "interrupt"``.

        ``response_type`` (a pydantic model, dataclass, TypedDict, enum, ``Literal[...]`` or
        plain type) makes the answer typed: the interrupt carries its JSON Schema, ``resume``
        refuses an answer that does not fit it, and this call returns the answer as that type.
        ``expires_in`` (seconds or a timedelta) sets a deadline: after it, answers are refused
        and the question is settled by expiry, returning ``default`` if one is given, else
        raising :class:`~interlude.errors.InterruptExpiredError` (fail closed: a before-tool
        callback that lets it out cancels its tool).

        Who answers: ``approvers`` names the groups whose members may answer (checked by the
        inbox and its API, which know people's groups); ``quorum`` how many different people
        must give the same answer (one decline settles it); after ``escalate_after`` seconds
        ``escalate_to`` may answer too; ``warn_before`` seconds before the deadline a warning
        is sent (see docs/approvals.md).
        """
        if response is not None:
            return response
        check_name(name)
        self._claim_name(name)
        iid = interrupt_id(self._source, self._scope, name)
        tool_use = self._interrupt_tool_use()
        found, answer = self._answer_to(iid, name, reason, tool_use)
        if found:
            return as_answer(name, iid, answer, response_type)
        source, answers = self._source, self._answers
        question = _question(
            iid, name, reason, source, tool_use, answers, response_type, expires_in, default
        )
        timed = question.expires_at is not None
        policy = policy_fields(
            name, approvers, quorum, escalate_after, escalate_to, warn_before, timed=timed
        )
        raise InterruptSignal(replace(question, **policy) if policy else question)

    def _claim_name(self, name: str) -> None:
        """Note ``name`` as asked by the running callback; InterruptError if another callback
        of this event already asks under it (each question needs its own name)."""
        names = self._names
        if names is None:
            names = {}
            self._names = names  # type: ignore[misc]  # slot declared by subclasses
        owner = names.setdefault(name, self._callback_index)
        if owner != self._callback_index:
            raise InterruptError(
                f"interrupt name {name!r} is used by two callbacks of one "
                f"{type(self).__name__}; give each question its own name"
            )

    def _answer_to(
        self, iid: str, name: str, reason: JsonValue, tool_use: ToolUse | None
    ) -> tuple[bool, JsonValue]:
        """(True, answer) if question ``iid`` is answered, else (False, None);
        InterruptExpiredError if its deadline passed with no default."""
        answers = self._answers
        answered = getattr(self, "_answered", None)
        if answered is not None:  # bound later, to the call as all callbacks leave it
            found, answer = answers.lookup(iid, None)
            if found:
                answered[iid] = (name, reason)
        else:
            found, answer = answers.lookup(iid, tool_use)
        if not found and iid in answers.expired:  # its deadline passed with no default
            from .errors import InterruptExpiredError

            raise InterruptExpiredError(
                f"question {name!r} ({iid}) expired without an answer", answers.asked.get(iid)
            )
        return found, answer


def _question(
    iid: str,
    name: str,
    reason: JsonValue,
    source: InterruptSource,
    tool_use: ToolUse | None,
    answers: Answers,
    response_type: Any,
    expires_in: float | timedelta | None,
    default: Any,
) -> Interrupt:
    """The new question (checked: JSON reason, typed answer, deadline and default)."""
    check_json(name, "reason", reason)
    extra = typed_and_timed(name, response_type, expires_in, default)
    raised_at = answers.clock()
    before = answers.asked.get(iid)
    if before is not None:  # asked again after a partial resume: same time, same deadline
        raised_at = before.raised_at
    expires_at = None
    if expires_in is not None:
        expires_at = raised_at + float(seconds_of(expires_in))
    interrupt = Interrupt(
        id=iid,
        name=name,
        reason=reason,
        source=source,
        tool_use=tool_use,
        raised_at=raised_at,
        expires_at=expires_at,
    )
    return replace(interrupt, **extra) if extra else interrupt
