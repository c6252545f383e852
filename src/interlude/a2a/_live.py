"""The runs the A2A door makes in this process, each a task of its own.

A run outlives the request that started it (a client that goes away does not stop it half-way):
its progress is published to every stream that follows it (the one that started it and any
``tasks/resubscribe``), its end is handed to whoever waits for it (a blocking ``message/send``)
and to the push notifications. ``tasks/cancel`` stops it: its task is cancelled, so the run ends
as a cancelled run does (its pause given back if it had not got past it, else its open tool
calls closed), and whoever stopped it reports how it ended (:meth:`LiveRun.finish`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from ._events import Progress, Update, final_events, working_task

if TYPE_CHECKING:
    from a2a.types import Task, TaskStatus

    from .._stream import StreamEvent

__all__ = ["LiveRun", "Runs", "Source"]

_log = logging.getLogger("interlude.a2a")


@dataclass(frozen=True, slots=True)
class Source:
    """What a run does: ``stream`` (its events, refusals raised before the first) or ``call``
    (a run that is not streamed: nothing is published before its end). ``what`` is the text
    of the ``working`` task a stream starts with."""

    what: str
    stream: Callable[[], AsyncIterator[StreamEvent]] | None = None
    call: Callable[[], Awaitable[object]] | None = None


Ending = Callable[[BaseException | None, bool], Awaitable["Task | None"]]
"""The task as a run left it, read when the run ends (given its error, if it raised, and
whether it had begun: got past its refusals); None when the error refused the run before it
changed anything (there is nothing to report)."""


class LiveRun:
    """One run of task ``task_id``: started at once, ended by ``ending``; ``on_end`` gets the
    task it ended with (None: refused, nothing changed)."""

    def __init__(
        self,
        task_id: str,
        source: Source,
        ending: Ending,
        on_end: Callable[[LiveRun, Task | None], None],
    ) -> None:
        self.task_id = task_id
        self.source = source
        self.initial = working_task(task_id, source.what)
        """The task a stream of this run starts with."""
        self.status: TaskStatus = self.initial.status
        self.events: list[Update] = []
        """Every update published so far, in order."""
        self.done = False
        self.stopping = False
        self._ending_now = False
        self._ending = ending
        self._on_end = on_end
        self._wake = asyncio.Event()
        loop = asyncio.get_running_loop()
        self.started: asyncio.Future[None] = loop.create_future()
        """Done once the run got past its refusals (or ended): raises a refusal."""
        self.outcome: asyncio.Future[Task] = loop.create_future()
        """The task the run ended with, or the error it raised."""
        for future in (self.started, self.outcome):
            future.add_done_callback(_retrieved)
        self.pump = asyncio.ensure_future(self._pump())
        self.pump.add_done_callback(self._pumped)

    # --- following -------------------------------------------------------------------------

    def snapshot(self) -> tuple[Task, int]:
        """The task as the run stands now, and how many updates it reflects (follow from
        there: nothing is missed, nothing is sent twice)."""
        from a2a.types import Task

        task = Task(id=self.task_id, context_id=self.task_id)
        task.status.CopyFrom(self.status)
        return task, len(self.events)

    async def follow(self, start: int = 0) -> AsyncIterator[Update]:
        """The updates from the ``start``-th on, as they are published, until the run ends."""
        i = start
        while True:
            while i < len(self.events):
                yield self.events[i]
                i += 1
            if self.done:
                return
            await self._wake.wait()

    def publish(self, update: Update) -> None:
        from a2a.types import TaskStatusUpdateEvent

        self.events.append(update)
        if isinstance(update, TaskStatusUpdateEvent):
            self.status = update.status
        self._wake.set()
        self._wake = asyncio.Event()

    # --- the run ---------------------------------------------------------------------------

    async def _pump(self) -> None:
        error: BaseException | None = None
        try:
            await self._run()
        except asyncio.CancelledError:
            if self.stopping:
                return  # whoever stopped it reports how it ended
            raise
        except Exception as exc:
            error = exc
        self._ending_now = True
        try:
            task = await self._ending(error, self.started.done())
        except Exception as exc:  # the task cannot be read: report the run's own error
            _log.exception("task %r: its state after the run could not be read", self.task_id)
            task, error = None, error or exc
        if task is None:
            self._refused(error or RuntimeError("the run ended and its task is gone"))
        else:
            self.finish(task, error)

    async def _run(self) -> None:
        source = self.source
        if source.call is not None:
            await source.call()
            return
        assert source.stream is not None
        progress = Progress(self.task_id)
        stream = cast("AsyncGenerator[StreamEvent, None]", source.stream())  # one, in fact
        async with contextlib.aclosing(stream) as events:
            async for event in events:
                if not self.started.done():
                    self.started.set_result(None)
                for update in progress.updates(event):
                    self.publish(update)

    async def stop(self) -> bool:
        """Stop the run: True once it stopped (report its end with :meth:`finish`); False
        when it was ending already (then once it ended)."""
        if self.done or self._ending_now or self.pump.done():
            await asyncio.wait([self.outcome])
            return False
        self.stopping = True
        self.pump.cancel()
        await asyncio.wait([self.pump])
        return True

    def finish(self, task: Task, error: BaseException | None = None) -> None:
        """End the run with ``task`` as it now stands: its final events published, its waiters
        given it (or ``error``), its end reported."""
        if self.done:
            return
        for update in final_events(task):
            self.publish(update)
        self._close(task)
        if not self.started.done():
            self.started.set_result(None)
        if not self.outcome.done():
            if error is None:
                self.outcome.set_result(task)
            else:
                self.outcome.set_exception(error)

    def _refused(self, error: BaseException) -> None:
        self._close(None)
        for future in (self.started, self.outcome):
            if not future.done():
                future.set_exception(error)

    def _close(self, task: Task | None) -> None:
        self.done = True
        self._wake.set()
        try:
            self._on_end(self, task)
        except Exception:
            _log.exception("task %r: reporting its end failed", self.task_id)

    def _pumped(self, pump: asyncio.Future[None]) -> None:
        """The pump ended without ending the run (cancelled from outside, not stopped: the
        server shuts down): say so to its waiters. A stopped run is ended by its stopper."""
        if not self.done and not self.stopping:
            self._refused(asyncio.CancelledError())


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Mark a future's error as seen (its waiter, if any, raises it)."""
    if not future.cancelled():
        future.exception()


class Runs:
    """The live runs of one agent endpoint, by task id."""

    def __init__(self) -> None:
        self._live: dict[str, list[LiveRun]] = {}

    def get(self, task_id: str) -> LiveRun | None:
        """The run of ``task_id`` going on in this process, if any: the newest that got past
        its refusals (a message refused meanwhile does not hide the run under way), else the
        newest still deciding."""
        going = [live for live in self._live.get(task_id, ()) if not live.done]
        begun = [live for live in going if live.started.done()]
        found = begun or going
        return found[-1] if found else None

    def start(
        self,
        task_id: str,
        source: Source,
        ending: Ending,
        on_end: Callable[[LiveRun, Task | None], None],
    ) -> LiveRun:
        def ended(live: LiveRun, task: Task | None) -> None:
            left = [other for other in self._live.get(task_id, ()) if other is not live]
            if left:
                self._live[task_id] = left
            else:
                self._live.pop(task_id, None)
            on_end(live, task)

        live = LiveRun(task_id, source, ending, ended)
        self._live.setdefault(task_id, []).append(live)
        return live

    def __len__(self) -> int:
        return sum(len(runs) for runs in self._live.values())
