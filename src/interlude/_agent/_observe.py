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

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .._messages import ToolResult, ToolUse
    from .._result import AgentResult
    from .._stream import ModelResponse
    from .._tools._spec import AgentTool
    from ._agent import Agent
    from ._loop import Run
    from ._state import Step, ToolCall

__all__ = ["Observer", "install", "installed", "observer_for"]


class Observer(Protocol):
    """Wraps a run, its model calls and its tool bodies. Each method gets the work as a
    coroutine (or, for a run, what to drive) and must await it exactly once, returning or
    raising what it does."""

    def observe_run(self, run: Run, step: Step, replay: bool) -> Coroutine[Any, Any, AgentResult]:
        """``run.drive(step, replay)``, observed: the run starts at ``step`` (``replay``: it
        carries on a pause or a stopped run)."""
        ...

    def observe_model(
        self, run: Run, call: Coroutine[Any, Any, ModelResponse]
    ) -> Coroutine[Any, Any, ModelResponse]:
        """One model call of ``run``."""
        ...

    def observe_tool(
        self,
        run: Run,
        call: ToolCall,
        tool: AgentTool,
        tool_use: ToolUse,
        body: Coroutine[Any, Any, ToolResult],
    ) -> Coroutine[Any, Any, ToolResult]:
        """One tool body: ``tool`` run on ``tool_use`` (``call`` as the batch holds it). The
        body may raise InterruptSignal (the tool asked a question) or fail."""
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
    observer = agent._observer if agent._observer is not None else _installed
    if observer is None:
        return None
    from ._executor import LOCAL

    return observer if agent._executor is LOCAL else None
