"""The loop's side of conversation management: a model call with the agent's manager.

Before the call the manager may reduce what is sent (a summary, for instance); when the
provider reports a context overflow, it reduces and the call is made again, a bounded number of
times. A new state is saved (the journal's next checkpoint, with the agent state) before the
model is called with it, so a summary that was paid for is never asked for again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._messages import Message, Text, Usage
from .._stream import ModelResponse, ModelStop, TextDelta
from ..conversation import ConversationState
from ..errors import ConfigurationError, ContextWindowOverflowError, StateFormatError

if TYPE_CHECKING:
    from ..conversation import ConversationManager
    from ..models import Model
    from ._context import StepContext

__all__ = ["MAX_REDUCTIONS", "call_managed"]

MAX_REDUCTIONS = 8
"""Reductions (each followed by a new attempt) per model call after context overflows."""


class _Reduction:
    """The :class:`~interlude.conversation.Reduction` a manager is given."""

    __slots__ = ("overflow", "run")

    def __init__(self, run: StepContext, overflow: bool) -> None:
        self.run = run
        self.overflow = overflow

    async def ask(self, text: str, *, system: str | None = None, model: Model | None = None) -> str:
        from ._executor import LOCAL

        agent = self.run.agent
        if agent._executor is not LOCAL:
            raise ConfigurationError(
                "this conversation manager makes its own model call, which runs in this process; "
                "this agent's model calls run elsewhere (a durable engine): use SlidingWindow"
            )
        usage = Usage()
        parts: list[str] = []
        async for event in (model or agent.model).stream(
            [Message("user", [Text(text)])], [], system
        ):
            if isinstance(event, TextDelta):
                parts.append(event.text)
            elif isinstance(event, ModelStop):
                usage = event.usage
        progress = self.run.progress
        self.run.progress = progress.but(usage=progress.usage + usage)
        return "".join(parts)


async def _reduce(run: StepContext, manager: ConversationManager, overflow: bool) -> bool:
    """Let the manager reduce; a new state is saved before anything else. Whether it did."""
    agent = run.agent
    state = agent._state.conversation or ConversationState()
    new = await manager.reduce(run.base_view(), state, _Reduction(run, overflow))
    if new is None or new == state:
        return False
    _check_state(manager, new)
    run.commit(conversation=new)
    run.save_state = True
    await run.checkpoint()
    return True


def _check_state(manager: ConversationManager, new: object) -> None:
    """ConfigurationError if a manager's ``reduce`` returned what could not be saved and loaded
    again (it would make the session unloadable): checked before it is used or saved."""
    if not isinstance(new, ConversationState):
        raise ConfigurationError(
            f"{manager!r}.reduce() returned {new!r:.80}, not a ConversationState or None"
        )
    try:
        ConversationState.from_dict(new.to_dict())
    except StateFormatError as exc:
        raise ConfigurationError(f"{manager!r}.reduce() returned an invalid state: {exc}") from None


async def call_managed(run: StepContext, manager: ConversationManager) -> ModelResponse:
    """The model's reply, the conversation reduced by ``manager`` as needed."""
    await _reduce(run, manager, overflow=False)
    attempt = 0
    while True:
        try:
            return await run.call_model()
        except ContextWindowOverflowError as exc:
            attempt += 1
            if attempt <= MAX_REDUCTIONS and await _reduce(run, manager, overflow=True):
                continue
            why = (
                f"{MAX_REDUCTIONS} reductions were not enough"
                if attempt > MAX_REDUCTIONS
                else f"{manager!r} has nothing more to leave out"
            )
            sent = len(run.model_view())
            raise ContextWindowOverflowError(
                f"the conversation does not fit the model's context window and {why} "
                f"({sent} message(s) sent): {exc}",
                provider=exc.provider,
                status=exc.status,
            ) from exc
