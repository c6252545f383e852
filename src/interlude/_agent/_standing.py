"""Where an agent stands: one frozen value, committed in one place.

An agent's conversation, its saved data (``agent.state`` as last committed), the conversation
manager's state, its position (a pause with questions, the journal of a run that stopped, or
nothing) and its audit trail are one ``AgentState``. It is never changed, only replaced:
``Agent._commit`` is the one place that replaces it, called by the loop during a run and by the
transitions (``_transitions``) between runs. The session link saves such a value; it never reads
or writes the agent.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any, NamedTuple, overload

from .._frozen import FrozenDict

if TYPE_CHECKING:
    from .._audit import AuditEntry
    from .._messages import JsonValue, Message
    from ..conversation import ConversationState
    from ._state import Position

__all__ = ["AgentState", "Conversation", "Identity", "check_reserved"]

_EMPTY: Mapping[str, Any] = FrozenDict()


@dataclass(frozen=True, slots=True)
class Identity:
    """Who saves a state: the agent's name, its signing key and its tools' names."""

    name: str | None
    key: bytes | None
    tools: tuple[str, ...]


def check_reserved(data: Mapping[str, JsonValue], error: type[Exception]) -> None:
    """``error`` if ``data`` uses the key reserved for the conversation manager's state."""
    if not data:  # (most agents keep no state: no import on the hot path)
        return
    from ..conversation import STATE_KEY

    if STATE_KEY in data:
        raise error(
            f"agent.state[{STATE_KEY!r}] is reserved for the conversation manager's state; "
            f"use another key"
        )


class Conversation(Sequence["Message"]):
    """The first ``n`` messages of a list that is only ever appended to (a run's own
    conversation): an immutable value made without copying the list, so committing where a
    long conversation stands costs the same as committing a short one."""

    __slots__ = ("_items", "_n")

    def __init__(self, items: list[Message], n: int | None = None) -> None:
        self._items = items
        self._n = len(items) if n is None else n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Message, ...]: ...
    def __getitem__(self, index: int | slice) -> Message | tuple[Message, ...]:
        n = self._n
        if isinstance(index, slice):
            start, stop, step = index.indices(n)
            return tuple(self._items[start:stop:step])
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("conversation index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[Message]:
        return islice(self._items, self._n)

    def __add__(self, other: Sequence[Message]) -> tuple[Message, ...]:
        return (*self, *other)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(other) == self._n and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Conversation({list(self)!r})"


class AgentState(NamedTuple):
    """An agent's standing. ``messages`` are the conversation; ``data`` is ``agent.state`` as
    committed (read-only); ``conversation`` what the conversation manager decided (None:
    nothing yet); ``position`` the pause or the stopped run's journal (None: neither);
    ``audit`` every answer applied, oldest first.

    An immutable named tuple rather than a frozen dataclass: the loop commits one at every
    step boundary, and a tuple is made five times faster (0.4 against 2 us)."""

    messages: Sequence[Message] = ()
    """A tuple, or a ``Conversation`` (a run's own list, as far as it went)."""
    data: Mapping[str, JsonValue] = _EMPTY
    conversation: ConversationState | None = None
    position: Position | None = None
    audit: tuple[AuditEntry, ...] = ()

    @property
    def paused(self) -> bool:
        """Whether it waits on answers."""
        return self.position is not None and bool(self.position.interrupts)

    @property
    def stopped(self) -> bool:
        """Whether it holds a run that stopped before it finished (its journal)."""
        return self.position is not None and not self.position.interrupts

    def but(self, **changes: Any) -> AgentState:
        """This state with some fields changed."""
        return self._replace(**changes)

    def with_messages(self, messages: Sequence[Message]) -> AgentState:
        """The state with this conversation (the loop's commit, most often: kept cheap)."""
        return tuple.__new__(AgentState, (messages, *self[1:]))

    def appended(self, *messages: Message) -> AgentState:
        """The state with ``messages`` added to the conversation."""
        return AgentState(
            (*self.messages, *messages), self.data, self.conversation, self.position, self.audit
        )

    def at(self, position: Position | None) -> AgentState:
        """The state standing at ``position``."""
        return AgentState(self.messages, self.data, self.conversation, position, self.audit)

    def saved_data(self) -> dict[str, JsonValue]:
        """``data`` as it is saved: with the conversation manager's state, if any, under its
        reserved key (split off again when the state is loaded)."""
        if self.conversation is None:
            return dict(self.data)
        from ..conversation import STATE_KEY

        return {**self.data, STATE_KEY: self.conversation.to_dict()}
