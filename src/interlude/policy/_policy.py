"""A policy: rules tried in order, the first that covers a call and whose condition holds
decides; a call no rule decides gets the default (``"ask"`` unless set).

A rule whose condition cannot be evaluated never allows: the call is asked (a ``"deny"`` rule
still denies only when its condition holds), and the verdict says why. The first such failure
decides, so a later ``allow`` cannot open what a broken rule should have judged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ._call import DECISIONS, Decision, PolicyCall, Verdict
from ._rules import Failed, Rule

if TYPE_CHECKING:
    from ..sessions import SessionStore
    from ._replay import ReplayReport

__all__ = ["Policy"]

_RULE_KEYS = frozenset({"tool", "when", "then", "approvers", "quorum", "expires_in", "note"})


class Policy:
    """``Policy([Rule(...), ...], default="ask", version="2026-11")``: who must approve what,
    for every call an agent makes (``Agent(policy=...)``, ``App(policy=...)``).

    ``version`` names the policy in the audit trail beside each decision (with the rule that
    made it). :meth:`from_file` reads the same rules from a TOML file; :meth:`replay` says
    what the policy would have decided over stored sessions, running nothing.
    """

    __slots__ = ("default", "rules", "version")

    def __init__(
        self, rules: Iterable[Rule] = (), *, default: Decision = "ask", version: str | None = None
    ) -> None:
        rules = tuple(rules)
        for i, rule in enumerate(rules):
            if not isinstance(rule, Rule):
                raise ConfigurationError(f"policy rule {i} is not a Rule: {rule!r}")
        if default not in DECISIONS:
            raise ConfigurationError(f"default is 'allow', 'ask' or 'deny', got {default!r}")
        if version is not None and (not isinstance(version, str) or not version):
            raise ConfigurationError(f"version is a non-empty string, got {version!r}")
        self.rules: tuple[Rule, ...] = rules
        self.default: Decision = default
        self.version = version

    def __repr__(self) -> str:
        rules, default, version = len(self.rules), self.default, self.version
        return f"Policy({rules} rules, default={default!r}, version={version!r})"

    def decide(self, call: PolicyCall) -> Verdict:
        """The verdict on ``call``: the first rule that covers it and holds, else the default.
        A condition that fails asks (with ``why``); one that needs a field the call's record
        lacks leaves the call unjudged (``unjudged``: replay only)."""
        for i, rule in enumerate(self.rules):
            if not rule.covers(call.tool):
                continue
            try:
                if not rule.holds(call):
                    continue
            except Failed as failed:
                then: Decision = "ask"
                return Verdict(
                    then, i, rule.text, self.version, why=failed.why, unjudged=failed.unknown
                )
            return Verdict(
                rule.then,
                i,
                rule.text,
                self.version,
                note=rule.note,
                approvers=tuple(rule.approvers),
                quorum=rule.quorum,
                expires_in=rule.expires_in,
            )
        return Verdict(self.default, None, f'default "{self.default}"', self.version)

    # -- files -------------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "policy") -> Policy:
        """A policy from its TOML/JSON shape: ``{"version": ..., "default": ..., "rules":
        [{"tool": ..., "when": ..., "then": ..., ...}, ...]}``."""
        if not isinstance(data, Mapping):
            raise ConfigurationError(f"{where}: expected a table, got {type(data).__name__}")
        unknown = set(data) - {"version", "default", "rules"}
        if unknown:
            raise ConfigurationError(f"{where}: unknown keys {sorted(unknown)}")
        raw_rules = data.get("rules", [])
        if not isinstance(raw_rules, list):
            raise ConfigurationError(f"{where}.rules: expected a list of tables")
        rules = []
        for i, raw in enumerate(raw_rules):
            if not isinstance(raw, Mapping):
                raise ConfigurationError(f"{where}.rules[{i}]: expected a table")
            extra = set(raw) - _RULE_KEYS
            if extra:
                raise ConfigurationError(f"{where}.rules[{i}]: unknown keys {sorted(extra)}")
            if "when" in raw and not isinstance(raw["when"], str):
                raise ConfigurationError(f"{where}.rules[{i}].when: expected an expression")
            try:
                rules.append(Rule(**raw))
            except ConfigurationError as exc:
                raise ConfigurationError(f"{where}.rules[{i}]: {exc}") from None
            except TypeError as exc:
                raise ConfigurationError(f"{where}.rules[{i}]: {exc}") from None
        return cls(rules, default=data.get("default", "ask"), version=data.get("version"))

    @classmethod
    def from_file(cls, path: str | Path) -> Policy:
        """The policy a TOML file holds (see docs/policy.md); ConfigurationError naming the
        file and what is wrong in it."""
        import tomllib

        path = Path(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigurationError(f"cannot read policy file {str(path)!r}: {exc}") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigurationError(f"policy file {str(path)!r} is not TOML: {exc}") from None
        return cls.from_dict(data, str(path))

    def to_dict(self) -> dict[str, Any]:
        """The TOML/JSON shape (:meth:`from_dict` reads it back); ValueError if a condition is a
        Python function (a file holds expressions only)."""
        rules = []
        for i, rule in enumerate(self.rules):
            if callable(rule.when):
                raise ValueError(f"rule {i}'s condition is a Python function: not writable")
            out: dict[str, Any] = {"tool": rule.tool, "then": rule.then}
            if rule.when is not None:
                out["when"] = rule.when
            if rule.approvers:
                out["approvers"] = list(rule.approvers)
            if rule.quorum != 1:
                out["quorum"] = rule.quorum
            if rule.expires_in is not None:
                out["expires_in"] = rule.expires_in
            if rule.note is not None:
                out["note"] = rule.note
            rules.append(out)
        data: dict[str, Any] = {"default": self.default, "rules": rules}
        if self.version is not None:
            data["version"] = self.version
        return data

    def check(self, tools: Iterable[str] | None = None) -> list[str]:
        """What is wrong with this policy, one line each (empty: nothing found): rules that an
        earlier rule always decides first (unreachable), expressions that read a variable no
        call has, and, given the ``tools`` agents have, rules that cover none of them."""
        from ._check import problems

        return problems(self, None if tools is None else list(tools))

    async def replay(
        self,
        store: SessionStore | str,
        *,
        agents: Iterable[str] | None = None,
        since: float | None = None,
    ) -> ReplayReport:
        """What this policy would have decided about every tool call recorded in ``store``'s
        sessions (those of ``agents`` by name, calls decided at or after ``since`` epoch
        seconds), beside what happened; nothing is run and no model is called. See
        :class:`ReplayReport`."""
        from ._replay import replay

        return await replay(self, store, agents=agents, since=since)
