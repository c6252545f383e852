"""JSON Schemas as providers' structured-output modes take them, and the ``OutputSchema`` a run
gives a model that constrains its reply natively.

Providers that constrain a reply to a schema want every object closed (``additionalProperties:
false``); OpenAI's strict mode also wants every property required. The answer is still checked
against the run's own schema afterwards, so a provider that enforces less loses nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._messages import JsonValue

__all__ = ["OutputSchema", "closed_objects", "strict_ready"]


@dataclass(frozen=True, slots=True)
class OutputSchema:
    """What a model's final reply must be when a run asks for structured output: JSON text
    meeting ``schema`` (always an object schema). ``name`` and ``description`` are what
    providers call the response format."""

    name: str
    schema: dict[str, JsonValue]
    description: str | None = None


_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SUBSCHEMAS = ("items", "additionalProperties", "not", "if", "then", "else", "contains")


def closed_objects(schema: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """A copy of ``schema`` in which every object schema that does not say whether it takes
    other properties takes none."""
    closed: dict[str, JsonValue] = _walk(schema, _close)
    return closed


def strict_ready(schema: dict[str, JsonValue]) -> bool:
    """Whether ``closed_objects(schema)`` meets OpenAI's strict mode: every object closed and
    all its properties required (optional fields and free-form maps are not)."""
    ok = True

    def check(node: dict[str, Any]) -> dict[str, Any]:
        nonlocal ok
        if _is_object(node):
            props = node.get("properties", {})
            closed = node.get("additionalProperties", False) is False
            required = set(node.get("required", []))
            if not closed or not isinstance(props, dict) or set(props) != required:
                ok = False
        return node

    _walk(closed_objects(schema), check)
    return ok


def _is_object(node: dict[str, Any]) -> bool:
    return node.get("type") == "object" or "properties" in node


def _close(node: dict[str, Any]) -> dict[str, Any]:
    if _is_object(node) and "additionalProperties" not in node:
        node["additionalProperties"] = False
    return node


def _walk(schema: Any, visit: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    node: dict[str, Any] = dict(schema)
    for key in _SUBSCHEMA_LISTS:
        if isinstance(node.get(key), list):
            node[key] = [_walk(s, visit) for s in node[key]]
    for key in _SUBSCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            node[key] = {k: _walk(s, visit) for k, s in node[key].items()}
    for key in _SUBSCHEMAS:
        if isinstance(node.get(key), dict):
            node[key] = _walk(node[key], visit)
    return visit(node)
