"""The hook registry: callbacks keyed by event type, run with interrupts collected."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar, runtime_checkable

from .._interrupt import Interrupt
from ..errors import ConfigurationError, InterruptExpiredError, InterruptSignal
from ._events import BeforeToolCallEvent, BeforeToolsEvent, HookEvent

__all__ = ["HookCallback", "HookProvider", "HookRegistry"]

E = TypeVar("E", bound=HookEvent)
HookCallback = Callable[[E], Awaitable[None] | None]


@runtime_checkable
class HookProvider(Protocol):
    """Something that registers a set of callbacks, e.g. a policy or a logger."""

    def register_hooks(self, registry: HookRegistry) -> None: ...


class HookRegistry:
    """Callbacks per event type. After-events run theirs in reverse registration order."""

    def __init__(self) -> None:
        self._callbacks: dict[type[HookEvent], list[Callable[[HookEvent], object]]] = {}

    def add_callback(self, event_type: type[E], callback: HookCallback[E]) -> None:
        """Run ``callback`` (sync or async) for every event of ``event_type``."""
        if not (isinstance(event_type, type) and issubclass(event_type, HookEvent)):
            raise ConfigurationError(f"not a hook event type: {event_type!r}")
        if not callable(callback):
            raise ConfigurationError(f"hook callback is not callable: {callback!r}")
        callbacks = self._callbacks.setdefault(event_type, [])
        if event_type.reverse_order:
            callbacks.insert(0, callback)  # type: ignore[arg-type]
        else:
            callbacks.append(callback)  # type: ignore[arg-type]

    def add_hook(self, provider: HookProvider) -> None:
        """Let ``provider`` register its callbacks."""
        if not isinstance(provider, HookProvider):
            raise ConfigurationError(f"not a hook provider (no register_hooks): {provider!r}")
        provider.register_hooks(self)

    def copy(self) -> HookRegistry:
        """A registry with the same callbacks; callbacks added to either later stay its own."""
        new = HookRegistry()
        new._callbacks = {kind: list(callbacks) for kind, callbacks in self._callbacks.items()}
        return new

    def has_callbacks(self, event_type: type[HookEvent]) -> bool:
        return bool(self._callbacks.get(event_type))

    async def invoke(self, event: HookEvent) -> list[Interrupt]:
        """Run every callback for ``event``; return the interrupts they raised.

        A callback that interrupts is stopped; the others still run, so all questions of one
        step are gathered in one round. A question that expired unanswered
        (``InterruptExpiredError``) in a before-tool callback cancels the tool (the batch, for
        ``BeforeToolsEvent``) and the others still run; in any other event it propagates.
        """
        raised: list[Interrupt] = []
        for index, callback in enumerate(self._callbacks.get(type(event), ())):
            event._callback_index = index
            try:
                outcome = callback(event)
                if outcome is not None and hasattr(outcome, "__await__"):
                    await outcome
            except InterruptSignal as signal:
                raised.append(signal.interrupt)
            except InterruptExpiredError as exc:
                if not isinstance(event, BeforeToolCallEvent | BeforeToolsEvent):
                    raise
                event.cancel(_expired_message(exc))
        return raised


def _expired_message(exc: InterruptExpiredError) -> str:
    """The error result of a tool call not run because its approval expired."""
    if exc.interrupt is not None:
        return f"not run: the question {exc.interrupt.name!r} expired without an answer"
    return f"not run: a question expired without an answer ({exc})"
