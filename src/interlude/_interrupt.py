"""Interrupts: a question for a person, raised at a step boundary, answered on resume."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from types import MappingProxyType
from typing import Any, Literal, get_args

from ._frozen import freeze, thaw
from ._messages import JsonValue, ToolUse, tool_use_from_dict, tool_use_to_dict
from .errors import InterruptError, InterruptSignal, StateFormatError

__all__ = ["Answers", "Interrupt", "InterruptSource", "Interrupter", "interrupt_id"]

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
    return f"v1:{source}:{scope}:{_uuid5(name)}"


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
        from ._audit import shown_digest

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


class Answers:
    """The answers given so far in one invocation, and the tool use each question showed: a
    value (a change makes a new one).

    An answer to a question about a tool use applies to that tool use as it was shown: if a
    hook changes the input before the question is asked again, the answer does not carry over.
    """

    __slots__ = ("asked", "clock", "expired", "shown", "values")

    values: Mapping[str, JsonValue]
    shown: Mapping[str, ToolUse]
    expired: frozenset[str]
    """Questions settled by their deadline passing: with a default, ``values`` holds it;
    without one, the question has no value and asking it raises InterruptExpiredError."""
    asked: Mapping[str, Interrupt]
    """Questions of a pause that was resumed and may be asked again (those with a deadline):
    asked again, a question keeps the time it was first raised, and so its deadline, also
    across a crash and ``recover`` (saved with the pause)."""
    clock: Callable[[], float]
    """The agent's clock (when a question is raised)."""

    def __init__(
        self,
        values: Mapping[str, JsonValue] | None = None,
        shown: Mapping[str, ToolUse] | None = None,
        expired: Iterable[str] = (),
        asked: Mapping[str, Interrupt] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        set_ = object.__setattr__
        set_(self, "values", MappingProxyType({k: freeze(v) for k, v in (values or {}).items()}))
        set_(self, "shown", MappingProxyType(dict(shown or {})))
        set_(self, "expired", frozenset(expired))
        set_(self, "asked", MappingProxyType(dict(asked or {})))
        set_(self, "clock", clock)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Answers is a value: {name!r} cannot be set (make a new one)")

    def __repr__(self) -> str:
        return f"Answers(values={dict(self.values)!r}, expired={sorted(self.expired)!r})"

    def _but(
        self,
        values: Mapping[str, JsonValue] | None = None,
        shown: Mapping[str, ToolUse] | None = None,
        expired: Iterable[str] | None = None,
        asked: Mapping[str, Interrupt] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> Answers:
        new = object.__new__(Answers)
        set_ = object.__setattr__
        set_(new, "values", self.values if values is None else MappingProxyType(dict(values)))
        set_(new, "shown", self.shown if shown is None else MappingProxyType(dict(shown)))
        set_(new, "expired", self.expired if expired is None else frozenset(expired))
        set_(new, "asked", self.asked if asked is None else MappingProxyType(dict(asked)))
        set_(new, "clock", self.clock if clock is None else clock)
        return new

    def lookup(self, iid: str, tool_use: ToolUse | None) -> tuple[bool, JsonValue]:
        """(True, answer) if ``iid`` is answered for this tool use, else (False, None)."""
        if iid not in self.values:
            return False, None
        shown = self.shown.get(iid)
        if shown is not None and tool_use is not None and shown != tool_use:
            return False, None
        return True, self.values[iid]

    def with_answers(self, new: Mapping[str, JsonValue], asked: Mapping[str, Interrupt]) -> Answers:
        """These answers and ``new`` ones to the questions in ``asked``."""
        values, shown = dict(self.values), dict(self.shown)
        for iid, answer in new.items():
            values[iid] = freeze(answer)  # handed to callbacks: read-only
            tool_use = asked[iid].tool_use
            if tool_use is None:
                shown.pop(iid, None)
            else:
                shown[iid] = tool_use
        return self._but(values=values, shown=shown)

    def with_expired(self, question: Interrupt) -> Answers:
        """These answers with ``question`` settled by its deadline: its default is its answer,
        if it has one; else it has none (asking it raises InterruptExpiredError)."""
        merged = self._but(expired=self.expired | {question.id})
        if question.has_default:
            return merged.with_answers({question.id: question.default}, {question.id: question})
        if question.id not in merged.values:
            return merged
        values = dict(merged.values)
        del values[question.id]
        return merged._but(values=values)

    def with_asked(self, questions: Iterable[Interrupt]) -> Answers:
        """These answers, remembering ``questions`` as asked (see ``asked``)."""
        asked = dict(self.asked)
        asked.update((q.id, q) for q in questions)
        return self._but(asked=asked)

    def with_clock(self, clock: Callable[[], float]) -> Answers:
        return self._but(clock=clock)

    def without(self, ids: Iterable[str]) -> Answers:
        """These answers without those to ``ids`` (each is used once, or asked afresh)."""
        gone = [i for i in ids if i in self.values or i in self.shown or i in self.expired]
        if not gone:
            return self
        values = {k: v for k, v in self.values.items() if k not in gone}
        shown = {k: v for k, v in self.shown.items() if k not in gone}
        return self._but(values=values, shown=shown, expired=self.expired.difference(gone))

    def pruned(self, index: int) -> Answers:
        """Only the answers a later step can still ask for, once message ``index`` is
        appended: those of steps about message ``index`` or later. Answers about tool uses go
        when their batch's results are appended, so a pause holds only what its step needs."""
        if not self.values and not self.expired and not self.asked:
            return self
        values = {i: v for i, v in self.values.items() if _still_asked(i, index)}
        return self._but(
            values=values,
            shown={i: t for i, t in self.shown.items() if i in values},
            expired={i for i in self.expired if _still_asked(i, index)},
            asked={i: q for i, q in self.asked.items() if _still_asked(i, index)},
        )


_MESSAGE_SOURCES = frozenset(
    (
        "before_invocation",
        "after_invocation",
        "message_added",
        "before_model_call",
        "after_model_call",
    )
)


def _still_asked(iid: str, index: int) -> bool:
    """Whether a question with id ``iid`` can still be asked once message ``index`` is added.

    Steps about a message have scope ``m<n>``; a tool batch's own questions (``before_tools``)
    have ``b<n>``, ``n`` being its assistant message: they are kept until its results are
    appended, so a later pause inside the batch does not lose them."""
    parts = iid.split(":", 2)  # v1, source, "<scope>:<uuid>"
    if len(parts) != 3:
        return False
    if parts[1] in _MESSAGE_SOURCES:
        prefix = "m"
    elif parts[1] == "before_tools":
        prefix = "b"
    else:
        return False
    scope = parts[2][:-37]
    return scope[:1] == prefix and scope[1:].isdigit() and int(scope[1:]) >= index


class _NoDefault:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<no default>"


_NO_DEFAULT: Any = _NoDefault()


def _check_json(name: str, what: str, value: object) -> None:
    import json

    try:
        json.dumps(value, allow_nan=False)
    except RecursionError:
        raise InterruptError(
            f"the {what} of interrupt {name!r} is nested too deeply to be saved"
        ) from None
    except (TypeError, ValueError) as exc:
        raise InterruptError(
            f"the {what} of interrupt {name!r} is not JSON-compatible ({exc}); a pause is "
            "saved as JSON"
        ) from None


def _typed_and_timed(
    name: str, response_type: Any, expires_in: object, default: Any
) -> dict[str, Any]:
    """The Interrupt fields for a typed answer and a deadline (checked), or {}."""
    extra: dict[str, Any] = {}
    if response_type is not None:
        from ._typed import schema_of

        extra["response_schema"] = schema_of(response_type)
    if expires_in is None:
        if default is not _NO_DEFAULT:
            raise InterruptError(f"interrupt {name!r}: a default needs a deadline (expires_in)")
        return extra
    seconds = expires_in.total_seconds() if isinstance(expires_in, timedelta) else expires_in
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
        raise InterruptError(
            f"interrupt {name!r}: expires_in must be a number of seconds >= 0 or a timedelta, "
            f"got {expires_in!r}"
        )
    if default is not _NO_DEFAULT:
        if response_type is not None:
            import contextlib

            from ._typed import answer_problem, to_json

            with contextlib.suppress(Exception):  # reported below as not fitting the type
                default = to_json(response_type, default)
            problem = answer_problem(extra["response_schema"], default)
            if problem is not None:
                where = ".".join(map(str, problem[0])) or "the default"
                raise InterruptError(
                    f"interrupt {name!r}: the default does not fit response_type at {where}: "
                    f"{problem[1]}"
                )
        _check_json(name, "default", default)
        extra["default"], extra["has_default"] = default, True
    return extra


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
        default: Any = _NO_DEFAULT,
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
        if not isinstance(name, str) or not name:
            raise InterruptError(f"interrupt name must be a non-empty string, got {name!r}")
        if name.startswith("interlude."):
            raise InterruptError(
                f"interrupt name {name!r}: names starting with 'interlude.' are Interlude's own"
            )
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
        iid = interrupt_id(self._source, self._scope, name)
        tool_use = self._interrupt_tool_use()
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
        if found:
            return _as_answer(name, iid, answer, response_type)
        question = _question(
            iid, name, reason, self._source, tool_use, answers, response_type, expires_in, default
        )
        policy = _policy(name, approvers, quorum, escalate_after, escalate_to, warn_before)
        if policy:
            if policy.get("warn_before") is not None and question.expires_at is None:
                raise InterruptError(
                    f"interrupt {name!r}: warn_before needs a deadline (expires_in)"
                )
            question = replace(question, **policy)
        raise InterruptSignal(question)


def _policy(
    name: str,
    approvers: Iterable[str],
    quorum: int,
    escalate_after: float | timedelta | None,
    escalate_to: Iterable[str],
    warn_before: float | timedelta | None,
) -> dict[str, Any]:
    """The Interrupt fields for who answers, how many, escalation and warning (checked), or
    {} when all are left as they are."""
    out: dict[str, Any] = {}
    for field_name, groups in (("approvers", approvers), ("escalate_to", escalate_to)):
        names = [groups] if isinstance(groups, str) else list(groups)
        if not all(isinstance(g, str) and g.strip() for g in names):
            raise InterruptError(f"interrupt {name!r}: {field_name} is a list of group names")
        if names:
            out[field_name] = tuple(dict.fromkeys(names))
    if isinstance(quorum, bool) or not isinstance(quorum, int) or quorum < 1:
        raise InterruptError(f"interrupt {name!r}: quorum is a whole number >= 1, got {quorum!r}")
    if quorum != 1:
        out["quorum"] = quorum
    for field_name, value in (("escalate_after", escalate_after), ("warn_before", warn_before)):
        if value is None:
            continue
        seconds = value.total_seconds() if isinstance(value, timedelta) else value
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
            raise InterruptError(
                f"interrupt {name!r}: {field_name} is a number of seconds >= 0 or a timedelta, "
                f"got {value!r}"
            )
        out[field_name] = float(seconds)
    if ("escalate_after" in out) != ("escalate_to" in out):
        raise InterruptError(
            f"interrupt {name!r}: escalate_after and escalate_to go together (when, and to whom)"
        )
    return out


def _as_answer(name: str, iid: str, answer: JsonValue, response_type: Any) -> Any:
    """The answer as ``interrupt()`` returns it: the caller's own copy, or the typed value."""
    if response_type is None:
        return thaw(answer)  # the caller's own copy: the kept answer stays as given
    from ._typed import AnswerTypeError, convert

    try:
        return convert(response_type, thaw(answer))  # the caller's own copy
    except AnswerTypeError as exc:  # the stored schema let through what the type refuses
        from .errors import AnswerValidationError

        kind = getattr(response_type, "__name__", None) or repr(response_type)
        raise AnswerValidationError(
            f"the answer to {name!r} ({iid}) does not fit its response type {kind}: {exc}",
            interrupt_id=iid,
            path=exc.path,
        ) from None


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
    _check_json(name, "reason", reason)
    extra = _typed_and_timed(name, response_type, expires_in, default)
    raised_at = answers.clock()
    before = answers.asked.get(iid)
    if before is not None:  # asked again after a partial resume: same time, same deadline
        raised_at = before.raised_at
    expires_at = None
    if expires_in is not None:
        seconds = expires_in.total_seconds() if isinstance(expires_in, timedelta) else expires_in
        expires_at = raised_at + float(seconds)
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
