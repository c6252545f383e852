"""One adapter per engine, all with the same small interface (:class:`Engine`): start a run and
get its questions, answer, settle a deadline, leave a tool call in doubt by killing the process
running it, and the run's result. What a scenario sees through it is compared across engines.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
import uuid
from collections.abc import Mapping
from contextlib import AsyncExitStack
from datetime import timedelta
from typing import Any, Protocol

from interlude import Interrupt, JsonValue
from tests.support import started, until, wait_for

from .agents import app, runs_dir, temporal_tools, tool_runs


class Engine(Protocol):
    name: str

    async def start(self, agent: str, session_id: str, prompt: str) -> list[Interrupt]:
        """Start the run; its questions once it paused (none: it ended)."""
        ...

    async def pending(self, session_id: str) -> list[Interrupt]: ...

    async def answer(self, session_id: str, answers: Mapping[str, JsonValue], by: str) -> None:
        """Answer; a refusal raises the embedded engine's error and changes nothing."""
        ...

    async def expire(self, session_id: str) -> None:
        """Nobody answers: wait until the deadline settled the question."""
        ...

    async def in_doubt(self, agent: str, session_id: str, prompt: str) -> list[Interrupt]:
        """Start the run, kill the process running it inside ``slow``'s body, let another
        carry it on; the questions it then asks."""
        ...

    async def undo(self, session_id: str, to: str, by: str) -> str:
        """Take the paused run back to checkpoint ``to``; the undo's stop reason."""
        ...

    async def recover(self, session_id: str) -> list[Interrupt]:
        """Carry on the run an undo left stopped; its questions once it paused (none: ended)."""
        ...

    async def result(self, session_id: str) -> dict[str, Any]:
        """``{"stop_reason", "text", "state"}`` once the run ended (``state``: export_state)."""
        ...

    async def close(self) -> None: ...


def _slow_started(session_id: str) -> bool:
    return tool_runs(session_id).get("slow.started", 0) >= 1


def _release(session_id: str) -> None:
    """Let the session's ``slow`` body on path "slow" finish (one run again would too)."""
    (runs_dir(session_id) / "slow.release").touch()


class Embedded:
    """Agents of the App on a session store (SQLite or PostgreSQL), in this process: each
    answer opens the session again and resumes it."""

    def __init__(self, name: str, url: str) -> None:
        from interlude.sessions import open_store

        self.name = name
        self.url = url
        self.store = open_store(url)
        self.ended: dict[str, tuple[str, str]] = {}

    async def _open(self, session_id: str) -> Any:
        return await app.open_async(session_id, self.store)

    def _note(self, session_id: str, result: Any) -> list[Interrupt]:
        self.ended[session_id] = (result.stop_reason, str(result))
        return list(result.interrupts)

    async def start(self, agent: str, session_id: str, prompt: str) -> list[Interrupt]:
        built: Any = await app.start_async(agent, session_id, self.store)
        return self._note(session_id, await built.invoke_async(prompt))

    async def pending(self, session_id: str) -> list[Interrupt]:
        return list((await self._open(session_id)).interrupts)

    async def answer(self, session_id: str, answers: Mapping[str, JsonValue], by: str) -> None:
        agent = await self._open(session_id)
        self._note(session_id, await agent.resume_async(answers, by=by))

    async def expire(self, session_id: str) -> None:
        agent = await self._open(session_id)
        deadline = min(i.expires_at for i in agent.interrupts if i.expires_at is not None)
        await asyncio.sleep(max(0.0, deadline - time.time()) + 0.05)
        self._note(session_id, await agent.resume_expired_async())

    async def in_doubt(self, agent: str, session_id: str, prompt: str) -> list[Interrupt]:
        argv = [sys.executable, "-m", "tests.engines.embedded_main", self.url, agent]
        with started([*argv, session_id, prompt]) as child:
            wait_for(lambda: _slow_started(session_id), what="the tool body", process=child.process)
            os.kill(child.process.pid, signal.SIGKILL)  # inside the body: it waits for its release
            child.process.wait(30)
        _release(session_id)
        opened = await self._open(session_id)
        assert opened.needs_recovery
        return self._note(session_id, await opened.recover_async())

    async def undo(self, session_id: str, to: str, by: str) -> str:
        agent = await self._open(session_id)
        undone = await agent.undo_async(to=to, by=by)
        self._note(session_id, undone)
        return str(undone.stop_reason)

    async def recover(self, session_id: str) -> list[Interrupt]:
        agent = await self._open(session_id)
        return self._note(session_id, await agent.recover_async())

    async def result(self, session_id: str) -> dict[str, Any]:
        stop_reason, text = self.ended[session_id]
        state = (await self._open(session_id)).export_state()
        return {"stop_reason": stop_reason, "text": text, "state": state}

    async def close(self) -> None:
        close = getattr(self.store, "close", None)
        if close is not None:
            close()


