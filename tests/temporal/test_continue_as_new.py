"""Continue-as-new while paused: the pause, its interrupt ids and the audit trail carry over."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from .conftest import Env
from .polling import pending, until


def _prompt(*calls: tuple[str, dict[str, object]]) -> str:
    return json.dumps([list(c) for c in calls])


def _runs(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


async def start(env: Env, agent: str, prompt: str, limits: Any) -> tuple[str, str]:
    """Start a run with ``limits`` (``Limits``); its workflow id and first run id."""
    from temporalio.common import SearchAttributePair, TypedSearchAttributes

    from interlude.temporal import WORKFLOW
    from interlude.temporal._workflow import AGENT, PENDING

    workflow_id = f"interlude-{agent}-{uuid.uuid4()}"
    handle = await env.client.start_workflow(
        WORKFLOW,
        {"agent": agent, "prompt": prompt, "state": None, "limits": limits.to_dict()},
        id=workflow_id,
        task_queue=env.task_queue,
        search_attributes=TypedSearchAttributes(
            [SearchAttributePair(AGENT, agent), SearchAttributePair(PENDING, False)]
        ),
    )
    assert handle.first_execution_run_id is not None
    return workflow_id, handle.first_execution_run_id


async def _pending(env: Env, workflow_id: str, count: int = 1) -> list[Any]:
    return await pending(env.agents, workflow_id, count)


async def _runs_of(env: Env, workflow_id: str) -> list[str]:
    """The run ids of a workflow's chain, oldest first."""
    query = f"WorkflowId = '{workflow_id}'"

    async def listed() -> list[Any]:  # visibility is eventually consistent
        return [(w.start_time, w.run_id) async for w in env.client.list_workflows(query)]

    found = await until(listed, f"the runs of {workflow_id} listed")
    return [run for _, run in sorted(found)]


async def _last_event(env: Env, workflow_id: str, run_id: str) -> Any:
    handle = env.client.get_workflow_handle(workflow_id, run_id=run_id)
    events = [e async for e in handle.fetch_history_events()]
    return events[-1]


async def test_continues_as_new_while_paused_and_keeps_the_pause(env: Env, tmp_path: Path) -> None:
    from temporalio.api.enums.v1 import EventType

    from interlude.temporal import Limits

    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    calls = [("touch", {"path": str(p)}) for p in (a, b, c)]
    limits = Limits(continue_after_model_calls=1)
    wid, first = await start(env, "approve", _prompt(*calls), limits)
    questions = await _pending(env, wid, 3)  # asked by the new run (the first one went on)
    assert [q.reason for q in questions] == [{"path": str(p)} for p in (a, b, c)]
    described = await env.client.get_workflow_handle(wid).describe()
    assert described.run_id != first
    last = await _last_event(env, wid, first)
    assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW

    outcome = await env.agents.answer(wid, {questions[0].id: True}, by="alice")
    assert outcome["stop_reason"] == "interrupt"
    assert [i["id"] for i in outcome["interrupts"]] == [q.id for q in questions[1:]]
    assert [q.id for q in await env.agents.pending(wid)] == [q.id for q in questions[1:]]
    outcome = await env.agents.answer(
        wid, {questions[1].id: False, questions[2].id: True}, by="bob"
    )
    assert outcome["stop_reason"] == "end_turn" and outcome["text"] == "Done."
    result = await env.agents.result(wid)  # follows the chain to its last run
    assert result["stop_reason"] == "end_turn"
    assert (_runs(a), _runs(b), _runs(c)) == (1, 0, 1)  # nothing completed ran again
    audit = [(e["interrupt_id"], e["by"], e["answer"]) for e in result["state"]["audit"]]
    assert audit == [
        (questions[0].id, "alice", True),
        (questions[1].id, "bob", False),
        (questions[2].id, "bob", True),
    ]
    assert len(await _runs_of(env, wid)) == 2  # the second run made no model call: no third


