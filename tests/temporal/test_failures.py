"""A run that fails fails its workflow (no endless workflow-task retries); the Update waiting
on it raises the same error; oversized answers are refused; closed workflows and absent
workers give clear errors."""

from __future__ import annotations

import asyncio
import json
import uuid
import warnings
from pathlib import Path
from typing import Any

import pytest

from .conftest import Env
from .polling import until
from .test_workflow import _pending, _prompt


async def _task_failures(env: Env, workflow_id: str) -> int:
    from temporalio.api.enums.v1 import EventType

    handle = env.client.get_workflow_handle(workflow_id)
    kinds = [e.event_type async for e in handle.fetch_history_events()]
    return kinds.count(EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED)


async def _failure(env: Env, workflow_id: str) -> Any:
    from temporalio.client import WorkflowFailureError

    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(env.agents.result(workflow_id), 20)
    assert await _task_failures(env, workflow_id) == 0
    return failed.value.cause


async def test_a_hook_raising_after_the_answer_fails_workflow_and_update(
    env: Env, tmp_path: Path
) -> None:
    from interlude.errors import ReplayedException

    wid = await env.agents.start(
        "approve_then_crash", _prompt(("touch", {"path": str(tmp_path / "a")}))
    )
    [question] = await _pending(env, wid)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no UnfinishedUpdateHandlersWarning
        with pytest.raises(ReplayedException, match="RuntimeError: hook exploded after"):
            await asyncio.wait_for(env.agents.answer(wid, {question.id: True}), 20)
    cause = await _failure(env, wid)
    assert cause.type == "RuntimeError" and "hook exploded after the answer" in cause.message
    assert await env.agents.pending(wid) == []


@pytest.mark.parametrize(
    ("agent", "kind", "text"),
    [("raisemodel", "ValueError", "model exploded"), ("badmodel", "", "")],
)
async def test_a_model_raising_or_malformed_fails_the_workflow(
    env: Env, agent: str, kind: str, text: str
) -> None:
    wid = await env.agents.start(agent, "hi")
    cause = await _failure(env, wid)
    assert cause.non_retryable
    if kind:
        assert cause.type == kind and text in cause.message


async def test_an_agent_the_worker_lacks_fails_the_workflow(env: Env) -> None:
    wid = await env.agents.start("no-such-agent", "hi")
    cause = await _failure(env, wid)
    assert cause.type == "UnknownAgentError" and "no-such-agent" in cause.message


async def test_an_update_waiting_on_a_run_that_fails_raises_its_error(
    env: Env, tmp_path: Path
) -> None:
    from interlude.errors import ModelError

    wid = await env.agents.start(
        "approve_then_model_error", _prompt(("touch", {"path": str(tmp_path / "a")}))
    )
    [question] = await _pending(env, wid)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ModelError, match="provider down for good"):
            await asyncio.wait_for(env.agents.answer(wid, {question.id: True}), 30)
    cause = await _failure(env, wid)
    assert cause.type == "ModelError"


async def test_oversized_answers_are_refused_naming_size_and_limit(
    env: Env, tmp_path: Path
) -> None:
    from interlude.errors import ResumeInputError

    wid = await env.agents.start("approve", _prompt(("touch", {"path": str(tmp_path / "a")})))
    [question] = await _pending(env, wid)
    with pytest.raises(ResumeInputError, match=r"above the limit of 262144 bytes") as refused:
        await env.agents.answer(wid, {question.id: "y" * 300_000})
    assert "Limits.max_answer_bytes" in str(refused.value)
    assert [q.id for q in await env.agents.pending(wid)] == [question.id]  # nothing changed
    outcome = await env.agents.answer(wid, {question.id: True})
    assert outcome["stop_reason"] == "end_turn"


async def test_a_result_above_the_limit_omits_its_state(env: Env, tmp_path: Path) -> None:
    from interlude.temporal import Limits

    from .test_continue_as_new import start

    limits = Limits(max_answer_bytes=100_000, max_result_bytes=150_000)
    calls = [("touch", {"path": str(tmp_path / "a")})] * 2
    wid, _ = await start(env, "approve", _prompt(*calls), limits)
    for question in await _pending(env, wid, 2):
        await env.agents.answer(wid, {question.id: "z" * 90_000})
    result = await env.agents.result(wid)
    assert result["stop_reason"] == "end_turn" and result["state"] is None
    assert "Limits.max_result_bytes" in result["state_omitted"]
    assert Limits.from_dict(limits.to_dict()) == limits


async def test_answer_times_out_without_a_worker(env: Env) -> None:
    from interlude.temporal import AnswerTimeoutError

    queue = f"nobody-{uuid.uuid4().hex[:8]}"
    wid = await env.client.start_workflow(
        "interlude.agent",
        {"agent": "approve", "prompt": json.dumps([]), "state": None},
        id=f"t-{uuid.uuid4().hex[:8]}",
        task_queue=queue,
    )
    with pytest.raises(AnswerTimeoutError, match=wid.id):
        await env.agents.answer(wid.id, {"v1:x": True}, timeout=1.5)
    await wid.terminate()


async def test_a_closed_workflow_has_nothing_pending_and_refuses_answers(
    env: Env, tmp_path: Path
) -> None:
    from interlude.errors import NotPausedError

    for how in ("terminate", "cancel", "complete"):
        wid = await env.agents.start("approve", _prompt(("touch", {"path": str(tmp_path / "a")})))
        [question] = await _pending(env, wid)
        handle = env.agents.handle(wid)
        if how == "terminate":
            await handle.terminate()
        elif how == "cancel":
            await handle.cancel()
        else:
            await env.agents.answer(wid, {question.id: True})

        async def closed(handle: Any = handle) -> bool:
            return bool((await handle.describe()).status.name != "RUNNING")

        await until(closed, f"{wid} to close")
        assert await env.agents.pending(wid) == []
        with pytest.raises(NotPausedError, match=f"workflow '{wid}' is closed"):
            await env.agents.answer(wid, {question.id: True})


async def test_answers_above_temporals_limit_are_refused_by_the_client(
    env: Env, tmp_path: Path
) -> None:
    from interlude.errors import ResumeInputError

    wid = await env.agents.start("approve", _prompt(("touch", {"path": str(tmp_path / "a")})))
    [question] = await _pending(env, wid)
    with pytest.raises(ResumeInputError, match="above the limit of 1572864 bytes"):
        await env.agents.answer(wid, {question.id: "y" * 2_500_000}, timeout=10)
    outcome = await env.agents.answer(wid, {question.id: True})  # the workflow is not wedged
    assert outcome["stop_reason"] == "end_turn"
