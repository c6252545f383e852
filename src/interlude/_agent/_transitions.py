"""How an agent's standing changes between runs: the loop's transitions outside a run.

An agent stands somewhere: its conversation, ``agent.state`` and ``_pause`` (a pause with
questions, a stopped run's journal, or nothing). During a run only the loop (``_loop.Run``)
changes them; between runs only these functions do: adopting a decoded state (import or a
session's load), discarding a pause, putting back a pause a run did not get past, and closing
what a process killed before the journal existed left open. The session link only loads and
saves; it never writes the agent.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from .._sync import run_sync
from ..errors import StateMismatchError
from ._results import closing_message
from ._state import AfterModelCall, outstanding_batch

if TYPE_CHECKING:
    from ._agent import Agent
    from ._codec import AgentState
    from ._state import Pause, Step

__all__ = ["adopt", "check_fits", "close_pre_journal_crash", "discard", "put_back"]


def adopt(agent: Agent, loaded: AgentState) -> None:
    """Take a decoded state as the agent's own, once its pause is known to fit the agent;
    nothing changes if it does not (StateMismatchError)."""
    if loaded.pause is not None:
        check_fits(agent, loaded.pause.step, loaded.tools)
    from ..conversation import STATE_KEY, ConversationState

    state = dict(loaded.state)
    saved = state.pop(STATE_KEY, None)
    conversation = None if saved is None else ConversationState.from_dict(saved)
    agent._messages[:] = loaded.messages
    agent.state = state
    agent._conversation_state = conversation
    agent._pause = loaded.pause
    agent._audit[:] = loaded.audit


def check_fits(agent: Agent, step: Step, had_tools: list[str]) -> None:
    """StateMismatchError naming the tool if carrying on from ``step`` needs one the agent
    lacks: one the run had selected (also by a hook), or one the model asked for that the
    saving agent had (else the model asked for a tool that never existed)."""
    needed: list[tuple[str, str, bool]] = []  # (tool name, tool use id, selected)
    batch = outstanding_batch(step)
    if batch is not None:
        for call in batch.calls:
            if call.phase == "done":
                continue
            if call.phase in ("running", "body", "after"):
                if call.tool_name is not None:
                    needed.append((call.tool_name, call.tool_use.id, True))
            else:
                needed.append((call.tool_use.name, call.tool_use.id, False))
    elif isinstance(step, AfterModelCall) and step.response is not None:
        needed = [(t.name, t.id, False) for t in step.response.message.tool_uses]
    for name, tool_use_id, selected in needed:
        if (selected or name in had_tools) and name not in agent._tools:
            raise StateMismatchError(
                f"the paused run needs tool {name!r} (tool use {tool_use_id!r}), which this "
                f"agent does not have (tools: {', '.join(agent._tools) or 'none'})"
            )


def discard(agent: Agent) -> None:
    """Drop the pause or stopped run: its open tool calls are closed as cancelled (a started
    call "may have had effects"), in memory and in the session; nothing changes on error."""
    pause = agent._pause
    assert pause is not None
    link = agent._session
    if link is not None:
        link.check_not_running()
    before = len(agent._messages)
    what = "pause" if pause.interrupts else "stopped run"
    message = closing_message(agent._messages, pause.step, f"cancelled: the {what} was discarded")
    if message is not None:
        agent._messages.append(message)
    if link is not None:
        try:
            run_sync(link.save(agent, None, state=True))
        except BaseException:
            del agent._messages[before:]
            raise
    agent._pause = None


async def put_back(agent: Agent, pause: Pause | None) -> None:
    """A run that did not get past the pause it resumed leaves it as it was, also in the
    store (a failure to save that is not the run's error)."""
    agent._pause = pause
    if agent._session is not None:
        with contextlib.suppress(Exception):
            await agent._session.save(agent, pause, state=True)


def close_pre_journal_crash(agent: Agent, kept: Pause | None) -> None:
    """A stored conversation that ends in unanswered tool uses with no journal comes from a
    run killed mid-batch before the journal existed: record those calls as not finished.
    ``kept`` is the pause that run had resumed, if any: calls it had finished keep their
    results (they are never run again)."""
    reason = (
        "not finished: the run stopped (its process ended) before this tool call completed; "
        "it may or may not have run"
    )
    message = closing_message(agent._messages, None if kept is None else kept.step, reason)
    if message is not None:
        agent._messages.append(message)
