"""Interrupts: a question for a person, raised at a step boundary, answered on resume."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from ._messages import JsonValue, ToolUse, tool_use_from_dict, tool_use_to_dict
from .errors import InterruptError, InterruptSignal, StateFormatError

__all__ = ["Answers", "Interrupt", "InterruptSource", "Interrupter", "interrupt_id"]

InterruptSource = Literal[
    "before_invocation",
    "after_invocation",
    "message_added",
    "before_model_call",
    "after_model_call",
    "before_tool_call",
    "tool_call",
    "after_tool_call",
    "in_doubt",
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
    that is what the person is shown and approves.
    """

    id: str
    name: str
    reason: JsonValue = None
    response: JsonValue = None
    source: InterruptSource
    tool_use: ToolUse | None = None
    raised_at: float = 0.0

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "id": self.id,
            "name": self.name,
            "reason": self.reason,
            "response": self.response,
            "source": self.source,
            "tool_use": None if self.tool_use is None else tool_use_to_dict(self.tool_use),
            "raised_at": self.raised_at,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "interrupt") -> Interrupt:
        from ._messages import _obj, _str

        d = _obj(data, where)
        source = _str(d, "source", where)
        if source not in SOURCES:
            raise StateFormatError(f"{where}.source: unknown interrupt source {source!r}")
        raised_at = d.get("raised_at", 0.0)
        tu = d.get("tool_use")
        return cls(
            id=_str(d, "id", where),
            name=_str(d, "name", where),
            reason=d.get("reason"),
            response=d.get("response"),
            source=source,  # type: ignore[arg-type]
            tool_use=None if tu is None else tool_use_from_dict(tu, f"{where}.tool_use"),
            raised_at=_time(raised_at, f"{where}.raised_at"),
        )


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
    """The answers given so far in one invocation, and the tool use each question showed.

    An answer to a question about a tool use applies to that tool use as it was shown: if a
    hook changes the input before the question is asked again, the answer does not carry over.
    """

    __slots__ = ("shown", "values")

    def __init__(
        self,
        values: Mapping[str, JsonValue] | None = None,
        shown: Mapping[str, ToolUse] | None = None,
    ) -> None:
        self.values: dict[str, JsonValue] = dict(values or {})
        self.shown: dict[str, ToolUse] = dict(shown or {})

    def lookup(self, iid: str, tool_use: ToolUse | None) -> tuple[bool, JsonValue]:
        """(True, answer) if ``iid`` is answered for this tool use, else (False, None)."""
        if iid not in self.values:
            return False, None
        shown = self.shown.get(iid)
        if shown is not None and tool_use is not None and shown != tool_use:
            return False, None
        return True, self.values[iid]

    def with_answers(self, new: Mapping[str, JsonValue], asked: Mapping[str, Interrupt]) -> Answers:
        """A copy with ``new`` answers added to the questions in ``asked``."""
        merged = Answers(self.values, self.shown)
        for iid, answer in new.items():
            merged.values[iid] = answer
            shown = asked[iid].tool_use
            if shown is None:
                merged.shown.pop(iid, None)
            else:
                merged.shown[iid] = shown
        return merged

    def forget(self, ids: list[str]) -> None:
        for iid in ids:
            self.values.pop(iid, None)
            self.shown.pop(iid, None)

    def prune(self, index: int) -> None:
        """Keep only the answers a later step can still ask for, once message ``index`` is
        appended: those of steps about message ``index`` or later. Answers about tool uses go
        when their batch's results are appended, so a pause holds only what its step needs."""
        if not self.values:
            return
        for iid in [i for i in self.values if not _still_asked(i, index)]:
            del self.values[iid]
            self.shown.pop(iid, None)


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
    """Whether a question with id ``iid`` can still be asked once message ``index`` is added."""
    parts = iid.split(":", 2)  # v1, source, "<scope>:<uuid>"
    if len(parts) != 3 or parts[1] not in _MESSAGE_SOURCES:
        return False
    scope = parts[2][:-37]
    return scope[:1] == "m" and scope[1:].isdigit() and int(scope[1:]) >= index


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
        self, name: str, reason: JsonValue = None, response: JsonValue = None
    ) -> JsonValue:
        """Ask for outside input.

        Returns the answer when one is known (given up front as ``response``, or on resume);
        otherwise records an :class:`Interrupt` and stops the caller: the run pauses at the end
        of this step with ``stop_reason == "interrupt"``.
        """
        if response is not None:
            return response
        if not isinstance(name, str) or not name:
            raise InterruptError(f"interrupt name must be a non-empty string, got {name!r}")
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
        answered = getattr(self, "_answered", None)
        if answered is not None:  # bound later, to the call as all callbacks leave it
            found, answer = self._answers.lookup(iid, None)
            if found:
                answered[iid] = (name, reason)
                return answer
        else:
            found, answer = self._answers.lookup(iid, tool_use)
            if found:
                return answer
        import json

        try:
            json.dumps(reason, allow_nan=False)
        except RecursionError:
            raise InterruptError(
                f"the reason of interrupt {name!r} is nested too deeply to be saved"
            ) from None
        except (TypeError, ValueError) as exc:
            raise InterruptError(
                f"the reason of interrupt {name!r} is not JSON-compatible ({exc}); a pause is "
                "saved as JSON"
            ) from None
        raise InterruptSignal(
            Interrupt(
                id=iid,
                name=name,
                reason=reason,
                source=self._source,
                tool_use=tool_use,
                raised_at=time.time(),
            )
        )
