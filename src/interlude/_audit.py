"""The audit trail: who answered which question, when, with what, having been shown what.

Every answer a resume applies (a person's, or a deadline's) adds one entry. Entries are kept
with the agent (``agent.audit``, ``export_state()["audit"]``) and with its session, where stores
only ever append them. ``shown`` is a digest of exactly what the question showed: its name,
reason, source and tool use (name and input), and for a sub-agent's question the calls it came
through (``via``), so a later reader can check which question an answer covered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._interrupt import Interrupt
from ._messages import JsonValue, tool_use_to_dict
from .errors import StateFormatError

__all__ = ["AuditEntry", "shown_digest"]

EXPIRY = "expiry"
"""The ``by`` of an answer given by a deadline passing."""


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

    def __post_init__(self) -> None:
        from ._frozen import freeze

        object.__setattr__(self, "answer", freeze(self.answer))

    @classmethod
    def of(cls, interrupt: Interrupt, answer: JsonValue, by: str, at: float) -> AuditEntry:
        return cls(
            interrupt_id=interrupt.id,
            name=interrupt.name,
            answer=answer,
            by=by,
            at=at,
            shown=shown_digest(interrupt),
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

    def to_dict(self) -> dict[str, JsonValue]:
        return {
            "interrupt_id": self.interrupt_id,
            "name": self.name,
            "answer": self.answer,
            "by": self.by,
            "at": self.at,
            "shown": self.shown,
            "expired": self.expired,
        }

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
        return cls(
            interrupt_id=_str(d, "interrupt_id", where),
            name=_str(d, "name", where),
            answer=d.get("answer"),
            by=_str(d, "by", where),
            at=float(at),
            shown=_str(d, "shown", where),
            expired=expired,
        )
