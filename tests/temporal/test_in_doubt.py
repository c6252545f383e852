"""A tool that is not idempotent runs at most once under Temporal: when its single attempt is
lost (its worker killed mid-body), the run pauses with the in-doubt question the embedded engine
asks after a crash (same id, same answers); an idempotent tool is retried on its own."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from interlude import ToolUse

from .conftest import Env
from .history import calls_of
from .test_scale import _start_worker_process, wait_until_only_slow_runs
from .test_workflow import _prompt, _runs

BODY_SECONDS = 60
"""How long the ``slow`` body would run: far longer than any test waits, so it is surely still
running when its worker is killed; the test releases it (``agents.release``) once in doubt."""


async def _until(check: Any, what: str, within: float = 60.0) -> Any:
    """Poll ``await check()`` until it returns something true (load makes each step slower:
    the test waits on the condition, up to ``within`` seconds, not on a number of polls)."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        found = await check()
        if found:
            return found
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"no {what} within {within} s")
        await asyncio.sleep(0.05)


async def _scheduled(client: Any, workflow_id: str) -> list[tuple[str, str, int]]:
    """(activity type, tool, maximum attempts) of each regular activity the workflow
    scheduled (local ones are left out)."""
    return [
        (c.activity, c.tool, c.attempts) for c in await calls_of(client, workflow_id) if not c.local
    ]


@asynccontextmanager
async def _killed_mid_slow(
    address: str, tmp_path: Path, limits: Any = None
) -> AsyncIterator[tuple[Env, str]]:
    """A run whose ``slow`` tool (not idempotent) was running when its worker was SIGKILLed;
    yields it with another worker up."""
    from temporalio.client import Client

    from interlude.temporal import AgentClient, worker

    from .agents import KILL_TEST_TOOLS, app

    queue = f"doubt-{uuid.uuid4().hex[:8]}"
    client = await Client.connect(address)
    agents = AgentClient(client, task_queue=queue)
    doomed = _start_worker_process(address, queue)
    try:
        assert doomed.stdout is not None and doomed.stdout.readline().strip() == "ready"
        fast, slow = tmp_path / "fast", tmp_path / "slow"
        body = {"path": str(slow), "seconds": BODY_SECONDS}
        calls = [("touch", {"path": str(fast)}), ("slow", body)]
        wid = await agents.start("plain", _prompt(*calls), limits=limits)
        started = Path(str(slow) + ".started")

        async def has_started() -> int:
            return _runs(started)

        await _until(has_started, "start of the slow body")
        await wait_until_only_slow_runs(client, wid)  # the fast tool ran: in parallel, maybe last
        assert _runs(started) == 1 and _runs(fast) == 1
        os.kill(doomed.pid, signal.SIGKILL)  # mid-body: the slow tool has not finished
        doomed.wait()
        sticky = {"sticky_queue_schedule_to_start_timeout": timedelta(seconds=1)}
        async with worker(client, app, task_queue=queue, tools=KILL_TEST_TOOLS, **sticky):
            yield Env(client, agents, queue, address), wid
    finally:
        if doomed.poll() is None:
            os.kill(doomed.pid, signal.SIGKILL)
            doomed.wait()
        if doomed.stdout is not None:
            doomed.stdout.close()


async def _question(env: Env, workflow_id: str) -> Any:
    """The in-doubt question (the lost attempt is noticed after its 1 s heartbeat timeout);
    then the killed body is released: were it run again on its own, it would finish."""
    from .agents import release

    found = await _until(lambda: env.agents.pending(workflow_id), "in-doubt question")
    release(Path(found[0].tool_use.input["path"]))
    return found


