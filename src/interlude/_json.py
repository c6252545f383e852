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

__all__ = ["DuplicateKeyError", "loads"]


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


def loads(text: str | bytes | bytearray, *, constants: bool = True) -> Any:
    """``json.loads``, refusing an object with a duplicate key (DuplicateKeyError); with
    ``constants=False`` also the non-standard NaN and Infinity, and numbers too large for a
    float (ValueError: a model's tool
    arguments, which no provider or person can be shown as JSON). Stores keep reading them:
    their round trip is exact."""
    if constants:
        return json.loads(text, object_pairs_hook=_object)
    return json.loads(
        text, object_pairs_hook=_object, parse_constant=_constant, parse_float=_finite
    )
