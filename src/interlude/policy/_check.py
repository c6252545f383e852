"""``Policy.check`` and ``interlude policy check``: what is wrong with a policy before it runs.

- A rule is *unreachable* when an earlier rule without a condition covers every tool it
  covers: the earlier one always decides first.
- An expression that reads a variable no call has (``inputs.amount``, ``tol``) fails on every
  call; it is found by evaluating it once on a call that has every field.
- Given the tools of the agents the policy is for, a rule that covers none of them is named
  (a misspelt tool, or a tool that was renamed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._call import PolicyCall
from ._rules import _GLOB, _UNDEFINED, Rule

if TYPE_CHECKING:
    from ._policy import Policy

__all__ = ["problems"]

_SAMPLE = PolicyCall("", {}, agent="", session="", path=(), source="local")


def problems(policy: Policy, tools: list[str] | None) -> list[str]:
    found: list[str] = []
    for i, rule in enumerate(policy.rules):
        shadowing = next(
            (j for j, earlier in enumerate(policy.rules[:i]) if _always_first(earlier, rule)),
            None,
        )
        if shadowing is not None:
            found.append(
                f"rule {i} ({rule.text}) is unreachable: rule {shadowing} "
                f"({policy.rules[shadowing].text}) always decides those calls first"
            )
        undefined = _undefined_variable(rule)
        if undefined is not None:
            found.append(
                f"rule {i} ({rule.text}) reads {undefined!r}, which no call has "
                f"(a call has tool, input, agent, session, path and source)"
            )
        if tools is not None and not any(rule.covers(t) for t in tools):
            found.append(f"rule {i} ({rule.text}) covers no tool the agents have")
    return found


def _always_first(earlier: Rule, later: Rule) -> bool:
    """Whether ``earlier`` decides every call ``later`` covers."""
    if earlier.when is not None:
        return False
    if _GLOB.isdisjoint(later.tool):  # a name: whether the earlier name or glob covers it
        return earlier.covers(later.tool)
    # Two globs: told only where it is plain (the same glob, or a prefix glob "pay_*" before
    # a glob that starts with that prefix); anything subtler is not reported.
    prefix = earlier.tool[:-1]
    return earlier.tool == later.tool or (
        earlier.tool.endswith("*") and _GLOB.isdisjoint(prefix) and later.tool.startswith(prefix)
    )


def _undefined_variable(rule: Rule) -> str | None:
    if not isinstance(rule.when, str):
        return None
    try:
        rule._program.execute(_SAMPLE.context())
    except Exception as exc:  # only an undefined variable is wrong on every call
        text = str(exc).splitlines()[0] if str(exc) else ""
        if text.startswith(_UNDEFINED):
            return text[len(_UNDEFINED) :].split("'", 1)[0]
    return None
