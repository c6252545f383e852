"""Payloads above the limits fail clearly, before Temporal would refuse them: a tool's result
or request comes back to the model as the tool's error result (once, not retried), a hook's
request fails the run, and a state too large to continue as new stays in its run."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from interlude import Agent, AgentSession, App
from interlude.hooks import AfterModelCallEvent
from interlude.temporal import as_activity
from interlude.testing import FunctionModel
from interlude.testing._models import ModelRequest

from .conftest import Env, serving
from .history import calls_of
from .test_continue_as_new import _runs_of
from .test_workflow import _pending, _prompt, _runs


async def _events(env: Env, workflow_id: str) -> list[Any]:
    handle = env.client.get_workflow_handle(workflow_id)
    return [e.event_type async for e in handle.fetch_history_events()]


def _result_block(result: dict[str, Any], index: int = 0) -> dict[str, Any]:
    [_, _, results, _] = result["state"]["messages"]
    block: dict[str, Any] = results["content"][index]
    return block


async def test_a_tool_result_above_the_limit_is_its_error_result_once(
    env: Env, tmp_path: Path
) -> None:
    from temporalio.api.enums.v1 import EventType

    log = tmp_path / "big"
    wid = await env.agents.start("plain", _prompt(("big", {"path": str(log), "size": 2_500_000})))
    result = await env.agents.result(wid)
    assert result["stop_reason"] == "end_turn"
    block = _result_block(result)
    text = block["content"][0]["text"]
    assert block["status"] == "error" and text.startswith("PayloadLimitError: the result of tool")
    assert "above the limit of 1572864 bytes (Limits.max_request_bytes" in text
    size = int(text.split(" is ")[1].split(" bytes")[0])
    assert size > 2_500_000
    assert _runs(log) == 1  # once: not retried
    kinds = await _events(env, wid)
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED not in kinds


async def test_a_tool_request_above_the_limit_is_its_error_result(env: Env, tmp_path: Path) -> None:
    from interlude.temporal import Limits

    log = tmp_path / "t"
    limits = Limits(max_request_bytes=20_000, max_answer_bytes=100_000)
    wid = await env.agents.start("typed", _prompt(("touch", {"path": str(log)})), limits=limits)
    [question] = await _pending(env, wid)
    answer = {"approved": True, "note": "n" * 30_000}  # carried to the tool with its answers
    outcome = await env.agents.answer(wid, {question.id: answer})
    assert outcome["stop_reason"] == "end_turn"
    block = _result_block(await env.agents.result(wid))
    text = block["content"][0]["text"]
    assert block["status"] == "error"
    assert text.startswith("PayloadLimitError: the request of tool 'touch' is ")
    assert "above the limit of 20000 bytes" in text
    assert _runs(log) == 0  # no activity was scheduled for it


hook_app = App()


def _long_reply(request: ModelRequest) -> str:
    return "words " * 500  # 3000 characters


def _look(event: AfterModelCallEvent) -> None:
    """A hook run as an activity (what it does does not matter here)."""


@hook_app.agent("chatty")
def build_chatty(session: AgentSession) -> Agent:
    agent = Agent(
        FunctionModel(_long_reply),
        session=session.store,
        session_id=session.id,
        state={"pad": "p" * 3000},
    )
    agent.hooks.add_callback(AfterModelCallEvent, as_activity(_look, name="look"))
    return agent


def _huge_reply(request: ModelRequest) -> str:
    return "w" * 2_500_000


@hook_app.agent("huge")
def build_huge(session: AgentSession) -> Agent:
    return Agent(FunctionModel(_huge_reply), session=session.store, session_id=session.id)


@pytest.fixture
async def hook_env(temporal_address: str) -> AsyncIterator[Env]:
    async with serving(temporal_address, app=hook_app) as running:
        yield running


async def test_a_hook_request_above_the_limit_fails_the_run(hook_env: Env) -> None:
    from temporalio.client import WorkflowFailureError

    from interlude.temporal import Limits

    # The model's request (the state, a short prompt) fits, so does its reply; the hook's
    # request carries both
    limits = Limits(max_request_bytes=5_000)
    wid = await hook_env.agents.start("chatty", "hi", limits=limits)
    with pytest.raises(WorkflowFailureError) as failed:
        await hook_env.agents.result(wid)
    cause = failed.value.cause
    assert cause.type == "PayloadLimitError"
    assert "the request of hook 'look' (AfterModelCallEvent) is " in cause.message
    assert "above the limit of 5000 bytes" in cause.message
    made = [c.activity for c in await calls_of(hook_env.client, wid)]
    assert made == ["interlude.model"]  # the model call only


async def test_a_state_too_large_to_continue_as_new_stays_in_its_run(
    env: Env, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from interlude.temporal import Limits

    from .test_continue_as_new import start

    a, b = tmp_path / "a", tmp_path / "b"
    # The state holds a long answer twice (in the audit trail and in the pause), so it is
    # larger than the limit while every activity request stays below it.
    limits = Limits(continue_above_state_bytes=20_000, max_request_bytes=25_000)
    calls = [("touch", {"path": str(a)}), ("touch", {"path": str(b)})]
    wid, first_run = await start(env, "approve", _prompt(*calls), limits)
    q1, q2 = await _pending(env, wid, 2)
    with caplog.at_level(logging.WARNING):
        # a long answer (it declines) makes the state larger than the limit: a continue-as-new
        # would carry it, so the run stays (Temporal would refuse it above 2 MiB)
        outcome = await env.agents.answer(wid, {q1.id: "n" * 15_000}, by="alice")
        assert [i["id"] for i in outcome["interrupts"]] == [q2.id]
        outcome = await env.agents.answer(wid, {q2.id: True}, by="bob")
    assert outcome["stop_reason"] == "end_turn"
    result = await env.agents.result(wid)
    assert json.dumps(result["state"]).count("n" * 15_000) >= 1
    assert await _runs_of(env, wid) == [first_run]  # never continued as new
    assert (_runs(a), _runs(b)) == (0, 1)
    assert [(e["by"], e["interrupt_id"]) for e in result["state"]["audit"]] == [
        ("alice", q1.id),
        ("bob", q2.id),
    ]
    warned = [r.getMessage() for r in caplog.records if "continue as new" in r.getMessage()]
    assert warned and "above the limit of 25000 bytes" in warned[0]


async def test_a_model_response_above_the_limit_fails_the_run_once(hook_env: Env) -> None:
    from temporalio.client import WorkflowFailureError

    wid = await hook_env.agents.start("huge", "hi")
    with pytest.raises(WorkflowFailureError) as failed:
        await hook_env.agents.result(wid)
    cause = failed.value.cause
    assert cause.type == "PayloadLimitError"
    assert cause.message.startswith("the model's response is ")
    assert "above the limit of 1572864 bytes" in cause.message
    [call] = await calls_of(hook_env.client, wid)
    assert (call.activity, call.local, call.attempt) == ("interlude.model", True, 1)  # not retried
