"""``tasks/cancel``: a paused task's pause discarded, a running task's run stopped, and the task
``canceled`` from then on, in every process on the store.

What a cancel does depends on where the task stands:

- **paused** (``input-required``) or **stopped mid-run**: the pause is discarded (as
  ``Agent.discard_pause`` does: its tool calls never run, they are closed as cancelled). A cancel
  declines the pending questions, so the floor's rules apply as to an answer: the sender must be
  one who may answer each of them (their ``approvers`` groups; fail closed), and a question with
  an answer recorded through another door (first answer wins) is not discarded under it.
- **running in this process**: the run is stopped (its task cancelled: a run that had not got
  past the pause it resumed gives it back, and that pause is then discarded; otherwise its open
  tool calls are closed as cancelled). A run that completed before the cancel took hold is
  refused as completed.
- **running in another process**: refused (``TaskNotCancelableError``): that process holds it.
- **completed, canceled or failed**: refused (``TaskNotCancelableError``), as the spec says.

The session records that it was canceled and by whom under ``agent.state["interlude.a2a"]``,
in the very save that ends the run or drops the pause (:func:`marking` adds it), so the
task reads ``canceled`` wherever it is read and a crash cannot leave one without the other.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import TYPE_CHECKING, cast

from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError

from ..errors import NotPausedError, ResumeError, SessionConflictError
from ._wire import DOOR_KEY, task_of

if TYPE_CHECKING:
    from .._agent import Agent
    from .._messages import JsonValue
    from ..sessions import InboxStore, SessionUpdate
    from ._live import LiveRun
    from ._server import AgentTasks

__all__ = ["Canceling", "cancel_mark", "marking"]


def cancel_mark(by: str, at: float | None = None) -> dict[str, JsonValue]:
    """What the session keeps under ``DOOR_KEY`` once ``by`` canceled its task."""
    return {"canceled": {"by": by, "at": time.time() if at is None else at}}


def marking(store: InboxStore, marks: dict[str, dict[str, JsonValue]]) -> InboxStore:
    """``store`` as the A2A door's runs save to it: while a session is being canceled (its
    mark in ``marks``), each of its saves that sets ``agent.state`` sets the door's cancel mark
    in it too, in the same write (``sessions.amended``)."""
    from ..sessions import amended

    def amend(session_id: str, update: SessionUpdate) -> SessionUpdate:
        mark = marks.get(session_id)
        if mark is not None and update.state is not None:
            update = dataclasses.replace(update, state={**update.state, DOOR_KEY: mark})
        return update

    return cast("InboxStore", amended(store, amend))


class Canceling:
    """``tasks/cancel`` of the tasks of ``door`` (one agent endpoint): see the module."""

    def __init__(self, door: AgentTasks) -> None:
        self.door = door

    async def cancel(self, task_id: str, by: str, groups: tuple[str, ...]) -> Task:
        """Cancel task ``task_id`` for ``by`` (a member of ``groups``): the task canceled, or
        TaskNotCancelableError (ended, or run by another process), TaskNotFoundError, or a
        refusal of the floor's rules (InvalidParams, nothing changed)."""
        live = self.door.runs.get(task_id)
        if live is None:
            return await self._discard(task_id, by, groups)
        stopping = asyncio.ensure_future(self._stop(live, by, groups))
        stopping.add_done_callback(lambda f: f.cancelled() or f.exception())
        return await asyncio.shield(stopping)  # a client that goes away leaves nothing half done

    async def _stop(self, live: LiveRun, by: str, groups: tuple[str, ...]) -> Task:
        """Stop the run of this process, then drop the pause it gave back (if any): the task
        ends ``canceled``, or ``completed`` when the run got there first (refused then)."""
        task_id = live.task_id
        marks = self.door.cancel_marks
        marks[task_id] = cancel_mark(by)
        try:
            stopped = await live.stop()
            task = await self._stopped(live, by, groups) if stopped else None
        finally:
            marks.pop(task_id, None)
        if task is None:  # it stopped on its own first (paused, or ended): as if not running
            return await self._discard(task_id, by, groups)
        if task.status.state == TaskState.TASK_STATE_COMPLETED:
            raise TaskNotCancelableError(f"task {task_id!r} completed before the cancel took hold")
        return task

    async def _stopped(self, live: LiveRun, by: str, groups: tuple[str, ...]) -> Task:
        """The task once its run was stopped (its pause, given back, discarded: only by one
        who may answer its questions, as a cancel of a paused task; else the pause stays and
        the refusal is raised); the run's followers and webhooks are told how it ended."""
        task_id = live.task_id
        task = live.snapshot()[0]  # what they are told if the task cannot be read
        try:
            try:
                agent = await self.door._open(task_id)
            except TaskNotFoundError:  # stopped before its first save: there is no session
                task = _canceled(task_id, f"Canceled by {by} before it started.")
                return task
            if agent.is_paused:
                try:
                    await self._check(agent, task_id, by, groups)
                except Exception:
                    task = task_of(agent, task_id)  # still paused: input-required
                    raise
            if agent.is_paused or agent.needs_recovery:
                await self._drop(agent, task_id, by)
            task = task_of(agent, task_id)
            return task
        finally:
            live.finish(task)

    async def _discard(self, task_id: str, by: str, groups: tuple[str, ...]) -> Task:
        """Cancel a task no run of this process holds: drop its pause (the sender must be
        one who may answer its questions) or its stopped run; refuse an ended one."""
        door = self.door
        agent = await door._open(task_id)
        if not agent.is_paused and not agent.needs_recovery:
            state = TaskState.Name(task_of(agent, task_id).status.state)
            raise TaskNotCancelableError(
                f"task {task_id!r} is {state}: only a running or paused task can be canceled"
            )
        if agent.is_paused:
            await self._check(agent, task_id, by, groups)
        await self._drop(agent, task_id, by)
        task = task_of(agent, task_id)
        door._on_end(None, task)
        return task

    async def _check(self, agent: Agent, task_id: str, by: str, groups: tuple[str, ...]) -> None:
        """A cancel declines the pending questions: the floor's rules for an answer apply
        (who may answer them; a question answered first through another door stays)."""
        from ..operate import check_allowed, check_taken
        from ._server import refused

        door = self.door
        asked = {q.id: q for q in agent.interrupts}
        declined: dict[str, JsonValue] = dict.fromkeys(asked)
        try:
            check_allowed(asked, declined, groups, door.operator.inbox.clock(), by)
            recorded = await door.store.recorded_answers(task_id)
            check_taken(task_id, declined, agent.audit, recorded)
        except (ResumeError, SessionConflictError) as exc:
            raise refused(exc, task_id) from None

    async def _drop(self, agent: Agent, task_id: str, by: str) -> None:
        """Discard the agent's pause or stopped run, saved with ``by``'s cancel mark (in the
        store by the discard's own save, and here)."""
        marks = self.door.cancel_marks
        marks[task_id] = agent.state[DOOR_KEY] = cancel_mark(by)
        try:
            agent.discard_pause()  # saved through run_sync (one store round trip)
        except (SessionConflictError, NotPausedError) as exc:  # run elsewhere, or moved on
            raise TaskNotCancelableError(
                f"task {task_id!r} cannot be canceled now: {exc}"
            ) from None
        finally:
            marks.pop(task_id, None)


def _canceled(task_id: str, text: str) -> Task:
    message = Message(
        message_id=f"{task_id}:canceled",
        task_id=task_id,
        context_id=task_id,
        role=Role.ROLE_AGENT,
        parts=[Part(text=text)],
    )
    status = TaskStatus(state=TaskState.TASK_STATE_CANCELED, message=message)
    return Task(id=task_id, context_id=task_id, status=status)
