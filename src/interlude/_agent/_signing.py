"""Signed pauses: an HMAC over a pause (its step, progress, answers and questions).

With a signing key, every pause an agent exports or saves carries ``signature``, and a pause
that does not verify with the key is refused (StateIntegrityError) before anything is loaded.
The MAC covers the encoded pause and the agent's name; it does not cover the conversation
(the tool calls that run, and their approvals, come from the pause) nor the audit trail,
and it proves nothing against someone who holds the key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import TYPE_CHECKING

from ..errors import ConfigurationError, StateIntegrityError

if TYPE_CHECKING:
    from .._messages import JsonValue

__all__ = ["SIGNATURE", "as_key", "sign", "verify"]

SIGNATURE = "signature"
_SCHEME = "hmac-sha256:"


def as_key(key: object) -> bytes | None:
    """A signing key as bytes (text is UTF-8 encoded); None for none."""
    if key is None:
        return None
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not isinstance(key, bytes | bytearray) or len(key) < 16:
        raise ConfigurationError(
            "signing_key must be bytes or text of at least 16 bytes (e.g. secrets.token_bytes(32))"
        )
    return bytes(key)


def _mac(pause: dict[str, JsonValue], key: bytes, agent: str | None) -> str:
    body = {k: v for k, v in pause.items() if k != SIGNATURE}
    text = json.dumps(
        {"agent": agent, "pause": body}, sort_keys=True, separators=(",", ":"), allow_nan=False
    )
    return _SCHEME + hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def sign(pause: dict[str, JsonValue], key: bytes, agent: str | None) -> dict[str, JsonValue]:
    """``pause`` with its signature added (the same dict)."""
    pause[SIGNATURE] = _mac(pause, key, agent)
    return pause


def verify(pause: object, key: bytes, agent: str | None, where: str = "pause") -> None:
    """StateIntegrityError unless ``pause`` (an encoded pause) carries a valid signature."""
    if not isinstance(pause, dict):
        return  # not a pause: the decoder reports it
    given = pause.get(SIGNATURE)
    if not isinstance(given, str):
        raise StateIntegrityError(
            f"{where} is not signed, and this agent requires signed pauses (signing_key)"
        )
    if not hmac.compare_digest(given, _mac(pause, key, agent)):
        raise StateIntegrityError(
            f"{where}: the signature does not verify: the pause or its answers were changed, "
            "or it was signed with another key or for another agent"
        )
