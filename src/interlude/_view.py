"""What hooks and tools see of the agent that runs them: a read-only view (``agent.state`` aside).

Hook events (``event.agent``) and the tool context (``context.agent``) are typed with this
protocol, not the concrete ``Agent``: what they may read is the conversation (read-only), the
questions and the audit trail (copies), the agent's name, tools, model and clock, and
``agent.state``, the one thing they may change (it is saved at the step boundary).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ._audit import AuditEntry
    from ._interrupt import Interrupt
    from ._messages import JsonValue, Message
    from ._tools import AgentTool

__all__ = ["AgentView"]


class AgentView(Protocol):
    """The agent as its hooks and tools see it."""

    state: dict[str, JsonValue]
    """The agent's own data; changes are saved with the run."""
    clock: Callable[[], float]
    model: Any
    system_prompt: str | None

    @property
    def name(self) -> str | None: ...

    @property
    def messages(self) -> list[Message]:
        """The conversation (read-only)."""
        ...

    @property
    def tools(self) -> dict[str, AgentTool]: ...

    @property
    def session_id(self) -> str | None: ...

    @property
    def run_session_id(self) -> str | None:
        """The session its calls belong to (a durable engine's run included)."""
        ...

    @property
    def interrupts(self) -> list[Interrupt]: ...

    @property
    def audit(self) -> list[AuditEntry]: ...
