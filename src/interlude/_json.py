"""Reading JSON strictly: an object that names a key twice is refused, not resolved.

``json.loads`` keeps the last of two equal keys, so ``{"approve": false, "approve": true}``
reads as true to Python while another reader (a log, an audit tool, a database's own JSON
functions) may take the first. Everything Interlude reads from outside (stored sessions, answer
bodies, the CLI's answers) goes through :func:`loads`, which raises :class:`DuplicateKeyError`
(a ``ValueError``, like every other JSON error) naming the key.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DuplicateKeyError", "PlainJson", "loads", "loads_all"]


class DuplicateKeyError(ValueError):
    """A JSON object names one key twice."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(f"the key {key[:80]!r} appears twice in one JSON object")
            seen.add(key)
    return obj


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (no NaN or Infinity)")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text[:20]} is too large for a float")
    return value


# Built once: ``json.loads`` with a hook builds a decoder (and its scanner) per call, half the
# cost of reading a short stored message. A decoder keeps no state between calls, so threads
# may share one, as they share ``json.loads``'s own default decoder.
_STRICT = json.JSONDecoder(object_pairs_hook=_object)
_NO_CONSTANTS = json.JSONDecoder(
    object_pairs_hook=_object, parse_constant=_constant, parse_float=_finite
)


def loads(text: str | bytes | bytearray, *, constants: bool = True) -> Any:
    """``json.loads``, refusing an object with a duplicate key (DuplicateKeyError); with
    ``constants=False`` also the non-standard NaN and Infinity, and numbers too large for a
    float (ValueError: a model's tool
    arguments, which no provider or person can be shown as JSON). Stores keep reading them:
    their round trip is exact. Bytes are decoded as ``json.loads`` decodes them."""
    if isinstance(text, bytes | bytearray):
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    elif not isinstance(text, str):
        raise TypeError(
            f"the JSON object must be str, bytes or bytearray, not {type(text).__name__}"
        )
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return (_STRICT if constants else _NO_CONSTANTS).decode(text)


class PlainJson(list[Any]):
    """Values read from JSON text that has no NaN, no Infinity and no number too large for a
    float (:func:`loads_all`): plain JSON by construction, so a reader need not encode them
    again to check that they are."""

    __slots__ = ()


def loads_all(texts: list[bytes] | list[str]) -> PlainJson | None:
    """``[loads(t) for t in texts]`` in one pass of the decoder (a stored conversation is read
    as one array, not a thousand calls), or None if that pass fails or does not make one
    value per text: the caller then reads them one by one with :func:`loads`, to name the one
    that is wrong (or to keep what only ``loads`` reads: NaN, Infinity, a number too large for
    a float). Bytes must be UTF-8 here (anything else takes the slow way)."""
    if not texts:
        return PlainJson()
    try:
        if type(texts[0]) is str:
            text = "[" + ",".join(texts) + "]"
        else:
            text = "[" + b",".join(texts).decode("utf-8") + "]"  # type: ignore[arg-type]
        values = _NO_CONSTANTS.decode(text)  # (a byte-order mark before a value: refused)
    except (TypeError, ValueError, RecursionError):  # not all bytes (or str), not UTF-8, bad
        return None
    return PlainJson(values) if len(values) == len(texts) else None
