"""Starting a run: one at a time per agent, its session claimed, its task cancellable."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .._result import AgentResult
from ..errors import AgentBusyError, NotPausedError, StateFormatError
from ._loop import Run
from ._standing import check_reserved

if TYPE_CHECKING:
    from ._agent import Agent
    from ._answering import Plan
    from ._loop import Emit

__all__ = ["start"]


async def start(agent: Agent, plan: Plan, emit: Emit | None) -> AgentResult:
    """Run ``plan`` on ``agent`` to its end or its pause (see ``Run.drive``)."""
    step, progress, replay, audit = plan
    progress = progress.but(answers=progress.answers.with_clock(agent.clock))
    check_reserved(agent.state, StateFormatError)  # refused before anything is saved
    with agent._lock:
        if agent._running:
            raise AgentBusyError("the agent is already running; one run at a time")
        position = agent._state.position
        if replay and (position is None or position.step is not step):
            raise NotPausedError("the pause changed before the resume started")
        agent._running = True
        agent._cancel_requested = False
        agent._loop = asyncio.get_running_loop()
    link = agent._session
    run = Run(agent, progress, emit, link)
    agent._live = run.messages  # a look at the agent sees the run's conversation
    run.step = step
    run.audit = audit
    try:
        if link is not None:  # the claim lands with the run's first checkpoint
            link.check_not_running()
            if link.claim is not None:  # moved away, or being moved: say where
                from ._moved import check_not_moved

                check_not_moved(agent)
            link.claim_for(run)
        with agent._lock:
            observer = run.observer
            task = asyncio.ensure_future(
                run.drive(step, replay)
                if observer is None
                else observer.observe_run(run.info(replay), run.traced(step, replay))
            )
            agent._task = task
            if agent._cancel_requested:  # cancel() came while the session was claimed
                task.cancel()
        try:
            return await task
        except asyncio.CancelledError:
            if link is not None and link.lost is not None:
                raise link.lost from None  # another process took the session over
            if run.started:
                raise
            # Cancelled before its first step: nothing ran, nothing was saved.
            current = asyncio.current_task()
            if agent._cancel_requested and (current is None or not current.cancelling()):
                return AgentResult(stop_reason="cancelled", interrupts=agent.interrupts)
            raise
    finally:
        if link is not None:
            await link.stop_renewing()
        with agent._lock:
            agent._running = False
            agent._live = None
            agent._task = agent._loop = None
            agent._cancel_requested = False
