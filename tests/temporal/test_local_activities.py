"""Model calls and the bodies of tools that may run again are local activities (no activity
task through the server, a marker in the history); a tool that runs at most once stays a
regular activity; options and the worker choose regular ones. Counted from the histories."""

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

import pytest

from tests.support.processes import ROOT

from .conftest import Env, serving
from .history import calls_of, events, shape
from .polling import recorded, until
from .test_workflow import _pending, _prompt, _runs


def _local_worker_process(address: str, queue: str) -> subprocess.Popen[str]:
    """A worker process to kill, whose slow tools run as local activities."""
    argv = [sys.executable, "-m", "tests.temporal.worker_main", address, queue, "local"]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)


async def _approved_run(env: Env, path: Path) -> tuple[dict[str, Any], list[Any]]:
    """The bench's shape: the model asks for a tool, a hook asks approval, the answer comes by
    Update, the tool runs, the model answers. Its result and its history."""
    wid = await env.agents.start("approve", _prompt(("touch", {"path": str(path)})))

    async def listed() -> bool:  # seen paused in the listing first (a query while a workflow
        return wid in await env.agents.paused("approve")  # task is open would add one)

    await until(listed, f"{wid} listed as paused")
    [question] = await _pending(env, wid)
    outcome = await env.agents.answer(wid, {question.id: True}, by="alice")
    assert outcome["stop_reason"] == "end_turn"
    return await env.agents.result(wid), await events(env.client, wid)


async def test_a_paused_and_answered_run_takes_fewer_tasks_than_with_regular_activities(
    temporal_address: str, tmp_path: Path
) -> None:
    from temporalio.client import WorkflowHistory

    from interlude.temporal import replayer

    from .agents import app

    async with serving(temporal_address) as env:
        local, fast = await _approved_run(env, tmp_path / "a")
    async with serving(temporal_address, local_activities=False) as env:
        regular, slow = await _approved_run(env, tmp_path / "b")
    assert (_runs(tmp_path / "a"), _runs(tmp_path / "b")) == (1, 1)
    assert local["text"] == regular["text"] == "Done."
    # the tool (not idempotent) is a regular activity either way; the model calls are not
    assert shape(fast) == {
        "events": shape(fast)["events"],
        "workflow_tasks": 3,
        "activities": 1,
        "local_activities": 2,
    }
    assert shape(slow) == {
        "events": shape(slow)["events"],
        "workflow_tasks": 5,
        "activities": 3,
        "local_activities": 0,
    }
    assert shape(fast)["events"] <= shape(slow)["events"] - 6
    # both histories replay with today's code (a history without the patch marker keeps its
    # regular activities)
    for history in (fast, slow):
        await replayer(app).replay_workflow(WorkflowHistory("replayed", history))


async def test_which_calls_run_locally_follows_idempotence_and_the_options(
    temporal_address: str, tmp_path: Path
) -> None:
    from interlude.temporal import ActivityOptions

    a, b = tmp_path / "a", tmp_path / "b"
    tools_called = [("slow_safe", {"path": str(a), "seconds": 0}), ("touch", {"path": str(b)})]
    async with serving(temporal_address) as env:
        wid = await env.agents.start("plain", _prompt(*tools_called))
        assert (await env.agents.result(wid))["stop_reason"] == "end_turn"
        default = await calls_of(env.client, wid)
    flipped = {
        "slow_safe": ActivityOptions(local=False),  # idempotent, asked to be regular
        "touch": ActivityOptions(local=True),  # not idempotent, asked to be local
    }
    model = ActivityOptions(local=False)
    async with serving(temporal_address, tools=flipped, model=model) as env:
        wid = await env.agents.start("plain", _prompt(*tools_called))
        assert (await env.agents.result(wid))["stop_reason"] == "end_turn"
        options = await calls_of(env.client, wid)
    assert (_runs(a), _runs(b)) == (2, 2)
    # by default: the model calls and the idempotent tool local, the other tool regular
    assert sorted((c.activity, c.tool, c.local) for c in default) == [
        ("interlude.model", "", True),
        ("interlude.model", "", True),
        ("interlude.tool", "", True),
        ("interlude.tool", "touch", False),
    ]
    assert sorted((c.activity, c.tool, c.local) for c in options) == [
        ("interlude.model", "", False),
        ("interlude.model", "", False),
        ("interlude.tool", "", True),
        ("interlude.tool", "slow_safe", False),
    ]