@pytest.mark.parametrize("answer", ["rerun", "fail", {"result": "done by hand"}])
async def test_a_tool_killed_mid_body_is_in_doubt_and_a_person_decides(
    temporal_address: str, tmp_path: Path, answer: Any
) -> None:
    from interlude._interrupt import interrupt_id
    from interlude.errors import ResumeInputError

    slow = tmp_path / "slow"
    started = Path(str(slow) + ".started")
    async with _killed_mid_slow(temporal_address, tmp_path) as (env, wid):
        [question] = await _question(env, wid)
        # the embedded engine's question: same id scheme, name, source, tool use and reason
        assert question.id == interrupt_id("in_doubt", "call_1", "in_doubt")
        assert (question.name, question.source) == ("in_doubt", "in_doubt")
        body = {"path": str(slow), "seconds": BODY_SECONDS}
        assert question.tool_use == ToolUse("call_1", "slow", body)
        assert isinstance(question.reason["started_at"], float)
        assert "'rerun', 'fail' or {'result'" in question.reason["message"]
        assert _runs(started) == 1 and _runs(slow) == 0  # not run again on its own
        with pytest.raises(ResumeInputError, match="'rerun', 'fail'"):
            await env.agents.answer(wid, {question.id: "yes"})
        outcome = await env.agents.answer(wid, {question.id: answer}, by="alice")
        assert outcome["stop_reason"] == "end_turn"
        result = await env.agents.result(wid)
        scheduled = await _scheduled(env.client, wid)
        history = await env.client.get_workflow_handle(wid).fetch_history()
    from interlude.temporal import replayer

    from .agents import app

    await replayer(app).replay_workflow(history)  # the lost attempt and the question replay
    [_, _, results, _] = result["state"]["messages"]
    block = results["content"][1]
    tools = [(tool, attempts) for kind, tool, attempts in scheduled if kind == "interlude.tool"]
    if answer == "rerun":
        assert _runs(started) == 2 and _runs(slow) == 1
        assert (block["status"], block["content"][0]["text"]) == ("success", "slow done")
        assert tools == [("touch", 1), ("slow", 1), ("slow", 1)]
    else:
        assert _runs(started) == 1 and _runs(slow) == 0
        assert tools == [("touch", 1), ("slow", 1)]
        if answer == "fail":
            assert block["status"] == "error" and "may have had effects" in str(block)
        else:
            assert (block["status"], block["content"][0]["text"]) == ("success", "done by hand")
    [entry] = result["state"]["audit"]
    assert (entry["interrupt_id"], entry["answer"], entry["by"]) == (question.id, answer, "alice")


async def test_attempts_follow_idempotence_unless_the_options_say_otherwise(
    temporal_address: str, tmp_path: Path
) -> None:
    from temporalio.client import Client
    from temporalio.common import RetryPolicy

    from interlude.temporal import ActivityOptions, AgentClient, worker

    from .agents import app

    client = await Client.connect(temporal_address)
    queue = f"attempts-{uuid.uuid4().hex[:8]}"
    tools = {"flaky": ActivityOptions(retry_policy=RetryPolicy(maximum_attempts=3))}
    calls = [
        ("touch", {"path": str(tmp_path / "t")}),  # not idempotent: one attempt
        ("slow_safe", {"path": str(tmp_path / "s"), "seconds": 0}),  # idempotent: the policy's
        ("flaky", {"path": str(tmp_path / "f")}),  # options given: as given
    ]
    async with worker(client, app, task_queue=queue, tools=tools):
        agents = AgentClient(client, task_queue=queue)
        wid = await agents.start("plain", _prompt(*calls))
        assert (await agents.result(wid))["stop_reason"] == "end_turn"
    tools_scheduled = [(t, n) for kind, t, n in await _scheduled(client, wid) if t]
    assert sorted(tools_scheduled) == [("flaky", 3), ("touch", 1)]
    # the idempotent tool, given no options, ran as a local activity (retried in the worker)
    local = [c.activity for c in await calls_of(client, wid) if c.local]
    assert sorted(local) == ["interlude.model", "interlude.model", "interlude.tool"]


async def test_an_in_doubt_pause_continues_as_new_and_means_the_same(
    temporal_address: str, tmp_path: Path
) -> None:
    """The pause is carried as the embedded engine keeps it (the call started, no result):
    after a continue-as-new, "fail" still does not run the body again."""
    from interlude.temporal import Limits

    from .test_continue_as_new import _runs_of

    slow = tmp_path / "slow"
    limits = Limits(continue_after_model_calls=1)
    async with _killed_mid_slow(temporal_address, tmp_path, limits) as (env, wid):
        [question] = await _question(env, wid)

        async def two_runs() -> bool:
            return len(await _runs_of(env, wid)) == 2

        await _until(two_runs, "second run")  # continued as new while in doubt
        assert len(await _runs_of(env, wid)) == 2
        assert [q.id for q in await env.agents.pending(wid)] == [question.id]
        outcome = await env.agents.answer(wid, {question.id: "fail"}, by="alice")
        assert outcome["stop_reason"] == "end_turn"
        result = await env.agents.result(wid)
    assert _runs(Path(str(slow) + ".started")) == 1 and _runs(slow) == 0
    block = result["state"]["messages"][2]["content"][1]
    assert block["status"] == "error" and "may have had effects" in str(block)
