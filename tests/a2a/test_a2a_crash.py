"""The serving process is SIGKILLed while it applies an answer; a new one serves the same store
and the client sends its answer again: the task ends, and the approved tool ran exactly once."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest
from a2a.client import A2AClientError, ClientConfig, create_client
from a2a.types import GetTaskRequest, Part, TaskState

from tests.support import Started, free_port, started
from tests.support.processes import ROOT

from .apps import effects
from .wire import COMPLETED, INPUT_REQUIRED, TOKEN, data, questions, send


def start(db: str, port: int, crash_at: str | None) -> AbstractContextManager[Started]:
    """tests/a2a/serve.py serving ``db`` on ``port`` (from the time it accepts connections);
    ``crash_at`` ("hook" or "tool") is where it SIGKILLs itself while it applies an answer."""
    return started(
        [sys.executable, "-m", "tests.a2a.serve", db, str(port)],
        port=port,
        env={"A2A_CRASH_AT": crash_at or ""},
        what="the A2A server",
    )


@pytest.mark.parametrize("crash_at", ["hook", "tool"])
async def test_a_sigkill_while_an_answer_is_applied(
    crash_at: str, tmp_path: Path, effects_file: Path
) -> None:
    db, port = f"sqlite:///{tmp_path / 'sessions.db'}", free_port()
    url = f"http://127.0.0.1:{port}/a2a/ops/"
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    try:
        with start(db, port, crash_at) as first:
            client = await create_client(url, ClientConfig(streaming=False, httpx_client=http))
            task = await send(client, Part(text="Free some disk space"))
            [question] = questions(task)
            answer = data({"answers": {question["id"]: True}})
            # the connection drops: the server died mid-answer
            with pytest.raises((A2AClientError, httpx.TransportError)):
                await send(client, answer, task_id=task.id)
            assert first.process.wait(60) == -9 and effects() == []

        with start(db, port, None) as second:  # another process, the same store
            assert second.process.pid != first.process.pid
            client = await create_client(url, ClientConfig(streaming=False, httpx_client=http))
            stopped = await client.get_task(GetTaskRequest(id=task.id))
            assert stopped.status.state in (TaskState.TASK_STATE_WORKING, INPUT_REQUIRED)
            retried = await send(client, answer, task_id=task.id)  # the client sends it again
            if crash_at == "tool":  # the tool had started: in doubt, asked before running again
                [doubt] = questions(retried)
                assert retried.status.state == INPUT_REQUIRED and doubt["name"] == "in_doubt"
                assert effects() == []
                rerun = data({"answers": {doubt["id"]: "rerun"}})
                retried = await send(client, rerun, task_id=task.id)
            assert retried.status.state == COMPLETED
            assert effects() == ["delete /var/log/old.log"]  # exactly once
            await client.close()
    finally:
        await http.aclose()


def caller(db: str, url: str, phase: str, crash: bool = False) -> subprocess.CompletedProcess[str]:
    """tests/a2a/caller.py in its own process (``crash``: it dies once the remote replied)."""
    return subprocess.run(
        [sys.executable, "-m", "tests.a2a.caller", db, url, phase],
        cwd=ROOT,
        env={**os.environ, "A2A_CALLER_CRASH": "1" if crash else "0"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_sigkill_of_the_caller_after_its_answer_went_out(
    tmp_path: Path, effects_file: Path
) -> None:
    """The lead (one process) answers its remote agent's question (served by another) and dies
    before it records the result; a third process recovers the lead: the remote tool ran once,
    the remote task was not started again, and the lead ends with the remote reply."""
    import json

    remote_db, lead_db = f"sqlite:///{tmp_path / 'remote.db'}", f"sqlite:///{tmp_path / 'lead.db'}"
    port = free_port()
    url = f"http://127.0.0.1:{port}/a2a/ops/"
    with start(remote_db, port, None):
        begun = caller(lead_db, url, "start")
        assert json.loads(begun.stdout)["stop"] == "interrupt", begun.stderr
        answered = caller(lead_db, url, "answer", crash=True)
        assert answered.returncode == -9 and effects() == ["delete /var/log/old.log"]
        recovered = caller(lead_db, url, "recover")
        assert json.loads(recovered.stdout) == {
            "stop": "end_turn",
            "text": "Ops removed it.",
            "questions": [],
        }, recovered.stderr
        assert effects() == ["delete /var/log/old.log"]  # once
        import asyncio

        from interlude.sessions import open_store

        assert len(asyncio.run(open_store(remote_db).list_sessions())) == 1  # one remote task