async def test_a_tool_on_another_task_queue_runs_there(
    temporal_address: str, tmp_path: Path
) -> None:
    from temporalio.client import Client

    from interlude.temporal import ActivityOptions, worker

    from .agents import app

    other = f"other-{uuid.uuid4().hex[:8]}"
    client = await Client.connect(temporal_address)
    tools = {"slow_safe": ActivityOptions(task_queue=other)}
    async with (
        worker(client, app, task_queue=other),
        serving(temporal_address, tools=tools) as env,
    ):
        wid = await env.agents.start(
            "plain", _prompt(("slow_safe", {"path": str(tmp_path / "a"), "seconds": 0}))
        )
        assert (await env.agents.result(wid))["stop_reason"] == "end_turn"
    assert _runs(tmp_path / "a") == 1
    queues = [
        e.activity_task_scheduled_event_attributes.task_queue.name
        for e in await events(client, wid)
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert queues == [other]


async def test_a_local_tool_that_raises_is_its_error_result_once(
    temporal_address: str, tmp_path: Path
) -> None:
    from interlude.temporal import ActivityOptions

    log = tmp_path / "f"
    async with serving(temporal_address, tools={"flaky": ActivityOptions(local=True)}) as env:
        wid = await env.agents.start("plain", _prompt(("flaky", {"path": str(log)})))
        result = await env.agents.result(wid)
        made = await calls_of(env.client, wid)
    [_, _, results, _] = result["state"]["messages"]
    block = results["content"][0]
    assert block["status"] == "error" and "timed out" in str(block)
    assert _runs(log) == 1  # a tool's exception is its result: not retried
    [tool] = [c for c in made if c.activity == "interlude.tool"]
    assert (tool.local, tool.attempt) == (True, 1)


@pytest.mark.parametrize("tool", ["slow_safe", "slow"])
async def test_a_local_tool_lost_with_its_worker_runs_again_on_another(
    temporal_address: str, tmp_path: Path, tool: str
) -> None:
    """A local activity's start is not in the history: when its worker dies mid-body, the
    workflow task times out and another worker runs the body again (an idempotent tool; a tool
    that is not, forced local with ``ActivityOptions(local=True)``): no in-doubt question."""
    from temporalio.client import Client

    from interlude.temporal import WORKFLOW, ActivityOptions

    from .agents import release

    queue = f"lost-{uuid.uuid4().hex[:8]}"
    client = await Client.connect(temporal_address)
    doomed = _local_worker_process(temporal_address, queue)
    slow = tmp_path / "slow"
    started = Path(str(slow) + ".started")
    try:
        assert doomed.stdout is not None and doomed.stdout.readline().strip() == "ready"
        prompt = _prompt((tool, {"path": str(slow), "seconds": 60}))
        wid = f"lost-{uuid.uuid4().hex[:8]}"
        # a short workflow task timeout: the lost task is noticed after 2 s, not 10
        await client.start_workflow(
            WORKFLOW,
            {"agent": "plain", "prompt": prompt, "state": None},
            id=wid,
            task_queue=queue,
            task_timeout=timedelta(seconds=2),
        )
        await until(recorded(started), "the slow body to start")
        assert _runs(started) == 1
        os.kill(doomed.pid, signal.SIGKILL)  # mid-body
        doomed.wait()
        release(slow)  # the body run again finishes at once
        options = {"sticky_queue_schedule_to_start_timeout": timedelta(seconds=1)}
        tools = {"slow": ActivityOptions(local=True)}
        async with serving(temporal_address, queue, tools=tools, **options) as env:
            result = await asyncio.wait_for(env.agents.result(wid), 60)
            assert await env.agents.pending(wid) == []
    finally:
        if doomed.poll() is None:
            os.kill(doomed.pid, signal.SIGKILL)
            doomed.wait()
        if doomed.stdout is not None:
            doomed.stdout.close()
    assert result["stop_reason"] == "end_turn" and result["state"]["audit"] == []
    assert _runs(started) == 2 and _runs(slow) == 1  # run again, to its end, once
    [_, _, results, _] = result["state"]["messages"]
    assert results["content"][0]["status"] == "success"
    kinds = [e.WhichOneof("attributes") for e in await events(client, wid)]
    assert "workflow_task_timed_out_event_attributes" in kinds


async def test_cancelled_while_a_local_tool_runs(temporal_address: str, tmp_path: Path) -> None:
    from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError

    from interlude.temporal import WORKFLOW, ActivityOptions

    log = tmp_path / "nap"
    async with serving(temporal_address, tools={"nap": ActivityOptions(local=True)}) as env:
        wid = f"nap-{uuid.uuid4().hex[:8]}"
        prompt = _prompt(("nap", {"path": str(log), "seconds": 30}))
        # a short workflow task timeout: the workflow hears of the cancel when the task running
        # the local activity is heartbeated (at 80 % of the timeout), after 1.6 s, not 8
        await env.client.start_workflow(
            WORKFLOW,
            {"agent": "plain", "prompt": prompt, "state": None},
            id=wid,
            task_queue=env.task_queue,
            task_timeout=timedelta(seconds=2),
        )
        await until(recorded(Path(str(log) + ".started")), "the nap to start")
        handle = env.agents.handle(wid)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(handle.result(), 20)  # not the 30 s of the body
        assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
        assert await env.agents.pending(wid) == []
        made = [(c.activity, c.local) for c in await calls_of(env.client, wid)]
    assert _runs(log) == 0  # the body did not run to its end
    # the tool's marker records its cancellation; no model call after it
    assert made == [("interlude.model", True), ("interlude.tool", True)]


async def test_a_worker_without_the_sandbox_runs_and_replays_the_same_run(
    temporal_address: str, tmp_path: Path
) -> None:
    from temporalio.client import WorkflowHistory

    from interlude.temporal import replayer

    from .agents import app

    async with serving(temporal_address, sandboxed=False) as env:
        result, history = await _approved_run(env, tmp_path / "a")
    assert _runs(tmp_path / "a") == 1 and result["text"] == "Done."
    assert shape(history)["workflow_tasks"] == 3
    for sandboxed in (True, False):  # the same history, with and without the sandbox
        await replayer(app, sandboxed=sandboxed).replay_workflow(
            WorkflowHistory("replayed", history)
        )


async def _memo(env: Env, workflow_id: str) -> dict[str, Any]:
    described = await env.client.get_workflow_handle(workflow_id).describe()
    return dict(await described.memo())


async def test_pending_questions_are_read_without_aserving(
    temporal_address: str, tmp_path: Path
) -> None:
    """A paused run keeps its questions in its memo: ``pending`` reads them from the
    workflow's description, so it answers with no worker polling (no query), and the memo is
    cleared when the run ends."""
    from temporalio.client import Client

    from interlude.temporal import AgentClient

    client = await Client.connect(temporal_address)
    queue = f"memo-{uuid.uuid4().hex[:8]}"
    agents = AgentClient(client, task_queue=queue)
    async with serving(temporal_address, queue) as env:
        wid = await agents.start("approve", _prompt(("touch", {"path": str(tmp_path / "a")})))
        [asked] = await _pending(env, wid)
    # the worker is gone: a query would wait for one; the memo answers
    [again] = await asyncio.wait_for(agents.pending(wid), 10)
    assert again == asked and again.name == "approve"
    assert [q["id"] for q in (await _memo(env, wid))["interlude_pending"]] == [asked.id]
    async with serving(temporal_address, queue) as env:
        outcome = await agents.answer(wid, {asked.id: True}, by="alice")
        assert outcome["stop_reason"] == "end_turn"
        assert await agents.pending(wid) == []
        assert "interlude_pending" not in await _memo(env, wid)
    assert _runs(tmp_path / "a") == 1


async def test_questions_too_large_for_the_memo_come_from_the_query(
    temporal_address: str,
) -> None:
    long_path = "x" * 70_000  # the question carries the call: above the memo's 64 KiB
    async with serving(temporal_address) as env:
        wid = await env.agents.start("approve", _prompt(("touch", {"path": long_path})))
        [asked] = await _pending(env, wid)
        assert asked.tool_use is not None and asked.tool_use.input["path"] == long_path
        assert "interlude_pending" not in await _memo(env, wid)
        outcome = await env.agents.answer(wid, {asked.id: False}, by="alice")  # declined
        assert outcome["stop_reason"] == "end_turn"
