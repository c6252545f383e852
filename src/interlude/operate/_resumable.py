"""What the operator floor runs: an agent, a graph or a swarm on its session, through one
protocol, so the code that operates sessions never asks which one it holds.

``Agent``, ``Graph`` and ``Swarm`` meet :class:`Resumable` as they are (a structural protocol:
none of them imports it). ``kind`` says which one it is where a door must (A2A serves agents
only), and the run's result meets :class:`Outcome` whichever it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .._interrupt import Interrupt
    from .._messages import JsonValue
    from .._result import StopReason

__all__ = ["Outcome", "Resumable"]


@runtime_checkable
class Outcome(Protocol):
    """How a run ended: ``AgentResult`` or ``MultiAgentResult``."""

    @property
    def stop_reason(self) -> StopReason: ...

    @property
    def interrupts(self) -> list[Interrupt]: ...


@runtime_checkable
class Resumable(Protocol):
    """A session the floor can start, answer, settle, recover and read: an ``Agent``, a
    ``Graph`` or a ``Swarm`` built by an :class:`~interlude.App` on its session."""

    @property
    def kind(self) -> str:
        """``"agent"``, ``"graph"`` or ``"swarm"``."""
        ...

    @property
    def session_id(self) -> str | None: ...

    @property
    def is_paused(self) -> bool:
        """Whether it waits on answers."""
        ...

    @property
    def needs_recovery(self) -> bool:
        """Whether it holds a run whose process stopped before it finished."""
        ...

    @property
    def is_running(self) -> bool: ...

    @property
    def interrupts(self) -> list[Interrupt]:
        """The questions waiting (empty when not paused)."""
        ...

    def check_resume(
        self,
        answers: Mapping[str, JsonValue],
        *,
        by: str | None = None,
        shown: Mapping[str, str] | None = None,
    ) -> None:
        """Raise what :meth:`resume_async` would refuse these answers with; change nothing."""
        ...

    async def invoke_async(self, prompt: Any, /) -> Outcome: ...

    async def resume_async(
        self,
        answers: Mapping[str, JsonValue],
        *,
        by: str | None = None,
        shown: Mapping[str, str] | None = None,
    ) -> Outcome: ...

    async def resume_expired_async(self) -> Outcome: ...

    async def recover_async(self) -> Outcome: ...

    def discard_pause(self) -> None: ...
