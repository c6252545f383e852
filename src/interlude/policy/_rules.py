"""One rule of a policy: which calls it covers (a tool name or glob, and a condition), what it
decides, and for ``"ask"`` who is asked.

A condition is a CEL expression (the Common Expression Language, evaluated by the maintained
``common-expression-language`` package: no Python ``eval``; ``pip install
'interlude-agents[policy]'``) or a Python function of the :class:`PolicyCall`. It must give ``True``
or ``False``. Anything else (an error, a missing field, another value) is *failed*: the rule
does not allow the call. The policy asks instead, and says why (see ``Policy.decide``).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigurationError
from ._call import DECISIONS, Decision, PolicyCall, Unknown

__all__ = ["Condition", "Rule", "compile_expression"]

Condition = str | Callable[[PolicyCall], bool] | None
_GLOB = frozenset("*?[")
_UNDEFINED = "Undefined variable or function: '"


class Failed(Exception):
    """A condition could not be evaluated: ``why`` says how; ``unknown`` names a field the
    call's record lacks that it needed (replay)."""

    def __init__(self, why: str, unknown: str | None = None) -> None:
        super().__init__(why)
        self.why, self.unknown = why, unknown


def compile_expression(text: str) -> Any:
    """A CEL program for ``text``; ConfigurationError naming what is wrong with it."""
    try:
        import cel
    except ImportError:  # pragma: no cover - the extra is in every test environment
        raise ConfigurationError(
            "a policy condition written as text is a CEL expression: "
            "pip install 'interlude-agents[policy]' (or give a Python function instead)"
        ) from None
    try:
        return cel.compile(text)
    except (ValueError, RuntimeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigurationError(f"condition {text!r} is not a valid expression: {first}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """``Rule(tool="pay", when="input.amount > 100", then="ask", approvers=["finance"])``.

    ``tool`` is a tool name or a glob (``"delete_*"``, ``"*"``); ``when`` a condition (see the
    module) or None (every call of the tool); ``then`` is ``"allow"`` (runs, recorded),
    ``"ask"`` (the approval question, asked of ``approvers`` with ``quorum`` and a deadline
    ``expires_in`` seconds after it is asked: a question unanswered by then is declined) or
    ``"deny"`` (the model gets an error result with ``note``; nobody is asked, nothing runs).
    """

    tool: str = "*"
    when: Condition = None
    then: Decision = "ask"
    approvers: Sequence[str] = ()
    quorum: int = 1
    expires_in: float | None = None
    note: str | None = None
    _program: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.tool, str) or not self.tool:
            raise ConfigurationError(f"a rule's tool is a name or a glob, got {self.tool!r}")
        if self.then not in DECISIONS:
            raise ConfigurationError(
                f"rule for {self.tool!r}: then is 'allow', 'ask' or 'deny', got {self.then!r}"
            )
        approvers = self.approvers
        if isinstance(approvers, str) or not all(isinstance(a, str) and a for a in approvers):
            raise ConfigurationError(
                f"rule for {self.tool!r}: approvers is a list of group names, got {approvers!r}"
            )
        object.__setattr__(self, "approvers", tuple(approvers))
        quorum = self.quorum
        if isinstance(quorum, bool) or not isinstance(quorum, int) or quorum < 1:
            raise ConfigurationError(
                f"rule for {self.tool!r}: quorum is a whole number >= 1, got {quorum!r}"
            )
        expires = self.expires_in
        if expires is not None and (
            isinstance(expires, bool) or not isinstance(expires, int | float) or not expires > 0
        ):
            raise ConfigurationError(
                f"rule for {self.tool!r}: expires_in is a positive number of seconds, "
                f"got {expires!r}"
            )
        if self.note is not None and not isinstance(self.note, str):
            raise ConfigurationError(f"rule for {self.tool!r}: note is text, got {self.note!r}")
        if self.then != "ask" and (self.approvers or quorum != 1 or expires is not None):
            raise ConfigurationError(
                f"rule for {self.tool!r}: approvers, quorum and expires_in are for then='ask'"
            )
        when = self.when
        if isinstance(when, str):
            object.__setattr__(self, "_program", compile_expression(when))
        elif when is not None and not callable(when):
            raise ConfigurationError(
                f"rule for {self.tool!r}: when is an expression (text) or a function of the "
                f"call, got {when!r}"
            )

    @property
    def text(self) -> str:
        """The rule as people read it: ``tool="pay" when="input.amount > 100" then="ask"``."""
        when = self.when
        shown = f' when="{when}"' if isinstance(when, str) else ""
        if callable(when):
            shown = f" when={getattr(when, '__qualname__', None) or type(when).__name__}()"
        return f'tool="{self.tool}"{shown} then="{self.then}"'

    def covers(self, tool: str) -> bool:
        """Whether this rule's ``tool`` names ``tool``."""
        pattern = self.tool
        if _GLOB.isdisjoint(pattern):
            return pattern == tool
        return fnmatch.fnmatchcase(tool, pattern)

    def holds(self, call: PolicyCall) -> bool:
        """Whether the condition holds for ``call``; :class:`Failed` if it cannot be told."""
        when = self.when
        if when is None:
            return True
        try:
            if self._program is not None:
                value = self._program.execute(call.context())
            else:
                value = when(call)  # type: ignore[operator]
        except Unknown as exc:
            raise Failed(str(exc), exc.field) from None
        except Exception as exc:  # any error: the call is not allowed by it
            raise Failed(_said(exc, call)) from None
        if value is True or value is False:
            return value
        raise Failed(f"the condition gave {type(value).__name__} {value!r:.60}, not true/false")


def _said(exc: Exception, call: PolicyCall) -> str:
    """How a condition failed, in a line; a field the record lacks raises :class:`Failed`
    naming it (the expression read a variable the replayed call does not hold)."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    if text.startswith(_UNDEFINED):
        name = text[len(_UNDEFINED) :].split("'", 1)[0]
        if name in call.unknown:
            raise Failed(str(Unknown(name)), name)
    if isinstance(exc, KeyError):
        return f"the call has no field {text}"
    return f"{type(exc).__name__}: {text[:200]}"
