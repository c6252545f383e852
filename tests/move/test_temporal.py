"""Moving a paused run between a store and Temporal (the real dev server): SQLite to a
workflow and back, answered in the new place, the tool run once; an answer sent to the old
place refused with where the run went."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from interlude.errors import NotPausedError, SessionMovedError
from interlude.operate import StorePlace, move_async
from interlude.sessions import SQLiteStore
from interlude.temporal import TemporalPlace
from tests.temporal.agents import app
from tests.temporal.conftest import Env
from tests.temporal.polling import pending, until


def _prompt(path: Path) -> str:
    return json.dumps([["touch", {"path": str(path)}]])


def _runs(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


async def _paused(store: Any, agent: str, path: Path) -> tuple[str, str]:
    sid = f"mt-{uuid.uuid4().hex[:8]}"
    built = await app.start_async(agent, sid, store)
    assert (await built.invoke_async(_prompt(path))).stop_reason == "interrupt"
    return sid, built.interrupts[0].id


@pytest.mark.parametrize("agent", ["approve", "approve_signed"])
async def test_sqlite_to_temporal_and_back(env: Env, tmp_path: Path, agent: str) -> None:
    lite = StorePlace(SQLiteStore(tmp_path / "a.db"), name="sqlite:///a.db")
    temporal = TemporalPlace(env.agents)
    path = tmp_path / "ran"
    sid, qid = await _paused(lite.store, agent, path)

    moved = await move_async(sid, source=lite, target=temporal, app=app, by="ana")
    assert moved.target == temporal.name and moved.interrupts == [qid]
    assert [q.id for q in await pending(env.agents, sid)] == [qid]
    with pytest.raises(SessionMovedError, match=f"moved to {temporal.name}"):
        await (await app.open_async(sid, lite.store)).resume_async({qid: True}, by="bo")

    # and back to the store, still paused: the workflow ends as moved
    await move_async(sid, source=temporal, target=lite, app=app, by="bo")
    result = await env.agents.result(sid)
    assert result["stop_reason"] == "moved" and result["moved_to"] == lite.name
    with pytest.raises(SessionMovedError, match=r"moved to sqlite:///a\.db") as refused:
        await env.agents.answer(sid, {qid: True}, by="cy")
    assert refused.value.target == lite.name

    done = await (await app.open_async(sid, lite.store)).resume_async({qid: True}, by="cy")
    assert done.stop_reason == "end_turn"
    assert _runs(path) == 1
    trail = await lite.store.audit_trail(sid)
    assert [e["name"] for e in trail] == ["moved", "moved", "approve"]


async def test_answered_on_temporal(env: Env, tmp_path: Path) -> None:
    lite = SQLiteStore(tmp_path / "a.db")
    path = tmp_path / "ran"
    sid, qid = await _paused(lite, "approve", path)
    await move_async(sid, source=lite, target=TemporalPlace(env.agents))
    await pending(env.agents, sid)
    outcome = await env.agents.answer(sid, {qid: True}, by="ana")
    assert outcome["stop_reason"] == "end_turn"
    assert _runs(path) == 1
    final = await env.agents.result(sid)
    assert [e["name"] for e in final["state"]["audit"]] == ["moved", "approve"]


async def test_temporal_to_sqlite_then_old_workflow_refuses(env: Env, tmp_path: Path) -> None:
    path = tmp_path / "ran"
    sid = f"wf-{uuid.uuid4().hex[:8]}"
    await env.agents.start("approve", _prompt(path), workflow_id=sid)
    (question,) = await pending(env.agents, sid)
    lite = StorePlace(SQLiteStore(tmp_path / "b.db"), name="sqlite:///b.db")
    temporal = TemporalPlace(env.agents)
    await move_async(sid, source=temporal, target=lite, by="ana")
    with pytest.raises(SessionMovedError, match=r"moved to sqlite:///b\.db"):
        await env.agents.answer(sid, {question.id: True}, by="bo")
    with pytest.raises(SessionMovedError):  # moved away already
        await move_async(sid, source=temporal, target=StorePlace(SQLiteStore(tmp_path / "c.db")))
    agent = await app.open_async(sid, lite.store)
    assert [i.id for i in agent.interrupts] == [question.id]
    await agent.resume_async({question.id: True}, by="bo")
    assert _runs(path) == 1


async def test_a_running_workflow_is_not_moved(env: Env, tmp_path: Path) -> None:
    path = tmp_path / "ran"
    sid = f"wf-{uuid.uuid4().hex[:8]}"
    await env.agents.start("plain", _prompt(path), workflow_id=sid)
    await until(lambda: _finished(env, sid), f"{sid} finished")
    with pytest.raises(NotPausedError, match="closed"):
        await move_async(
            sid, source=TemporalPlace(env.agents), target=StorePlace(SQLiteStore(tmp_path / "d.db"))
        )


async def _finished(env: Env, sid: str) -> bool:
    from temporalio.client import WorkflowExecutionStatus

    return (await env.client.get_workflow_handle(sid).describe()).status == (
        WorkflowExecutionStatus.COMPLETED
    )


async def test_the_command_line_moves_into_temporal_and_the_old_places_refuse(
    env: Env, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    from interlude.cli import main

    async def cli(*argv: str) -> int:  # in a thread: the worker runs in this test's loop
        return await asyncio.to_thread(main, list(argv))

    url = f"sqlite:///{tmp_path / 'a.db'}"
    path = tmp_path / "ran"
    sid, qid = await _paused(SQLiteStore(tmp_path / "a.db"), "approve", path)
    to = f"temporal://{env.address}"
    assert (
        await cli("--store", url, "--json", "move", sid, "--to", to, "--task-queue", env.task_queue)
        == 0
    )
    assert json.loads(capsys.readouterr().out)["to"] == to
    app_flag = ["--app", "tests.temporal.agents:app"]
    assert await cli("--store", url, *app_flag, "answer", sid, qid, "true") == 1
    assert f"was moved to {to}" in capsys.readouterr().err

    back = f"sqlite:///{tmp_path / 'b.db'}"
    assert await cli("--temporal", env.address, "move", sid, "--to", back) == 0
    capsys.readouterr()
    assert await cli("--temporal", env.address, "--json", "answer", sid, qid, "true") == 1
    refused = json.loads(capsys.readouterr().out)
    assert refused["code"] == "moved" and f"moved to {back}" in refused["error"]
    assert await cli("--store", back, *app_flag, "answer", sid, qid, "true") == 0
    assert _runs(path) == 1
