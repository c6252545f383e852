"""The observer seam: what a watcher of runs (tracing) is shown, and when.

The loop hands an observer three things to wrap: a whole run (a prompt's, a resume's or a
recovery's), each model call and each tool body. With no observer (the default) the loop
does not build anything for it: a run looks its observer up once, and a model call or tool
body costs one attribute check. ``interlude.otel`` holds the OpenTelemetry observer; this
module imports nothing of it.

Runs whose model calls and tools run elsewhere (a durable engine's workflow code, with its
own executor) are never observed here: their code must stay deterministic, and the engine
traces them itself.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from .._audit import AuditEntry
    from .._messages import Usage
    from .._result import AgentResult
    from .._stream import ModelResponse
    from ..models import Model
    from ._agent import Agent
    from ._executor import ToolOutcome, ToolRequest

__all__ = ["Observer", "RunInfo", "install", "installed", "observer_for"]


@dataclass(frozen=True, kw_only=True, slots=True)
class RunInfo:
    """What an observer is told about a run as it starts."""

    kind: Literal["prompt", "resume", "recover"]
    agent_name: str | None
    session_id: str | None
    model: Model
    traceparent: str | None
    """The trace context of the invocation's latest traced run (a pause or a stopped run)."""
    answered: tuple[AuditEntry, ...]
    """The answers this run applies."""
    usage: Usage
    """The invocation's token usage when the run starts."""
    usage_now: Callable[[], Usage] = field(repr=False, compare=False)
    """The invocation's token usage as the run stands (also after it failed)."""


class Observer(Protocol):
    """Wraps a run, its model calls and its tool bodies. Each method gets the work as a
    coroutine (or, for a run, what to drive) and must await it exactly once, returning or
    raising what it does."""

    def observe_run(
        self, info: RunInfo, drive: Callable[[str | None], Coroutine[Any, Any, AgentResult]]
    ) -> Coroutine[Any, Any, AgentResult]:
        """The run, observed: ``drive(traceparent)`` runs it; ``traceparent`` (the observer's
        own trace context for it, or None) is kept with its pause or journal, so the run that
        carries it on is told it in its ``RunInfo``."""
        ...

    def observe_model(
        self, model: Model, call: Coroutine[Any, Any, ModelResponse]
    ) -> Coroutine[Any, Any, ModelResponse]:
        """One model call (with the conversation manager's reductions, if any)."""
        ...

    def observe_tool(
        self, request: ToolRequest, body: Coroutine[Any, Any, ToolOutcome]
    ) -> Coroutine[Any, Any, ToolOutcome]:
        """One tool body, as the executor runs it: what it came to, or the exception of an
        executor that failed."""
        ...


_installed: Observer | None = None


def install(observer: Observer | None) -> None:
    """Make ``observer`` every agent's (None: no agent's but those with their own)."""
    global _installed
    _installed = observer


def installed() -> Observer | None:
    """The process-wide observer, if any."""
    return _installed


def observer_for(agent: Agent) -> Observer | None:
    """The observer of ``agent``'s next run: its own, else the process-wide one; none when
    its model calls and tools run elsewhere than in this process."""
    observer = agent.observer if agent.observer is not None else _installed
    if observer is None:
        return None
    from ._executor import LOCAL

    return observer if agent._executor is LOCAL else None
