"""What an agent holds, and reading it: its settings, where it stands, its session, its record
(checkpoints, replay, the exported state), and closing what its tools hold open.

``Agent`` derives from ``AgentHolding``. Nothing here changes where the agent stands: runs,
resumes and the changes between runs stay in ``_agent``, so each module reads as one concern.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Self

from .._sync import run_sync
from ..errors import AgentBusyError, StateFormatError
from ._standing import Identity, check_reserved

if TYPE_CHECKING:
    from .._audit import AuditEntry
    from .._interrupt import Interrupt
    from .._messages import JsonValue
    from .._stream import StreamEvent
    from .._tools import AgentTool, ToolSpec
    from ..sessions import SessionStore
    from ._executor import Executor
    from ._history import Checkpoint
    from ._persist import SessionLink
    from ._spec import AgentSpec
    from ._standing import AgentState

__all__ = ["AgentHolding"]


class AgentHolding:
    """The reading side of :class:`~interlude.Agent` (see the module docstring)."""

    if TYPE_CHECKING:  # set, or defined, by Agent
        _spec: AgentSpec
        _specs: list[ToolSpec] | None
        _state: AgentState
        _running: bool
        _session: SessionLink | None
        _detached_id: str | None

        @property
        def name(self) -> str | None: ...

        @property
        def state(self) -> dict[str, JsonValue]: ...

        def _set_spec(self, spec: AgentSpec) -> None: ...

        def _loaded(self) -> AgentState: ...

    # --- what the agent is ------------------------------------------------------------------

    @property
    def spec(self) -> AgentSpec:
        """What the agent is (frozen): ``Agent.from_spec(replace(agent.spec, ...))`` makes a
        copy with some settings changed."""
        return self._spec

    @property
    def executor(self) -> Executor:
        """Where model calls and tool bodies run: this process (``LOCAL``) unless an
        integration (a durable engine's workflow) set its own; not while a run is going."""
        return self._spec.executor

    @executor.setter
    def executor(self, executor: Executor) -> None:
        self._set_spec(replace(self._spec, executor=executor))

    @property
    def tools(self) -> dict[str, AgentTool]:
        return dict(self._tools)

    @property
    def _tools(self) -> Mapping[str, AgentTool]:
        return self._spec.tools

    @property
    def _key(self) -> bytes | None:
        return self._spec.signing_key

    @property
    def _executor(self) -> Executor:
        return self._spec.executor

    def _tool_specs(self) -> list[ToolSpec]:
        if self._specs is None:
            self._specs = [t.spec for t in self._tools.values()]
        return self._specs

    # --- where it stands ----------------------------------------------------------------------

    @property
    def is_running(self) -> bool:
        """Whether a run is going."""
        return self._running

    @property
    def is_paused(self) -> bool:
        """Whether the agent waits on answers (``resume``)."""
        return self._loaded().paused

    @property
    def needs_recovery(self) -> bool:
        """Whether the agent holds a run that stopped before it finished (its process died):
        :meth:`recover` carries it on from its journal."""
        return self._loaded().stopped

    @property
    def interrupts(self) -> list[Interrupt]:
        """The questions a paused agent waits on (empty when not paused)."""
        position = self._loaded().position
        return [] if position is None else list(position.interrupts)

    @property
    def audit(self) -> list[AuditEntry]:
        """Every answer applied to this agent's questions, oldest first: who, when, what, and
        a digest of what was shown (kept with the session and in ``export_state()``)."""
        return list(self._loaded().audit)

    @property
    def decisions(self) -> dict[str, dict[str, JsonValue]]:
        """The approval decisions remembered now, by tool name: ``{"approve": bool, "scope":
        "run" | "session", "note": str}`` (the note when the person gave one; a paused run's
        own decisions win over the session's)."""
        from ._approval import remembered_decisions

        state = self._loaded()
        run = {} if state.position is None else state.position.progress.decisions
        return remembered_decisions(state.audit, run, self._key is not None, state.messages)

    # --- its session --------------------------------------------------------------------------

    @property
    def session_id(self) -> str | None:
        return None if self._session is None else self._session.session_id

    @property
    def run_session_id(self) -> str | None:
        """The session its calls belong to (their idempotency keys): its session's id, or the
        id of the one a durable engine detached it from (``detach_session``)."""
        return self.session_id or self._detached_id

    @property
    def session_store(self) -> SessionStore | None:
        """The store the agent's session is saved in (None: no session)."""
        return None if self._session is None else self._session.store

    # --- its record ---------------------------------------------------------------------------

    def checkpoints(self) -> list[Checkpoint]:
        """The steps of this agent's record, oldest first: prompts, model replies, tool
        results, questions (answered and open) and answers, each a frozen :class:`Checkpoint`
        whose ``id`` :meth:`fork` takes. Read from the conversation, the audit trail and the
        pause: kept as long as the session is (see docs/time-travel.md)."""
        from ._history import checkpoints_of

        standing = self._loaded()
        pending = standing.position.interrupts if standing.position is not None else []
        return checkpoints_of(list(standing.messages), standing.audit, pending)

    def replay(self) -> list[StreamEvent]:
        """The events a stream of this agent's recorded runs gave, rebuilt from the record
        with no model or tool call (see docs/time-travel.md for what the record keeps)."""
        from ._replay import replay_events

        standing = self._loaded()
        pending = standing.position.interrupts if standing.position is not None else []
        return replay_events(list(standing.messages), pending)

    def export_state(self) -> dict[str, JsonValue]:
        """The whole agent state (conversation, agent state, pause) as versioned JSON data."""
        if self._running:
            raise AgentBusyError("cannot export state while a run is going")
        from .._frozen import thaw
        from ._codec import encode_state

        standing = self._loaded()
        exported: dict[str, JsonValue] = thaw(  # plain JSON: the caller's own to change
            encode_state(
                list(standing.messages),
                self._saved_state(),
                standing.position,
                list(self._tools),
                agent=self.name,
                audit=list(standing.audit),
                key=self._key,
            )
        )
        return exported

    def _saved_state(self) -> dict[str, JsonValue]:
        """``agent.state`` as it is saved: with the conversation manager's state, if any, under
        a reserved key (split off again when the state is loaded). StateFormatError if
        ``agent.state`` uses that key itself (it would not load, or load as the manager's)."""
        check_reserved(self.state, StateFormatError)
        return self._state.but(data=self.state).saved_data()

    def _identity(self) -> Identity:
        """Who this agent is to its session: name, signing key, tools."""
        return Identity(self.name, self._key, tuple(self._tools))

    # --- resources ----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close what the agent's tools hold open (such as an MCP server's connection): every
        tool with an ``aclose()`` method. The agent stays usable: tools reopen on next use.
        Every tool is closed even if one fails; the first failure is raised after."""
        failure: Exception | None = None
        for tool in self._tools.values():
            close = getattr(tool, "aclose", None)
            if close is not None:
                try:
                    await close()
                except Exception as exc:
                    failure = failure or exc
        if failure is not None:
            raise failure

    def close(self) -> None:
        """``aclose()`` from sync code; ``with Agent(...) as agent:`` calls it at the end."""
        run_sync(self.aclose())

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
