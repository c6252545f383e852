"""Deep-immutable JSON values: what Interlude hands out cannot change what runs or is stored.

A tool use's input, a message's content, a question's reason and an answer are shared by the
conversation, the pause, the hook events and the caller. ``freeze`` turns such a value into
``FrozenDict`` / ``FrozenList`` all the way down: they are a ``dict`` and a ``list`` to every
reader (``json.dumps``, pydantic, ``==``, ``isinstance``), but an in-place edit raises
:class:`~interlude.errors.ReadOnlyError` at once. ``copy.copy``/``copy.deepcopy`` and ``thaw``
give plain, editable copies.
"""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["FrozenDict", "FrozenList", "freeze", "thaw"]

_HINT = (
    "is read-only: Interlude hands out the values it shows, approves and stores as read-only. "
    "Make a changed copy instead (e.g. {**value, key: new}); to change a tool call, replace it: "
    "event.tool_use = ToolUse(tu.id, tu.name, new_input)"
)


def _refuse(self: object, *_: object, **__: object) -> NoReturn:
    from .errors import ReadOnlyError

    kind = "this dict" if isinstance(self, dict) else "this list"
    raise ReadOnlyError(f"{kind} {_HINT}")


class FrozenDict(dict[str, Any]):
    """A ``dict`` that refuses in-place edits (its values are frozen too)."""

    __slots__ = ()
    __setitem__ = __delitem__ = _refuse
    clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return thaw(self)  # type: ignore[no-any-return]

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    def __repr__(self) -> str:
        return dict.__repr__(self)


class FrozenList(list[Any]):
    """A ``list`` that refuses in-place edits (its items are frozen too)."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = clear = extend = insert = pop = remove = reverse = sort = _refuse

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return thaw(self)  # type: ignore[no-any-return]

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))

    def __repr__(self) -> str:
        return list.__repr__(self)


_SCALARS = frozenset((str, int, float, bool, type(None)))


def freeze(value: Any) -> Any:
    """``value`` with every dict and list in it made read-only (the same object when it
    already is, or holds no container). Tuples keep their type, with frozen items."""
    t = type(value)
    if t is dict:
        if not value:
            return _EMPTY
        out: dict[Any, Any] = {}
        for k, v in value.items():
            out[k] = v if type(v) in _SCALARS else freeze(v)
        return FrozenDict(out)
    if t in _SCALARS or t is FrozenDict or t is FrozenList:
        return value
    if isinstance(value, dict):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return FrozenList([freeze(v) for v in value])
    if isinstance(value, tuple) and t is tuple:
        return tuple([freeze(v) for v in value])
    return value


def thaw(value: Any) -> Any:
    """A plain, editable deep copy of a (frozen) JSON value."""
    t = type(value)
    if t in _SCALARS:
        return value
    if t is FrozenDict or t is dict:
        out = {}
        for k, v in value.items():
            out[k] = v if type(v) in _SCALARS else thaw(v)
        return out
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(v) for v in value]
    if type(value) is tuple:
        return tuple(thaw(v) for v in value)
    return value


_EMPTY = FrozenDict()
