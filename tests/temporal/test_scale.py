"""Workers dying and many workflows at once, against a real dev server."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.support.processes import ROOT

from .conftest import Env
from .history import calls_in, calls_of, events, finished_calls
from .polling import recorded, until
from .test_workflow import _pending, _prompt, _runs


def _start_worker_process(address: str, queue: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.temporal.worker_main", address, queue],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )


async def wait_until_only_slow_runs(client: Any, workflow_id: str, within: float = 60.0) -> None:
    """Wait until the run waits on its slow tool's body alone: the other tool's completion is in
    the history and no workflow task is scheduled or running. Killing the worker before that
    (a fixed time after the bodies ran, as the tests once did) can lose more than the slow
    attempt under load: the other tool's completion still on its way (then it too is in doubt),
    or a workflow task the dead worker holds (then it waits for its 10 s timeout)."""

    handle = client.get_workflow_handle(workflow_id)
    deadline = asyncio.get_running_loop().time() + within
    while True:
        history = await events(client, workflow_id)
        # the model call and the fast tool finished, the slow tool's activity is scheduled;
        # then (the history read first) no workflow task is scheduled or running
        if (len(calls_in(history)), finished_calls(history)) == (3, 2) and not (
            await handle.describe()
        ).raw_description.HasField("pending_workflow_task"):
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{workflow_id} never waited on the slow body alone")
        await asyncio.sleep(0.05)


def _pids(path: Path) -> set[str]:
    return {line.split()[0] for line in path.read_text().splitlines()}


async def test_a_worker_killed_mid_idempotent_tool_another_finishes(
    temporal_address: str, tmp_path: Path
) -> None:
    from temporalio.client import Client

    from interlude.temporal import AgentClient, worker

    from .agents import KILL_TEST_TOOLS, app, release

    queue = f"kill-{uuid.uuid4().hex[:8]}"
    client = await Client.connect(temporal_address)
    agents = AgentClient(client, task_queue=queue)
    doomed = _start_worker_process(temporal_address, queue)
    try:
        assert doomed.stdout is not None and doomed.stdout.readline().strip() == "ready"
        fast, slow = tmp_path / "fast", tmp_path / "slow"
        calls = [("touch", {"path": str(fast)}), ("slow_safe", {"path": str(slow), "seconds": 60})]
        wid = await agents.start("plain", _prompt(*calls))
        started = Path(str(slow) + ".started")
        await until(recorded(started), "the slow body to start")
        await wait_until_only_slow_runs(client, wid)  # the fast tool ran: in parallel, maybe last
        assert _runs(started) == 1 and _runs(fast) == 1
        os.kill(doomed.pid, signal.SIGKILL)  # mid-body: the slow tool has not finished
        doomed.wait()
        release(slow)  # the body run again finishes at once
        sticky = {"sticky_queue_schedule_to_start_timeout": timedelta(seconds=1)}
        async with worker(client, app, task_queue=queue, tools=KILL_TEST_TOOLS, **sticky):
            result = await asyncio.wait_for(agents.result(wid), 60)
    finally:
        if doomed.poll() is None:
            os.kill(doomed.pid, signal.SIGKILL)
            doomed.wait()
        if doomed.stdout is not None:
            doomed.stdout.close()
    assert result["stop_reason"] == "end_turn" and result["text"] == "Done."
    assert _runs(fast) == 1  # completed before the kill: not run again
    # An idempotent tool: the killed body ran again, to the end, on its own (the tool that is
    # not idempotent asks a person instead: test_in_doubt.py)
    assert _runs(started) == 2 and _runs(slow) == 1
    pids = _pids(started)
    assert str(doomed.pid) in pids and str(os.getpid()) in pids
    # the model calls are local activities; the tools with heartbeat options regular ones
    made = [(c.activity, c.local) for c in await calls_of(client, wid)]
    model, tool = ("interlude.model", True), ("interlude.tool", False)
    assert made == [model, tool, tool, model]


async def test_three_workers_a_hundred_workflows_each_tool_once(
    temporal_address: str, tmp_path: Path
) -> None:
    from temporalio.client import Client

    from interlude.temporal import AgentClient

    queue = f"many-{uuid.uuid4().hex[:8]}"
    agents = AgentClient(await Client.connect(temporal_address), task_queue=queue)
    workers = [_start_worker_process(temporal_address, queue) for _ in range(3)]
    try:
        for w in workers:  # three processes (one process may run one worker per queue)
            assert w.stdout is not None and w.stdout.readline().strip() == "ready"
        logs = [tmp_path / f"t{i}" for i in range(100)]
        prompts = [_prompt(("touch", {"path": str(p)})) for p in logs]
        ids = await asyncio.gather(*(agents.start("approve", p) for p in prompts))
        env = Env(agents.client, agents, queue, temporal_address)
        questions = await asyncio.gather(*(_pending(env, wid) for wid in ids))
        outcomes = await asyncio.gather(
            *(
                agents.answer(wid, {q.id: True}, by="alice")
                for wid, [q] in zip(ids, questions, strict=True)
            )
        )
        assert {o["stop_reason"] for o in outcomes} == {"end_turn"}
        results = await asyncio.gather(*(agents.result(wid) for wid in ids))
    finally:
        for w in workers:
            os.kill(w.pid, signal.SIGKILL)
            w.wait()
            if w.stdout is not None:
                w.stdout.close()
    assert {r["text"] for r in results} == {"Done."}
    assert [_runs(p) for p in logs] == [1] * 100
    assert len({pid for p in logs for pid in _pids(p)}) > 1  # the work was shared
