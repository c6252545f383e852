"""Signed pauses: an HMAC over a pause (its step, progress, answers and questions) and the
conversation it belongs to.

With a signing key, every pause an agent exports or saves carries ``signature``, and a pause
that does not verify with the key is refused (StateIntegrityError) before anything is loaded.
The MAC covers the encoded pause, the agent's name and a digest of the conversation up to the
pause (a hash chain over its messages, extended at each save without reading the old ones
again): a signed pause spliced onto another conversation (an older journal put back beside a
conversation cut short, or the other way round) does not verify. It does not cover the audit
trail (see ``_audit``'s chain), it cannot tell a whole session put back as it was earlier
(pause and conversation together: tools de-duplicate that at the effect with
``ToolContext.idempotency_key``), and it proves nothing against someone who holds the key.
Pauses signed by versions before the conversation was covered (scheme ``hmac-sha256:``) still
verify as they were signed; the next save signs them anew, covering it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..errors import ConfigurationError, StateIntegrityError

if TYPE_CHECKING:
    from .._messages import JsonValue

__all__ = ["NO_MESSAGES", "SIGNATURE", "as_key", "chain", "sign", "verify"]

SIGNATURE = "signature"
_SCHEME = "hmac-sha256+conversation:"
_LEGACY = "hmac-sha256:"  # before the conversation was covered
NO_MESSAGES = ""
"""The digest of an empty conversation (where a chain starts)."""


def chain(digest: str, messages: Iterable[JsonValue]) -> str:
    """The conversation digest ``digest`` extended by ``messages`` (their JSON data): each
    link hashes the previous digest and one message's canonical JSON."""
    for message in messages:
        text = json.dumps(message, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        digest = hashlib.sha256(f"{digest}\n{text}".encode()).hexdigest()
    return digest


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


def _mac(
    pause: dict[str, JsonValue], key: bytes, agent: str | None, conversation: str | None
) -> str:
    body = {k: v for k, v in pause.items() if k != SIGNATURE}
    signed: dict[str, JsonValue] = {"agent": agent, "pause": body}
    if conversation is not None:
        signed["conversation"] = conversation
    text = json.dumps(signed, sort_keys=True, separators=(",", ":"), allow_nan=False)
    scheme = _LEGACY if conversation is None else _SCHEME
    return scheme + hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def sign(
    pause: dict[str, JsonValue], key: bytes, agent: str | None, conversation: str
) -> dict[str, JsonValue]:
    """``pause`` with its signature added (the same dict), for the agent named ``agent`` and
    the conversation whose digest (``chain``) is ``conversation``."""
    pause[SIGNATURE] = _mac(pause, key, agent, conversation)
    return pause


def verify(
    pause: object,
    key: bytes,
    agent: str | None,
    conversation: str,
    where: str = "pause",
) -> None:
    """StateIntegrityError unless ``pause`` (an encoded pause) carries a valid signature for
    the agent named ``agent`` and the conversation whose digest is ``conversation``."""
    if not isinstance(pause, dict):
        return  # not a pause: the decoder reports it
    given = pause.get(SIGNATURE)
    if not isinstance(given, str):
        raise StateIntegrityError(
            f"{where} is not signed, and this agent requires signed pauses (signing_key)"
        )
    legacy = given.startswith(_LEGACY)
    expected = _mac(pause, key, agent, None if legacy else conversation)
    if not hmac.compare_digest(given, expected):
        raise StateIntegrityError(
            f"{where}: the signature does not verify: the pause, its answers or the "
            "conversation it belongs to were changed, or it was signed with another key or for "
            "another agent"
        )
