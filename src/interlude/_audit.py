"""The audit trail: who answered which question, when, with what, having been shown what.

Every answer a resume applies (a person's, or a deadline's) adds one entry. Entries are kept
with the agent (``agent.audit``, ``export_state()["audit"]``) and with its session, where stores
only ever append them. ``shown`` is a digest of exactly what the question showed: its name,
reason, source and tool use (name and input), and for a sub-agent's question the calls it came
through (``via``), so a later reader can check which question an answer covered.

Each entry is chained to the one before it: ``chain`` is a digest of the previous entry's
``chain`` and this entry's fields, an HMAC with the agent's signing key where it has one
(``hmac-sha256:``), else a plain SHA-256 (``sha256:``). An edited, removed or reordered entry
breaks the chain from there on (:func:`check_chain`; ``interlude show`` reports it, and a signed
agent refuses to load a trail whose signed links do not verify). Entries written before the
chain existed carry none: they may only come first. A plain chain shows accidents and naive
edits; only a signed one stands against someone who can write the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._frozen import freeze
from ._interrupt import EXPIRY, Interrupt, shown_digest
from ._messages import JsonValue
from .errors import StateFormatError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "AuditEntry",
    "ChainProblem",
    "bound_to",
    "check_chain",
    "chained",
    "seed",
    "shown_digest",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    """One answer as it was applied.

    ``by`` is who answered (``"expiry"`` when a deadline settled it: then ``expired`` is true
    and ``answer`` is the default, or None when there was none); ``at`` is when (epoch
    seconds); ``shown`` the digest of what the question showed (:func:`shown_digest`).
    """

    interrupt_id: str
    name: str
    answer: JsonValue
    by: str
    at: float
    shown: str
    expired: bool = False
    chain: str | None = None
    """The link to the entry before (see the module's docstring); None for an entry written
    before the chain existed."""
    vote: tuple[int, int] | None = None
    """For a question with a quorum: (this approval's place, approvals needed); the question
    is settled by the entry where they are equal (or by a decline, which has no vote)."""
    tool: str | None = None
    """The tool an approval question was about (see ``@tool(needs_approval=...)``), else None:
    an answer that says ``"remember": "session"`` is remembered for that tool."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "answer", freeze(self.answer))

    @classmethod
    def of(
        cls,
        interrupt: Interrupt,
        answer: JsonValue,
        by: str,
        at: float,
        *,
        tool: str | None = None,
        vote: tuple[int, int] | None = None,
    ) -> AuditEntry:
        return cls(
            interrupt_id=interrupt.id,
            name=interrupt.name,
            answer=answer,
            by=by,
            at=at,
            shown=shown_digest(interrupt),
            tool=tool,
            vote=vote,
        )

    @classmethod
    def of_expiry(cls, interrupt: Interrupt, at: float) -> AuditEntry:
        return cls(
            interrupt_id=interrupt.id,
            name=interrupt.name,
            answer=interrupt.default if interrupt.has_default else None,
            by=EXPIRY,
            at=at,
            shown=shown_digest(interrupt),
            expired=True,
        )

    def linked(self, chain: str) -> AuditEntry:
        """This entry with its link ``chain`` (see :func:`chained`)."""
        return AuditEntry(
            interrupt_id=self.interrupt_id,
            name=self.name,
            answer=self.answer,  # (frozen already: freezing again returns it as it is)
            by=self.by,
            at=self.at,
            shown=self.shown,
            expired=self.expired,
            chain=chain,
            vote=self.vote,
            tool=self.tool,
        )

    def to_dict(self) -> dict[str, JsonValue]:
        out = self._fields()
        if self.chain is not None:  # only when chained: an older entry reads as before
            out["chain"] = self.chain
        return out

    def _fields(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {
            "interrupt_id": self.interrupt_id,
            "name": self.name,
            "answer": self.answer,
            "by": self.by,
            "at": self.at,
            "shown": self.shown,
            "expired": self.expired,
        }
        if self.tool is not None:  # only for approvals: an older entry links as before
            out["tool"] = self.tool
        if self.vote is not None:
            out["vote"] = list(self.vote)
        return out

    @property
    def settles(self) -> bool:
        """Whether this entry settled its question (not an approval still short of a quorum)."""
        return self.vote is None or self.vote[0] >= self.vote[1]

    @classmethod
    def from_dict(cls, data: Any, where: str = "audit entry") -> AuditEntry:
        from ._messages import _obj, _str

        d = _obj(data, where)
        at = d.get("at")
        if isinstance(at, bool) or not isinstance(at, int | float):
            raise StateFormatError(f"{where}.at: expected a time in seconds")
        expired = d.get("expired", False)
        if not isinstance(expired, bool):
            raise StateFormatError(f"{where}.expired: expected true or false")
        chain = d.get("chain")
        if chain is not None and not isinstance(chain, str):
            raise StateFormatError(f"{where}.chain: expected a digest")
        tool = d.get("tool")
        if tool is not None and not isinstance(tool, str):
            raise StateFormatError(f"{where}.tool: expected a tool name")
        vote = d.get("vote")
        if vote is not None and not (
            isinstance(vote, list)
            and len(vote) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in vote)
        ):
            raise StateFormatError(f"{where}.vote: expected [place, needed]")
        return cls(
            interrupt_id=_str(d, "interrupt_id", where),
            name=_str(d, "name", where),
            answer=d.get("answer"),
            by=_str(d, "by", where),
            at=float(at),
            shown=_str(d, "shown", where),
            expired=expired,
            chain=chain,
            tool=tool,
            vote=None if vote is None else (vote[0], vote[1]),
        )


def _link(previous: str, entry: AuditEntry, key: bytes | None) -> str:
    import hashlib
    import hmac
    import json

    text = json.dumps(entry._fields(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    data = f"{previous}\n{text}".encode("utf-8", "surrogatepass")
    if key is not None:
        return "hmac-sha256:" + hmac.new(key, data, hashlib.sha256).hexdigest()
    return "sha256:" + hashlib.sha256(data).hexdigest()


def seed(session_id: str | None) -> str:
    """Where a signed trail's chain starts: bound to its session (an entry signed for one
    session does not link into another's trail); ``""`` for an agent without a session (and
    for trails signed before chains were bound)."""
    return "" if session_id is None else f"session:{session_id}"


def bound_to(trail: Sequence[AuditEntry], key: bytes | None, session_id: str | None) -> bool:
    """Whether ``trail``'s chain is signed with ``key`` and starts bound to session
    ``session_id`` (its first linked entry links from :func:`seed`; for an agent without a
    session, from ``""``)."""
    if key is None:
        return False
    for entry in trail:
        if entry.chain is not None:
            return entry.chain == _link(seed(session_id), entry, key)
    return False


def chained(
    trail: tuple[AuditEntry, ...] | list[AuditEntry],
    entries: list[AuditEntry],
    key: bytes | None,
    session_id: str | None = None,
) -> list[AuditEntry]:
    """``entries`` linked in order after ``trail`` (signed with ``key`` if given; a signed
    chain that starts here starts bound to ``session_id``)."""
    previous = (trail[-1].chain or "") if trail else ""
    if not previous and key is not None:
        previous = seed(session_id)
    out: list[AuditEntry] = []
    for entry in entries:
        previous = _link(previous, entry, key)
        out.append(entry.linked(previous))
    return out


@dataclass(frozen=True, slots=True)
class ChainProblem:
    """Where a trail's chain breaks: entry ``index`` (from 0), and why."""

    index: int
    problem: str


def check_chain(
    trail: list[AuditEntry] | tuple[AuditEntry, ...],
    key: bytes | None = None,
    session_id: str | None = None,
) -> ChainProblem | None:
    """The first break in ``trail``'s chain, or None if every link holds. Signed links are
    checked with ``key``; without it they are taken as they are (the plain links, and where
    unlinked entries stand, still are checked). A signed chain starts bound to
    ``session_id`` (:func:`seed`), or unbound as written before chains were bound; one bound
    to another session is a break. Without ``session_id`` (a state imported into an agent
    without a session) a first signed link bound to some session is taken as it is (it then
    binds nothing here: see :func:`bound_to`)."""
    previous = ""
    unchecked = None  # a first link taken as it is
    first = next((e for e in trail if e.chain is not None), None)
    if key is not None and first is not None and (first.chain or "").startswith("hmac-"):
        if session_id is not None and first.chain == _link(seed(session_id), first, key):
            previous = seed(session_id)
        elif session_id is None and first.chain != _link("", first, key):
            unchecked = first
    seen_chain = seen_signed = False
    for i, entry in enumerate(trail):
        if entry.chain is None:
            if seen_chain:
                return ChainProblem(i, "an entry without a link follows linked entries")
            continue
        seen_chain = True
        signed = entry.chain.startswith("hmac-sha256:")
        if seen_signed and not signed:
            return ChainProblem(i, "an unsigned link follows signed ones")
        seen_signed = seen_signed or signed
        if (signed and key is None) or entry is unchecked:
            previous = entry.chain  # cannot check a signed link without the key (or seed)
            continue
        if entry.chain != _link(previous, entry, key if signed else None):
            return ChainProblem(i, "the entry or the one before it was changed, removed or moved")
        previous = entry.chain
    return None
