"""What a policy judges: one tool call, and what a rule of it decided about the call.

A :class:`PolicyCall` is the call as the rules see it: the tool's name, the input it would run
with, the agent's name, the session, the path of agents that made it and where the tool comes
from. A live call knows all of them; a call read back from a stored session (a replay) may not
know its path or source, and a rule that needs one of those cannot judge it: reading it raises
:class:`Unknown`, and the replay reports the call as unjudged instead of guessing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

from .._messages import JsonValue

__all__ = ["Decision", "PolicyCall", "Unknown", "Verdict"]

Decision = Literal["allow", "ask", "deny"]
DECISIONS: tuple[Decision, ...] = ("allow", "ask", "deny")


class Unknown(LookupError):
    """A rule read a field of the call that its record does not hold (in a replay)."""

    def __init__(self, field: str) -> None:
        super().__init__(f"the record of this call does not say its {field}")
        self.field = field


_UNKNOWN: Any = object()


class PolicyCall:
    """One tool call as a policy sees it (read-only).

    ``tool`` and ``input`` are the call about to run (after the before-tool hooks chose it);
    ``agent`` is the agent's name (None: unnamed), ``session`` its session id (None: no
    session); ``path`` the names of the agents the call came through, outermost first, ending
    with the calling agent's (an agent used as a tool, a graph's node); ``source`` where the
    tool comes from: ``"local"``, ``"mcp:<server>"``, ``"agent:<name>"`` (an agent used as a
    tool), ``"a2a:<name>"`` (a remote agent) or ``"graph:<name>"``.
    """

    __slots__ = ("_path", "_source", "agent", "call_id", "input", "session", "tool")

    def __init__(
        self,
        tool: str,
        input: Mapping[str, JsonValue],
        *,
        agent: str | None = None,
        session: str | None = None,
        path: tuple[str, ...] | None = (),
        source: str | None = "local",
        call_id: str = "",
    ) -> None:
        self.tool = tool
        self.input = input
        self.agent = agent
        self.session = session
        self.call_id = call_id
        self._path = _UNKNOWN if path is None else tuple(path)
        self._source = _UNKNOWN if source is None else source

    @property
    def path(self) -> tuple[str, ...]:
        if self._path is _UNKNOWN:
            raise Unknown("path")
        return self._path

    @property
    def source(self) -> str:
        if self._source is _UNKNOWN:
            raise Unknown("source")
        return self._source

    @property
    def unknown(self) -> tuple[str, ...]:
        """The fields this call's record does not hold (empty for a live call)."""
        return tuple(
            name
            for name, value in (("path", self._path), ("source", self._source))
            if value is _UNKNOWN
        )

    def context(self) -> dict[str, Any]:
        """The variables an expression sees: ``tool``, ``input``, ``agent``, ``session``,
        ``path`` and ``source`` (those the record holds)."""
        from .._frozen import thaw

        out: dict[str, Any] = {
            "tool": self.tool,
            "input": thaw(self.input),
            "agent": self.agent,
            "session": self.session,
        }
        if self._path is not _UNKNOWN:
            out["path"] = list(self._path)
        if self._source is not _UNKNOWN:
            out["source"] = self._source
        return out

    def __repr__(self) -> str:
        return f"PolicyCall(tool={self.tool!r}, call_id={self.call_id!r})"


class Verdict(NamedTuple):
    """What a policy decided about one call.

    ``then`` is the decision; ``rule`` the index of the rule that decided (None: the policy's
    default); ``rule_text`` that rule as written, for people; ``why`` says why a rule that
    could not be evaluated asked instead (None otherwise); ``unjudged`` names a field the
    call's record lacks that a rule needed (replay only: ``then`` is then meaningless).
    The ask options (``approvers``, ``quorum``, ``expires_in``) and ``note`` are the rule's.
    """

    then: Decision
    rule: int | None
    rule_text: str
    version: str | None = None
    why: str | None = None
    note: str | None = None
    approvers: tuple[str, ...] = ()
    quorum: int = 1
    expires_in: float | None = None
    unjudged: str | None = None

    def to_dict(self) -> dict[str, JsonValue]:
        """The verdict as the audit trail keeps it."""
        out: dict[str, JsonValue] = {
            "then": self.then,
            "rule": self.rule,
            "rule_text": self.rule_text,
            "policy": self.version,
        }
        if self.why is not None:
            out["why"] = self.why
        if self.note is not None:
            out["note"] = self.note
        return out
