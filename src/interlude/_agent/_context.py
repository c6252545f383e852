"""What a step's helpers see of the run that works the step.

Tool batches (``_batch``), structured output (``_output``) and conversation managers
(``_conversation``) do their part of a step through this protocol, not through the loop's
``Run`` itself: the agent and the invocation's progress, the journal's checkpoint, asking an
event's callbacks, committing a change of where the agent stands, appending a message, the
model call and the views of the conversation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .._audit import AuditEntry
    from .._interrupt import Interrupt
    from .._messages import Message
    from .._stream import ModelResponse, StreamEvent
    from ..hooks import HookEvent, HookRegistry
    from ._agent import Agent
    from ._observe import Observer
    from ._persist import SessionLink
    from ._spec import AgentSpec
    from ._state import MessageAdded, Progress, Step, ToolBatch, ToolCall

__all__ = ["StepContext"]

E = TypeVar("E", bound="HookEvent")


class StepContext(Protocol):
    """The run, as the helpers of its steps use it."""

    agent: Agent
    spec: AgentSpec
    """The agent's configuration as the run started."""
    hooks: HookRegistry
    progress: Progress
    emit: Callable[[StreamEvent], None] | None
    journal: SessionLink | None
    observer: Observer | None
    step: Step | None
    in_flight: int
    judged: set[str] | None
    progressed: bool
    save_state: bool

    async def checkpoint(self, starts: list[str] | None = None) -> None: ...

    async def ask(
        self, kind: type[E], scope: str, replay: bool, *args: Any
    ) -> tuple[E | None, list[Interrupt]]: ...

    def commit(self, **changes: Any) -> None: ...

    def record(self, entry: AuditEntry) -> None: ...

    def session_decisions(self) -> Mapping[str, tuple[bool, str | None]]: ...

    def batch(self) -> ToolBatch: ...

    def put_call(self, call: ToolCall) -> ToolCall: ...

    def put_batch(self, batch: ToolBatch) -> None: ...

    async def append(self, message: Message, then: Step) -> MessageAdded: ...

    async def call_model(self) -> ModelResponse: ...

    def base_view(self) -> list[Message]: ...

    def model_view(self) -> list[Message]: ...

    def tool_use_ids(self) -> dict[str, int]: ...
