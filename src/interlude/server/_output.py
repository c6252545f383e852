"""What the server writes out and reads in, made safe for any stored text.

Stored text (a tool's input, a reason, an answer, the audit) may hold lone surrogates (a model's
JSON ``"\\ud800"``) that cannot be encoded as UTF-8, and bidi-override or zero-width characters
that make what an approver reads differ from what runs. JSON responses are written with
``ensure_ascii`` (every such character escaped); text shown in HTML goes through
:func:`displayable`. Posted JSON is bounded in depth and may not hold lone surrogates.
"""

from __future__ import annotations

import json
import re
from typing import Any

from markupsafe import Markup
from starlette.responses import JSONResponse

from .._json import DuplicateKeyError
from .._json import loads as strict_json

__all__ = [
    "MAX_DEPTH",
    "JSON",
    "UnsafeJson",
    "check_posted",
    "displayable",
    "finalize",
    "loads",
    "scrub",
]

MAX_DEPTH = 64
"""How deeply posted JSON (an answer) may nest."""

_SURROGATE = re.compile("[\ud800-\udfff]")
_INVISIBLE = re.compile("[\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


class JSON(JSONResponse):
    """A JSON response written as ASCII: lone surrogates and every other non-ASCII character
    are escaped, so any stored text can be sent."""

    def render(self, content: Any) -> bytes:
        return json.dumps(
            content, ensure_ascii=True, allow_nan=False, separators=(",", ":")
        ).encode("ascii")


def scrub(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (so it can be encoded as UTF-8)."""
    return _SURROGATE.sub("\ufffd", text)


def displayable(text: str) -> str:
    """``text`` as shown in a page: lone surrogates as U+FFFD, bidi controls and zero-width
    characters written out as escapes (``\\u202e``), so what is read is what is stored."""
    return _INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}", scrub(text))


def finalize(value: Any) -> Any:
    """The Jinja ``finalize`` hook: every ``{{ ... }}`` output made displayable."""
    if isinstance(value, Markup):
        return Markup(displayable(str(value)))
    if isinstance(value, str):
        return displayable(value)
    return value


class UnsafeJson(ValueError):
    """Posted JSON that is not JSON, nests too deeply or holds a lone surrogate."""


def loads(text: str | bytes) -> Any:
    """``json.loads`` that raises UnsafeJson (never RecursionError) for what it cannot read,
    and for JSON that :func:`check_posted` refuses."""
    try:
        value = strict_json(text)
    except RecursionError:
        raise UnsafeJson(f"JSON nested more than {MAX_DEPTH} levels deep") from None
    except DuplicateKeyError as exc:
        raise UnsafeJson(str(exc)) from None
    except (ValueError, UnicodeDecodeError):
        raise UnsafeJson("not JSON") from None
    check_posted(value)
    return value


def check_posted(value: Any) -> None:
    """UnsafeJson if ``value`` nests more than MAX_DEPTH levels or a string (or key) in it
    holds a lone surrogate. Iterative: any depth is safe to check."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                raise UnsafeJson("JSON with a lone surrogate in a string (not Unicode text)")
        elif isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                raise UnsafeJson(f"JSON nested more than {MAX_DEPTH} levels deep")
            if isinstance(item, dict):
                stack.extend((k, depth) for k in item)
                stack.extend((v, depth + 1) for v in item.values())
            else:
                stack.extend((v, depth + 1) for v in item)
