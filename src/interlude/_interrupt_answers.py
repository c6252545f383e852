"""The answers an invocation has been given so far, as one immutable value.

Kept apart from the question type so the loop's per-step bookkeeping (``pruned``, ``without``)
reads as one small class: which answers are still wanted, and for which tool use.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from ._frozen import freeze

if TYPE_CHECKING:
    from ._interrupt import Interrupt
    from ._messages import JsonValue, ToolUse

__all__ = ["Answers"]


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
