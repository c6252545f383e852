"""JSON Schema's ``pattern`` keywords, checked in time linear in the text.

A question's ``response_schema`` may come from a store (a pause anyone who can write the store
can edit) and is checked against answers posted to the web inbox. Python's ``re`` backtracks:
``^(a+)+$`` takes seconds on 28 characters, and a check runs with the interpreter lock held,
so a thread or a timeout cannot help. The ``pattern``, ``patternProperties`` and
``additionalProperties`` keywords are therefore checked with RE2 (``google-re2``), which runs
in time linear in the text whatever the pattern. A pattern RE2 cannot run (backreferences,
lookaround) makes the schema unusable: the answer is refused with a message saying so, never
checked the slow way. So is a schema that combines ``patternProperties`` with
``unevaluatedProperties`` (jsonschema's own code would use ``re`` for it).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["UnboundedPattern", "bounded_validator", "check_patterns"]


class UnboundedPattern(ValueError):
    """A pattern that cannot be checked in bounded time (or at all) here."""


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str) -> Any:
    try:
        import re2  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - a dependency; say what is missing
        raise UnboundedPattern(
            "patterns need google-re2 (pip install google-re2) to be checked safely"
        ) from None
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        problem = f"the pattern {pattern[:80]!r} cannot be run safely ({detail})"
        raise UnboundedPattern(problem) from None


def _search(pattern: str, text: str) -> bool:
    return _compiled(pattern).search(text) is not None


def check_patterns(schema: Any) -> None:
    """UnboundedPattern if a pattern in ``schema`` cannot be checked in linear time."""
    nodes = list(_nodes(schema))
    keyed = False
    for node in nodes:
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            _compiled(pattern)
        props = node.get("patternProperties")
        if isinstance(props, Mapping):
            keyed = True
            for key in props:
                _compiled(key)
    if keyed and any("unevaluatedProperties" in node for node in nodes):
        raise UnboundedPattern(
            "patternProperties with unevaluatedProperties cannot be checked safely"
        )


def _nodes(schema: Any, depth: int = 0) -> Iterator[Mapping[str, Any]]:
    if depth > 64:
        raise UnboundedPattern("the schema nests too deeply to be checked")
    if isinstance(schema, Mapping):
        yield schema
        for value in schema.values():
            yield from _nodes(value, depth + 1)
    elif isinstance(schema, list):
        for value in schema:
            yield from _nodes(value, depth + 1)


@functools.cache
def bounded_validator() -> Any:
    """Draft 2020-12 with its pattern keywords run by RE2."""
    from jsonschema import Draft202012Validator, validators
    from jsonschema.exceptions import ValidationError

    def pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Iterator[Any]:
        if validator.is_type(instance, "string") and not _search(patrn, instance):
            yield ValidationError(f"{instance!r:.80} does not match {patrn!r}")

    def pattern_properties(validator: Any, props: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        for patrn, subschema in props.items():
            for key, value in instance.items():
                if _search(patrn, key):
                    yield from validator.descend(value, subschema, path=key, schema_path=patrn)

    def additional_properties(validator: Any, ap: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        named = schema.get("properties", {})
        patterns = list(schema.get("patternProperties", {}))
        extras = [
            k for k in instance if k not in named and not any(_search(p, k) for p in patterns)
        ]
        if validator.is_type(ap, "object"):
            for extra in extras:
                yield from validator.descend(instance[extra], ap, path=extra)
        elif not ap and extras:
            shown = ", ".join(repr(e) for e in sorted(extras))
            yield ValidationError(f"Additional properties are not allowed ({shown} unexpected)")

    return validators.extend(  # type: ignore[no-untyped-call]
        Draft202012Validator,
        {
            "pattern": pattern,
            "patternProperties": pattern_properties,
            "additionalProperties": additional_properties,
        },
    )