async def test_state_size_limit_continues_after_tool_retry_pause(env: Env, tmp_path: Path) -> None:
    from interlude.temporal import Limits, replayer

    from .agents import app

    log = tmp_path / "f"
    limits = Limits(continue_above_state_bytes=1)
    wid, first = await start(env, "retry", _prompt(("flaky", {"path": str(log)})), limits)
    [question] = await _pending(env, wid)
    assert question.source == "after_tool_call" and _runs(log) == 1
    assert (await env.client.get_workflow_handle(wid).describe()).run_id != first

    # a refused answer still changes nothing in the continued run
    from interlude.errors import UnknownInterruptError

    try:
        await env.agents.answer(wid, {"v1:nope": True}, by="alice")
    except UnknownInterruptError:
        pass
    else:
        raise AssertionError("an unknown id was accepted")
    outcome = await env.agents.answer(wid, {question.id: True}, by="alice")
    assert outcome["stop_reason"] == "end_turn"
    result = await env.agents.result(wid)
    assert _runs(log) == 2  # retried once; the first (failed) run of the tool not again
    [entry] = result["state"]["audit"]
    assert entry["interrupt_id"] == question.id and entry["by"] == "alice"
    [block] = result["state"]["messages"][2]["content"]
    assert block["status"] == "success"

    runs = await _runs_of(env, wid)
    assert len(runs) == 2
    for run_id in runs:  # every run of the chain replays deterministically
        history = await env.client.get_workflow_handle(wid, run_id=run_id).fetch_history()
        await replayer(app).replay_workflow(history)


def _two_rounds(request: Any) -> Any:
    """Asks for ``touch`` on the prompt's path, twice (one call per round), then ends."""
    from interlude import ToolUse

    rounds = sum(1 for m in request.messages if m.role == "assistant")
    if rounds >= 2:
        return "Done."
    path = request.messages[0].content[0].text
    return [ToolUse(f"call_{rounds}", "touch", {"path": path})]


def _build_two_rounds(session: Any) -> Any:
    from interlude import Agent
    from interlude.hooks import BeforeToolCallEvent
    from interlude.testing import FunctionModel

    from .agents import _approve, touch

    agent = Agent(
        FunctionModel(_two_rounds), tools=[touch], session=session.store, session_id=session.id
    )
    agent.hooks.add_callback(BeforeToolCallEvent, _approve)
    return agent


async def test_continues_as_new_after_an_answer_with_the_update_finished(
    temporal_address: str, tmp_path: Path
) -> None:
    from temporalio.client import Client

    from interlude import App
    from interlude.temporal import AgentClient, Limits, worker

    app = App()
    app.agent("two_rounds")(_build_two_rounds)
    client = await Client.connect(temporal_address)
    queue = f"c-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "t"
    async with worker(client, app, task_queue=queue):
        env = Env(client, AgentClient(client, task_queue=queue), queue, temporal_address)
        wid, _ = await start(env, "two_rounds", str(log), Limits(continue_after_model_calls=1))
        [first] = await _pending(env, wid)
        outcome = await env.agents.answer(wid, {first.id: True}, by="alice")
        # the Update returned the new pause, then the run continued as new (a third run)
        assert outcome["stop_reason"] == "interrupt"
        [second] = outcome["interrupts"]
        [pending] = await _pending(env, wid)
        assert pending.id == second["id"] != first.id
        outcome = await env.agents.answer(wid, {second["id"]: True}, by="bob")
        assert outcome["stop_reason"] == "end_turn"
        result = await env.agents.result(wid)
        assert _runs(log) == 2
        assert [e["by"] for e in result["state"]["audit"]] == ["alice", "bob"]
        assert len(await _runs_of(env, wid)) == 3


async def test_a_signed_agent_of_an_app_without_a_name_continues_as_new(
    env: Env, tmp_path: Path
) -> None:
    """The state a continued run carries is signed under the app's name for the agent, and
    the next run, built by the same factory, verifies it: the answer is applied."""
    from interlude.temporal import Limits

    a, b = tmp_path / "a", tmp_path / "b"
    calls = [("touch", {"path": str(p)}) for p in (a, b)]
    wid, first = await start(
        env, "approve_signed", _prompt(*calls), Limits(continue_after_model_calls=1)
    )
    questions = await _pending(env, wid, 2)
    assert (await env.client.get_workflow_handle(wid).describe()).run_id != first
    outcome = await env.agents.answer(
        wid, {questions[0].id: True, questions[1].id: True}, by="alice"
    )
    assert outcome["stop_reason"] == "end_turn"
    assert (_runs(a), _runs(b)) == (1, 1)
