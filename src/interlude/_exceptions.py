"""Exceptions as JSON, so that a replayed hook sees the same exception type in another process."""

from __future__ import annotations

import contextlib
import json
import sys
import traceback
from typing import Any

from ._messages import JsonValue, _obj, _str
from .errors import ReplayedException

__all__ = ["exception_from_dict", "exception_to_dict"]

_MAX_TRACEBACK = 8000


def exception_to_dict(exc: BaseException) -> dict[str, JsonValue]:
    """The exception's type (``module:qualname``), message, args (if JSON) and traceback."""
    cls = type(exc)
    args: list[JsonValue] | None
    try:
        args = json.loads(json.dumps(list(exc.args)))
    except (TypeError, ValueError):
        args = None
    text = "".join(traceback.format_exception(exc))[-_MAX_TRACEBACK:]
    attrs: dict[str, JsonValue] = {}
    for key, value in vars(exc).items():  # e.g. a ModelError's status and retryable
        if key.startswith("__"):  # Python's own (__notes__, ...), not the exception's data
            continue
        try:
            attrs[key] = json.loads(json.dumps(value))
        except (TypeError, ValueError):
            continue
    return {
        "type": f"{cls.__module__}:{cls.__qualname__}",
        "message": str(exc),
        "args": args,
        "attrs": attrs,
        "traceback": text,
    }


def exception_from_dict(data: Any, where: str = "exception") -> BaseException:
    """Rebuild the exception: its own class if rebuildable, else a :class:`ReplayedException`.

    The class is looked up in modules the process has already imported (the agent's tools
    import theirs), never imported because saved state names it.
    """
    d = _obj(data, where)
    type_name = _str(d, "type", where)
    message = _str(d, "message", where)
    raw_text = d.get("traceback")
    text = raw_text if isinstance(raw_text, str) else ""
    args = d.get("args")
    rebuilt = _rebuild(type_name, args, message)
    if rebuilt is None:
        return ReplayedException(type_name.replace(":", "."), message, text)
    attrs = d.get("attrs")
    if isinstance(attrs, dict):
        for key, value in attrs.items():
            with contextlib.suppress(Exception):
                setattr(rebuilt, key, value)
    if text:
        rebuilt.add_note(f"Raised before the pause:\n{text}")
    return rebuilt


def _rebuild(type_name: str, args: Any, message: str) -> BaseException | None:
    module_name, _, qualname = type_name.partition(":")
    if not qualname or not isinstance(args, list):
        return None
    try:
        # Only classes of modules that are already imported: state data never triggers an import.
        obj: Any = sys.modules[module_name]
        for part in qualname.split("."):
            obj = getattr(obj, part)
        if not (isinstance(obj, type) and issubclass(obj, BaseException)):
            return None
        exc = obj(*args)
    except Exception:
        return None
    return exc if str(exc) == message else None
