"""How an agent's standing changes between runs: the loop's transitions outside a run.

An agent stands somewhere (an ``AgentState``: its conversation, committed data, the
conversation manager's state, a pause with questions or a stopped run's journal, the audit
trail). During a run only the loop (``_loop.Run``) commits a new one; between runs only these
functions do: adopting a decoded state (import or a session's load), discarding a pause,
putting back a pause a run did not get past, and closing what a process killed before the
journal existed left open. Each new standing is a pure function of the old one (``adopted``,
``discarded``, ...); ``Agent._commit`` makes it the agent's. The session link only loads and
saves a given state; it never writes the agent. A discarded pause lets go of what its calls
hold elsewhere (:class:`Abandonable` tools: an MCP server's task) once it is saved.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .._frozen import freeze
from .._messages import Message
from .._sync import run_sync
from ..errors import AgentBusyError, AgentPausedError, ConfigurationError, StateMismatchError
from ._results import closing_message
from ._standing import AgentState
from ._state import AfterModelCall, outstanding_batch

if TYPE_CHECKING:
    from .._messages import JsonValue, ToolUse
    from ..sessions import StoredSession
    from ._agent import Agent
    from ._codec import Decoded
    from ._persist import SessionLink
    from ._state import Position, Step

__all__ = [
    "ABANDON_TIMEOUT",
    "Abandonable",
    "adopt",
    "adopt_stored",
    "adopted",
    "check_fits",
    "close_pre_journal_crash",
    "discard",
    "discard_async",
    "discarded",
    "forget",
    "put_back",
    "replace_conversation",
]


def adopt(agent: Agent, loaded: Decoded) -> None:
    """Take a decoded state as the agent's own, once its pause is known to fit the agent;
    nothing changes if it does not (StateMismatchError)."""
    if loaded.pause is not None:
        check_fits(agent, loaded.pause.step, loaded.tools)
    state, data = adopted(loaded)
    agent._commit(state)
    agent.state = data


def adopted(loaded: Decoded) -> tuple[AgentState, dict[str, JsonValue]]:
    """The standing a decoded state gives, and ``agent.state`` (the conversation manager's
    state split off from it)."""
    from ..conversation import STATE_KEY, ConversationState

    data = dict(loaded.state)
    saved = data.pop(STATE_KEY, None)
    state = AgentState(
        messages=tuple(loaded.messages),
        data=freeze(data),
        conversation=None if saved is None else ConversationState.from_dict(saved),
        position=loaded.pause,
        audit=tuple(loaded.audit),
    )
    return state, data


def adopt_stored(agent: Agent, link: SessionLink, stored: StoredSession | None) -> None:
    """Load the agent's session from what the store holds (``stored``); nothing changes on
    error (a corrupt, forged or foreign session)."""
    with agent._load_lock:  # one loader at a time (a sync property read from another thread)
        if agent._unloaded:
            _adopt_stored(agent, link, stored)


def _adopt_stored(agent: Agent, link: SessionLink, stored: StoredSession | None) -> None:
    loaded = link.decode(stored, agent._spec.signing_key, agent.name)
    if agent.name is not None and link.agent_name not in (None, agent.name):
        raise ConfigurationError(
            f"session {link.session_id!r} belongs to agent {link.agent_name!r}, not {agent.name!r}"
        )
    if loaded is not None:
        if agent._state.messages:
            raise ConfigurationError(
                f"session {link.session_id!r} already holds a conversation; do not pass messages="
            )
        agent._unloaded = False
        try:
            adopt(agent, loaded)
        except BaseException:
            agent._unloaded = True
            raise
        if agent._state.position is None:
            close_pre_journal_crash(agent, link.legacy_resumed)
    agent._unloaded = False


def replace_conversation(agent: Agent, new: list[Message]) -> None:
    """A new conversation, between runs, for an agent without a session (ConfigurationError
    with one: a session's conversation is append-only); what the conversation manager decided
    about the old one goes with it."""
    if any(not isinstance(m, Message) for m in new):
        raise ConfigurationError("messages must be Message objects")
    if agent._running:
        raise AgentBusyError("the conversation cannot be replaced while a run is going")
    if agent._session is not None:
        raise ConfigurationError(
            f"the conversation of session {agent._session.session_id!r} cannot be replaced: "
            "a session's conversation is append-only (start a new session instead)"
        )
    if agent._loaded().position is not None:
        raise AgentPausedError(
            "the conversation cannot be replaced while the agent is paused or holds a "
            "stopped run: resume, recover or discard it first"
        )
    # A new conversation: what the conversation manager decided was about the old one.
    agent._commit(agent._loaded().but(messages=tuple(new), conversation=None))


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


_log = logging.getLogger("interlude.agent")

ABANDON_TIMEOUT = 5.0
"""Seconds a discard waits at most for the tools letting go of its calls (:class:`Abandonable`)."""


@runtime_checkable
class Abandonable(Protocol):
    """A tool whose call, paused inside its body, holds something elsewhere that its
    checkpoint names (an MCP server's task): told when that call is dropped with its pause
    (``discard_pause``), so it can let go of it (cancel the task). Best effort: the pause is
    already gone; what it raises is logged, and it is not waited for past
    :data:`ABANDON_TIMEOUT`."""

    async def abandon(self, tool_use: ToolUse, checkpoint: JsonValue) -> None: ...


def discard(agent: Agent) -> None:
    """Drop the pause or stopped run: its open tool calls are closed as cancelled (a started
    call "may have had effects"), in memory and in the session; nothing changes on error.
    Then the tools of calls paused inside their body are told (:class:`Abandonable`)."""
    run_sync(discard_async(agent, "discarded"))


async def discard_async(agent: Agent, why: str) -> None:
    """:func:`discard`, from async code; ``why`` ends the closing results' reason ("cancelled:
    the pause was <why>")."""
    link = agent._session
    if link is not None:
        link.check_not_running()
    dropped = agent._state.position
    new = agent._with_data(discarded(agent._state, why))
    if link is not None:
        await link.save(agent._identity(), new, None, data=True)
    agent._commit(new)
    if dropped is not None:
        abandoning = _abandoning(agent, dropped)
        if abandoning:
            await _abandon(abandoning)


def _abandoning(agent: Agent, dropped: Position) -> list[tuple[Abandonable, ToolUse, str]]:
    """The calls of a dropped pause that stopped inside an :class:`Abandonable` tool's body
    with a checkpoint: (the tool, the call as it ran, the checkpoint's JSON text)."""
    batch = outstanding_batch(dropped.step)
    out: list[tuple[Abandonable, ToolUse, str]] = []
    for call in () if batch is None else batch.calls:
        if call.phase not in ("body", "running") or call.checkpoint is None:
            continue
        tool = call.tool
        if tool is None and call.tool_name is not None:  # paused in another process
            tool = agent.spec.tools.get(call.tool_name)
        if isinstance(tool, Abandonable):
            out.append((tool, call.active_use or call.tool_use, call.checkpoint))
    return out


async def _abandon(calls: list[tuple[Abandonable, ToolUse, str]]) -> None:
    """Tell each tool its call was dropped, all at once, for :data:`ABANDON_TIMEOUT` at most;
    a failure is logged (the discard stands)."""
    import asyncio
    import json

    async def one(tool: Abandonable, use: ToolUse, checkpoint: str) -> None:
        try:
            await tool.abandon(use, json.loads(checkpoint))
        except Exception:
            _log.warning("tool %r could not let go of call %r", use.name, use.id, exc_info=True)

    try:
        await asyncio.wait_for(asyncio.gather(*(one(*call) for call in calls)), ABANDON_TIMEOUT)
    except TimeoutError:
        _log.warning(
            "tools did not let go of %d dropped call(s) in %g s", len(calls), ABANDON_TIMEOUT
        )


def forget(agent: Agent, tool: str | None, by: str) -> None:
    """Forget the remembered approval decisions (of ``tool``, or all): an audit entry says so
    (session decisions are read from the trail) and the paused run's own are dropped; saved
    at once. Nothing changes on error."""
    from types import MappingProxyType

    from .._audit import AuditEntry, chained
    from ._approval import FORGET
    from ._state import Position

    link = agent._session
    if link is not None:
        link.check_not_running()
    state = agent._state
    entry = AuditEntry(
        interrupt_id="", name=FORGET, answer={"tool": tool}, by=by, at=agent.clock(), shown=""
    )
    new = state.but(
        audit=(*state.audit, *chained(state.audit, [entry], agent._key, agent.session_id))
    )
    position = new.position
    if position is not None and position.progress.decisions:
        kept = {k: v for k, v in position.progress.decisions.items() if tool not in (None, k)}
        progress = position.progress.but(decisions=MappingProxyType(kept))
        new = new.at(Position(position.step, position.interrupts, progress))
    new = agent._with_data(new)
    if link is not None:
        run_sync(link.save(agent._identity(), new, new.position, data=True))
    agent._commit(new)


def discarded(state: AgentState, why: str = "discarded") -> AgentState:
    """The standing once its pause or stopped run is dropped."""
    pause = state.position
    assert pause is not None
    what = "pause" if pause.interrupts else "stopped run"
    message = closing_message(state.messages, pause.step, f"cancelled: the {what} was {why}")
    closed = state if message is None else state.appended(message)
    return closed.at(None)


async def put_back(agent: Agent, pause: Position | None) -> None:
    """A run that did not get past the pause it resumed leaves it as it was, also in the
    store (a failure to save that is not the run's error)."""
    new = agent._with_data(agent._state.at(pause))
    agent._commit(new)
    if agent._session is not None:
        with contextlib.suppress(Exception):
            await agent._session.save(agent._identity(), new, pause, data=True)


def close_pre_journal_crash(agent: Agent, kept: Position | None) -> None:
    """A stored conversation that ends in unanswered tool uses with no journal comes from a
    run killed mid-batch before the journal existed: record those calls as not finished.
    ``kept`` is the pause that run had resumed, if any: calls it had finished keep their
    results (they are never run again)."""
    reason = (
        "not finished: the run stopped (its process ended) before this tool call completed; "
        "it may or may not have run"
    )
    state = agent._state
    message = closing_message(state.messages, None if kept is None else kept.step, reason)
    if message is not None:
        agent._commit(state.appended(message))
