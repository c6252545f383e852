"""Hook callbacks run as activities (``as_activity``): I/O in a hook, outside workflow code."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from interlude import Agent, AgentSession, App
from interlude.hooks import AfterToolCallEvent, BeforeToolCallEvent
from interlude.temporal import as_activity

from .agents import _agent, _approve
from .conftest import Env
from .polling import pending

hook_app = App()


def _prompt_calls(*calls: tuple[str, dict[str, object]]) -> str:
    return json.dumps([list(c) for c in calls])


def _note(event: BeforeToolCallEvent) -> None:
    """I/O in a hook: record the call in ``<path>.hook``; redirect ``-moved`` paths, refuse
    ``-no`` paths."""
    path = str(event.tool_use.input["path"])
    with open(path + ".hook", "a", encoding="utf-8") as f:
        f.write(f"{os.getpid()} {event.tool_use.name} replay={event.is_replay}\n")
    if path.endswith("-no"):
        event.cancel("the hook said no")
    elif path.endswith("-moved"):
        event.tool_use = type(event.tool_use)(
            event.tool_use.id, event.tool_use.name, {"path": path + "-here"}
        )


def _append(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


async def _after(event: AfterToolCallEvent) -> None:  # an async callback
    path = str(event.tool_use.input["path"])
    await asyncio.to_thread(_append, path + ".after", event.result.status)


@hook_app.agent("noted")
def build_noted(session: AgentSession) -> Agent:
    agent = _agent(session)
    agent.hooks.add_callback(BeforeToolCallEvent, as_activity(_note))
    agent.hooks.add_callback(AfterToolCallEvent, as_activity(_after))
    return agent


@hook_app.agent("noted_approve")
def build_noted_approve(session: AgentSession) -> Agent:
    agent = _agent(session)
    agent.hooks.add_callback(BeforeToolCallEvent, _approve)
    agent.hooks.add_callback(BeforeToolCallEvent, as_activity(_note))
    return agent


def _asks(event: BeforeToolCallEvent) -> None:
    event.interrupt("approve", reason="no")


@hook_app.agent("asks")
def build_asks(session: AgentSession) -> Agent:
    agent = _agent(session)
    agent.hooks.add_callback(BeforeToolCallEvent, as_activity(_asks))
    return agent


@pytest.fixture
async def hook_env(temporal_address: str) -> AsyncIterator[Env]:
    """A worker serving ``hook_app`` with the ``interlude.hook`` activity registered (built
    here, as ``worker()`` does, until ``worker()`` registers ``hook_activity`` itself)."""
    from temporalio.client import Client
    from temporalio.worker import Worker

    from interlude.temporal import (
        AgentClient,
        AgentWorkflow,
        hook_activity,
        model_activity,
        tool_activity,
    )
    from interlude.temporal._registry import DEFAULT_MODEL, Registration, register
    from interlude.temporal._worker import _runner

    client = await Client.connect(temporal_address)
    queue = f"h-{uuid.uuid4().hex[:8]}"
    register(queue, Registration(hook_app, DEFAULT_MODEL, {}))
    async with Worker(
        client,
        task_queue=queue,
        workflows=[AgentWorkflow],
        activities=[model_activity, tool_activity, hook_activity],
        workflow_runner=_runner(hook_app, ()),
    ):
        yield Env(client, AgentClient(client, task_queue=queue), queue, temporal_address)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def _activity_types(env: Env, workflow_id: str) -> list[str]:
    handle = env.client.get_workflow_handle(workflow_id)
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        async for e in handle.fetch_history_events()
        if e.HasField("activity_task_scheduled_event_attributes")
    ]


async def test_a_hook_doing_io_runs_as_an_activity(hook_env: Env, tmp_path: Path) -> None:
    from interlude.temporal import replayer

    plain, no, moved = tmp_path / "a", tmp_path / "b-no", tmp_path / "c-moved"
    calls = [("touch", {"path": str(p)}) for p in (plain, no, moved)]
    wid = await hook_env.agents.start("noted", _prompt_calls(*calls))
    result = await hook_env.agents.result(wid)
    assert result["stop_reason"] == "end_turn"
    for p in (plain, no, moved):  # the before-tool hook ran once per call, as an activity
        assert len(_lines(Path(str(p) + ".hook"))) == 1
    assert _lines(plain) == [_lines(plain)[0]] and "touch" in _lines(plain)[0]
    assert not no.exists()  # cancelled by the hook: carried back
    assert not moved.exists() and len(_lines(Path(str(moved) + "-here"))) == 1  # tool_use too
    assert _lines(Path(str(plain) + ".after")) == ["success"]
    assert _lines(Path(str(no) + ".after")) == ["error"]
    [_, _, results, _] = result["state"]["messages"]
    statuses = {b["tool_use_id"]: b["status"] for b in results["content"]}
    assert statuses == {"call_0": "success", "call_1": "error", "call_2": "success"}
    assert "the hook said no" in json.dumps(results)

    types = await _activity_types(hook_env, wid)
    assert types.count("interlude.hook") == 6 and types.count("interlude.tool") == 2
    history = await hook_env.client.get_workflow_handle(wid).fetch_history()
    await replayer(hook_app).replay_workflow(history)  # deterministic: the hooks are in history
    for p in (plain, no, moved):  # replaying ran no hook again
        assert len(_lines(Path(str(p) + ".hook"))) == 1


async def test_hook_activity_beside_an_approval(hook_env: Env, tmp_path: Path) -> None:
    from interlude.temporal import replayer

    log = tmp_path / "a"
    wid = await hook_env.agents.start("noted_approve", _prompt_calls(("touch", {"path": str(log)})))
    [question] = await pending(hook_env.agents, wid)
    outcome = await hook_env.agents.answer(wid, {question.id: True}, by="alice")
    assert outcome["stop_reason"] == "end_turn"
    assert len(_lines(log)) == 1
    # the note ran before the pause and again when the approval callback was replayed on resume
    notes = _lines(Path(str(log) + ".hook"))
    assert [n.split()[-1] for n in notes] == ["replay=False", "replay=True"]
    history = await hook_env.client.get_workflow_handle(wid).fetch_history()
    await replayer(hook_app).replay_workflow(history)


async def test_a_hook_activity_cannot_interrupt(hook_env: Env, tmp_path: Path) -> None:
    from temporalio.client import WorkflowFailureError

    wid = await hook_env.agents.start(
        "asks", _prompt_calls(("touch", {"path": str(tmp_path / "a")}))
    )
    with pytest.raises(WorkflowFailureError) as failed:
        await hook_env.agents.result(wid)
    assert "cannot interrupt" in str(failed.value.cause)


async def test_outside_a_workflow_the_callback_is_called(tmp_path: Path) -> None:
    from interlude.testing import FunctionModel

    from .agents import _reply, touch

    agent = Agent(FunctionModel(_reply), tools=[touch])
    agent.hooks.add_callback(BeforeToolCallEvent, as_activity(_note))
    moved = tmp_path / "c-moved"
    result = await agent.invoke_async(_prompt_calls(("touch", {"path": str(moved)})))
    assert result.stop_reason == "end_turn"
    assert len(_lines(Path(str(moved) + ".hook"))) == 1
    assert len(_lines(Path(str(moved) + "-here"))) == 1
