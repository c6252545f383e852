"""Cancelling an agent's workflow ends the run as cancelled (a running tool activity is
cancelled, not turned into an error result), and nothing is left pending."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import Env, serving
from .history import calls_of
from .polling import until
from .test_workflow import _pending, _prompt, _runs


@pytest.fixture
async def cancel_env(temporal_address: str) -> AsyncIterator[Env]:
    """A worker whose slow tools heartbeat every second (so they hear a cancel)."""
    from .agents import KILL_TEST_TOOLS

    async with serving(temporal_address, tools=KILL_TEST_TOOLS) as running:
        yield running


async def _until(predicate: Any, what: str) -> None:
    await until(predicate, what)


async def _cancelled(env: Env, workflow_id: str) -> list[Any]:
    """Wait for the workflow to close as cancelled; its history's event types."""
    from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
    from temporalio.exceptions import CancelledError

    handle = env.client.get_workflow_handle(workflow_id)
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(handle.result(), 30)
    assert isinstance(failed.value.cause, CancelledError)
    described = await handle.describe()
    assert described.status == WorkflowExecutionStatus.CANCELED
    assert await env.agents.pending(workflow_id) == []
    return [e.event_type async for e in handle.fetch_history_events()]


def _pending_attribute(described: Any) -> Any:
    from interlude.temporal._workflow import PENDING

    return described.typed_search_attributes.get(PENDING)


async def test_cancelled_while_a_tool_runs_the_activity_is_cancelled(
    cancel_env: Env, tmp_path: Path
) -> None:
    from temporalio.api.enums.v1 import EventType

    log = tmp_path / "nap"
    wid = await cancel_env.agents.start(
        "plain", _prompt(("nap", {"path": str(log), "seconds": 30}))
    )

    async def started() -> bool:
        return _runs(Path(str(log) + ".started")) == 1

    await _until(started, "the tool started")
    await cancel_env.agents.handle(wid).cancel()
    kinds = await _cancelled(cancel_env, wid)
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED in kinds
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED in kinds  # it stopped before the end
    made = [(c.activity, c.local) for c in await calls_of(cancel_env.client, wid)]
    assert made == [("interlude.model", True), ("interlude.tool", False)]  # no model call after
    assert _runs(log) == 0  # the body did not run to its end
    described = await cancel_env.agents.handle(wid).describe()
    assert _pending_attribute(described) is False
    from interlude.temporal import replayer

    from .agents import app

    history = await cancel_env.client.get_workflow_handle(wid).fetch_history()
    await replayer(app).replay_workflow(history)


async def test_cancelled_while_paused_nothing_is_left_pending(
    cancel_env: Env, tmp_path: Path
) -> None:
    wid = await cancel_env.agents.start(
        "approve", _prompt(("touch", {"path": str(tmp_path / "a")}))
    )
    await _pending(cancel_env, wid)

    async def listed() -> bool:
        return wid in await cancel_env.agents.paused("approve")

    await _until(listed, "listed as paused")
    await cancel_env.agents.handle(wid).cancel()
    await _cancelled(cancel_env, wid)
    assert _pending_attribute(await cancel_env.agents.handle(wid).describe()) is False
    assert _runs(tmp_path / "a") == 0

    async def unlisted() -> bool:
        return wid not in await cancel_env.agents.paused()

    await _until(unlisted, "no longer listed as paused")


async def test_cancelled_while_an_answer_runs_the_tool_the_update_says_so(
    cancel_env: Env, tmp_path: Path
) -> None:
    from interlude.errors import ReplayedException

    log = tmp_path / "nap"
    wid = await cancel_env.agents.start(
        "approve", _prompt(("nap", {"path": str(log), "seconds": 30}))
    )
    [question] = await _pending(cancel_env, wid)
    answering = asyncio.ensure_future(
        cancel_env.agents.answer(wid, {question.id: True}, by="alice", timeout=30)
    )

    async def started() -> bool:
        return _runs(Path(str(log) + ".started")) == 1

    await _until(started, "the approved tool started")
    await cancel_env.agents.handle(wid).cancel()
    with pytest.raises(ReplayedException, match="the workflow was cancelled"):
        await answering
    await _cancelled(cancel_env, wid)
    assert _pending_attribute(await cancel_env.agents.handle(wid).describe()) is False
    assert _runs(log) == 0


async def test_a_run_that_fails_after_a_pause_leaves_nothing_pending(
    cancel_env: Env, tmp_path: Path
) -> None:
    from temporalio.client import WorkflowExecutionStatus

    from interlude.errors import ModelError

    wid = await cancel_env.agents.start(
        "approve_then_model_error", _prompt(("touch", {"path": str(tmp_path / "a")}))
    )
    [question] = await _pending(cancel_env, wid)
    with pytest.raises(ModelError):
        await cancel_env.agents.answer(wid, {question.id: True})
    described = await cancel_env.agents.handle(wid).describe()
    assert described.status == WorkflowExecutionStatus.FAILED
    assert _pending_attribute(described) is False


async def test_cancelling_a_graph_mid_node_ends_it_cancelled(
    cancel_env: Env, tmp_path: Path
) -> None:
    """A graph's workflow cancelled while a node's tool runs: the tool's activity is
    cancelled, the workflow ends cancelled, and nothing is pending."""
    import json

    from .agents import release

    env = cancel_env
    draft, slow = tmp_path / "draft", tmp_path / "slow"
    task = json.dumps(
        {
            "draft": [["touch", {"path": str(draft)}]],
            "publish": [["slow", {"path": str(slow), "seconds": 60}]],
        }
    )
    wid = await env.agents.start("review", task)
    [question] = await _pending(env, wid)
    answered = asyncio.ensure_future(env.agents.answer(wid, {question.id: True}))
    started = Path(str(slow) + ".started")

    async def body_started() -> bool:
        return _runs(started) == 1

    await _until(body_started, "the publish node's slow body")
    await env.client.get_workflow_handle(wid).cancel()
    try:
        await _cancelled(env, wid)
    finally:
        release(slow)
    with pytest.raises(Exception, match="cancel"):
        await answered
    assert _runs(draft) == 1 and _runs(started) == 1  # the draft node ran once, not again