class OnTemporal:
    """AgentClient against the dev server; a worker of the App in this process (in doubt: one
    in a process of its own, killed, then one here)."""

    name = "temporal"

    def __init__(self, client: Any, address: str) -> None:
        self.client = client
        self.address = address
        self.agents: Any = None
        self.stack = AsyncExitStack()

    async def serve(self, queue: str) -> None:
        from interlude.temporal import AgentClient, worker

        await self.stack.enter_async_context(
            worker(
                self.client,
                app,
                task_queue=queue,
                tools=temporal_tools(),
                sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
            )
        )
        self.agents = AgentClient(self.client, task_queue=queue)

    async def _paused_or_ended(self, session_id: str) -> list[Interrupt]:
        async def seen() -> list[Interrupt] | bool:
            found: list[Interrupt] = await self.agents.pending(session_id)
            if found:
                return found
            described = await self.agents.handle(session_id).describe()
            return described.status is not None and described.status.name != "RUNNING"

        got = await until(seen, f"{session_id} to pause or end")
        return got if isinstance(got, list) else []

    async def start(self, agent: str, session_id: str, prompt: str) -> list[Interrupt]:
        await self.agents.start(agent, prompt, workflow_id=session_id)
        return await self._paused_or_ended(session_id)

    async def pending(self, session_id: str) -> list[Interrupt]:
        found: list[Interrupt] = await self.agents.pending(session_id)
        return found

    async def answer(self, session_id: str, answers: Mapping[str, JsonValue], by: str) -> None:
        await self.agents.answer(session_id, answers, by=by)

    async def expire(self, session_id: str) -> None:
        await self.result(session_id)  # the workflow's timer applies the default

    async def in_doubt(self, agent: str, session_id: str, prompt: str) -> list[Interrupt]:
        from interlude.temporal import AgentClient

        queue = f"doubt-{uuid.uuid4().hex[:8]}"
        argv = [sys.executable, "-m", "tests.engines.worker_main", "temporal", self.address, queue]
        with started(argv) as doomed:
            wait_for(lambda: "ready" in doomed.output(), what="the worker", process=doomed.process)
            await AgentClient(self.client, task_queue=queue).start(
                agent, prompt, workflow_id=session_id
            )
            wait_for(lambda: _slow_started(session_id), what="the tool body")
            os.kill(doomed.process.pid, signal.SIGKILL)
            doomed.process.wait(30)
        _release(session_id)
        await self.serve(queue)  # a worker of the same queue carries the run on
        return await self._paused_or_ended(session_id)

    async def undo(self, session_id: str, to: str, by: str) -> str:
        outcome = await self.agents.undo(session_id, to, by=by)
        return str(outcome["stop_reason"])

    async def recover(self, session_id: str) -> list[Interrupt]:
        await self.agents.recover(session_id)
        return await self._paused_or_ended(session_id)

    async def result(self, session_id: str) -> dict[str, Any]:
        out: dict[str, Any] = await self.agents.result(session_id)
        return out

    async def close(self) -> None:
        await self.stack.aclose()


class OnDBOS:
    """interlude.dbos's client functions from this process; the App's worker in another (in
    doubt: a worker on a database of its own, killed, then restarted with its executor id)."""

    name = "dbos"

    def __init__(self, url: str, fresh_url: Any) -> None:
        self.url = url
        self.fresh_url = fresh_url  # () -> (url, drop): a throwaway database
        self.stack = contextlib.ExitStack()

    async def _paused_or_ended(self, session_id: str) -> list[Interrupt]:
        from interlude.dbos import pending, result

        async def seen() -> list[Interrupt] | bool:
            found = [p.interrupt for p in await pending(self.url) if p.session_id == session_id]
            if found:
                return found
            try:
                await result(self.url, session_id, timeout=0)
            except TimeoutError:
                return False
            return True

        got = await until(seen, f"{session_id} to pause or end")
        return got if isinstance(got, list) else []

    async def start(self, agent: str, session_id: str, prompt: str) -> list[Interrupt]:
        from interlude.dbos import start

        await start(self.url, agent, session_id, prompt)
        return await self._paused_or_ended(session_id)

    async def pending(self, session_id: str) -> list[Interrupt]:
        from interlude.dbos import pending

        return [p.interrupt for p in await pending(self.url) if p.session_id == session_id]

    async def answer(self, session_id: str, answers: Mapping[str, JsonValue], by: str) -> None:
        from interlude.dbos import answer

        await answer(self.url, session_id, answers, by=by)

    async def expire(self, session_id: str) -> None:
        await self.result(session_id)  # the workflow's durable sleep applies the default

    async def in_doubt(self, agent: str, session_id: str, prompt: str) -> list[Interrupt]:
        from interlude.dbos import start

        self.url = self.stack.enter_context(self.fresh_url())  # only the doomed worker serves
        executor = f"doubt-{uuid.uuid4().hex[:6]}"
        with dbos_worker(self.url, executor) as doomed:
            await start(self.url, agent, session_id, prompt)
            wait_for(lambda: _slow_started(session_id), what="the tool body")
            os.kill(doomed.process.pid, signal.SIGKILL)
            doomed.process.wait(30)
        _release(session_id)
        self.stack.enter_context(dbos_worker(self.url, executor))  # recovers its runs
        return await self._paused_or_ended(session_id)

    async def undo(self, session_id: str, to: str, by: str) -> str:
        raise NotImplementedError("undo: not built on DBOS yet")

    async def recover(self, session_id: str) -> list[Interrupt]:
        raise NotImplementedError("recover: not built on DBOS yet")

    async def result(self, session_id: str) -> dict[str, Any]:
        from interlude.dbos import result

        return await result(self.url, session_id)

    async def close(self) -> None:
        self.stack.close()


@contextlib.contextmanager
def dbos_worker(url: str, executor_id: str) -> Any:
    """A worker process serving the App on ``url``, once it is ready."""
    argv = [sys.executable, "-m", "tests.engines.worker_main", "dbos", url, executor_id]
    with started(argv) as running:
        process = running.process
        wait_for(lambda: "ready" in running.output(), what="the DBOS worker", process=process)
        yield running
