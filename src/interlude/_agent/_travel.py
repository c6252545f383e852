"""Time travel: a new agent at a checkpoint of the record (``fork``), and taking the session
back to one, its calls since undone (``undo``). ``Agent`` derives from ``AgentTravel``; the
work is in ``_fork`` and ``_undoing``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, overload

from .._sync import run_sync

if TYPE_CHECKING:
    from .._result import AgentResult
    from ._agent import Agent
    from ._undo_plan import UndoPlan

__all__ = ["AgentTravel"]


class AgentTravel:
    """Forks and undos of :class:`~interlude.Agent` (see the module docstring)."""

    def fork(self, at: str, session_id: str | None = None, *, by: str | None = None) -> Agent:
        """A new agent standing at checkpoint ``at`` (an id from :meth:`checkpoints`, or an
        interrupt id), from sync code: see :meth:`fork_async`."""
        return run_sync(self.fork_async(at, session_id, by=by))

    async def fork_async(
        self, at: str, session_id: str | None = None, *, by: str | None = None
    ) -> Agent:
        """A new agent standing at checkpoint ``at``: nothing before it is done again (no model
        call, no tool run), and this agent and its session do not change.

        At a question, the fork waits on it again (answer it differently with ``resume``); at
        a prompt, tool results or a model reply with tool calls, ``recover`` carries it on. A
        tool call that ran here does not run in the fork unless a person answers its
        ``ran_in_parent`` question ``"rerun"``. With a session store the fork is a new session
        there (``session_id``, or one made from this one's), whose audit trail begins with an
        entry naming this session and ``at`` (``by``: who forked). UnknownCheckpointError for
        an id the record does not hold. See docs/time-travel.md."""
        from ._fork import fork_agent

        return await fork_agent(self, at, session_id, by)  # type: ignore[arg-type]

    @overload
    def undo(
        self,
        to: str,
        *,
        by: str | None = ...,
        skip: Sequence[str] = ...,
        dry_run: Literal[False] = ...,
    ) -> AgentResult: ...
    @overload
    def undo(
        self, to: str, *, by: str | None = ..., skip: Sequence[str] = ..., dry_run: Literal[True]
    ) -> UndoPlan: ...
    def undo(
        self, to: str, *, by: str | None = None, skip: Sequence[str] = (), dry_run: bool = False
    ) -> AgentResult | UndoPlan:
        """Take the session back to checkpoint ``to``, from sync code: see :meth:`undo_async`."""
        return run_sync(self._undo(to, by, skip, dry_run))

    @overload
    async def undo_async(
        self,
        to: str,
        *,
        by: str | None = ...,
        skip: Sequence[str] = ...,
        dry_run: Literal[False] = ...,
    ) -> AgentResult: ...
    @overload
    async def undo_async(
        self, to: str, *, by: str | None = ..., skip: Sequence[str] = ..., dry_run: Literal[True]
    ) -> UndoPlan: ...
    async def undo_async(
        self, to: str, *, by: str | None = None, skip: Sequence[str] = (), dry_run: bool = False
    ) -> AgentResult | UndoPlan:
        """Take the session back to checkpoint ``to`` (an id from :meth:`checkpoints`): the
        compensation of every successful call after it runs, newest first, exactly once
        (``@tool(compensate=...)``), then the conversation is cut back to the checkpoint and
        the session stands where a fork at it would (``agent.recover()`` carries the run on
        from there; a final reply leaves it between runs). Each undone call, and each call in
        ``skip`` (left as it is), is an audit entry named ``"undo"`` given ``by``.

        ``dry_run=True`` returns the :class:`UndoPlan` and changes nothing. Otherwise the
        result's ``stop_reason`` is ``"undone"``, or ``"interrupt"`` when a compensation waits
        on a question (its approval, or an in-doubt one after a crash): ``resume`` carries the
        undo on. UndoError, with nothing run, when a call after the checkpoint has no
        compensation and is not in ``skip`` (or is in doubt); UnknownCheckpointError for an
        id the record does not hold. The agent's ``state`` is not taken back (the record keeps
        no earlier copy of it): a compensation that must put it back does so through its
        ``ToolContext``. See docs/undo.md."""
        return await self._undo(to, by, skip, dry_run)

    async def _undo(
        self, to: str, by: str | None, skip: Sequence[str], dry_run: bool
    ) -> AgentResult | UndoPlan:
        from ._undoing import undo

        return await undo(self, to, by, list(skip), dry_run)  # type: ignore[arg-type]
