"""``agent.state`` as a tool body sees it: its own copy, merged at the step boundary.

A body that runs in this process gets an ``Overlay``: a copy of ``agent.state`` that records
which keys the body set and removed. What it changed comes back as a ``StateDelta`` in the
body's outcome, exactly as from a body that ran elsewhere (a durable engine's activity), and
the loop applies it when the body is done. So bodies running at the same time do not see each
other's half-done changes, and local and remote execution follow one rule. (Values inside the
state are not copied: a body that changes a nested value in place changes it at once, as
before.)
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._messages import JsonValue
    from ._executor import StateDelta

__all__ = ["BODY_STATE", "Body", "Overlay"]


class Overlay(dict[str, Any]):
    """A copy of ``agent.state`` that records the keys set and removed through it."""

    __slots__ = ("owner", "removed", "written")

    def __init__(self, owner: object, state: Mapping[str, JsonValue]) -> None:
        super().__init__(state)
        self.owner = owner
        self.written: set[str] = set()
        self.removed: set[str] = set()

    def _wrote(self, key: str) -> None:
        self.written.add(key)
        self.removed.discard(key)

    def _dropped(self, key: str) -> None:
        self.removed.add(key)
        self.written.discard(key)

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        self._wrote(key)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._dropped(key)

    def pop(self, key: str, *default: Any) -> Any:
        had = key in self
        value = super().pop(key, *default)
        if had:
            self._dropped(key)
        return value

    def popitem(self) -> tuple[str, Any]:
        key, value = super().popitem()
        self._dropped(key)
        return key, value

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return super().__getitem__(key)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other: Any) -> Overlay:  # type: ignore[override,misc]
        self.update(other)
        return self

    def clear(self) -> None:
        for key in list(self):
            self._dropped(key)
        super().clear()

    def replace_all(self, value: dict[str, JsonValue]) -> None:
        """``agent.state = value`` inside the body."""
        self.clear()
        self.update(value)

    def delta(self) -> StateDelta | None:
        """What the body changed (None: nothing)."""
        if not self.written and not self.removed:
            return None
        from ._executor import StateDelta

        changed = {k: super(Overlay, self).__getitem__(k) for k in self.written if k in self}
        return StateDelta(set=changed, removed=tuple(self.removed))


class Body:
    """The tool body running in this context: whose ``agent.state`` it sees, and its overlay
    once it has looked at the state (made then: most bodies never do)."""

    __slots__ = ("agent", "overlay")

    def __init__(self, agent: object) -> None:
        self.agent = agent
        self.overlay: Overlay | None = None

    def state(self, data: Mapping[str, JsonValue]) -> Overlay:
        """The body's own copy of the agent's ``data``."""
        if self.overlay is None:
            self.overlay = Overlay(self.agent, data)
        return self.overlay

    def delta(self) -> StateDelta | None:
        return None if self.overlay is None else self.overlay.delta()


BODY_STATE: ContextVar[Body | None] = ContextVar("interlude_body_state", default=None)
"""The tool body running in this context, if any."""
