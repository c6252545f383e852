"""Moving a paused run between a store and DBOS (a worker process on a throwaway PostgreSQL
database), and from DBOS to Temporal: answered in the new place, the tool run once; an answer
sent to the old place refused with where the run went."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from interlude.errors import AgentBusyError, SessionMovedError
from interlude.operate import StorePlace, move_async
from interlude.sessions import SQLiteStore
from tests.dbos.agents import app, runs
from tests.dbos.conftest import dbos_url, worker  # noqa: F401 (fixtures)
from tests.dbos.support import paused, prompt
from tests.support import Started


def _sid() -> str:
    return f"md-{uuid.uuid4().hex[:8]}"


def _lite(tmp_path: Path, name: str = "a.db") -> StorePlace:
    return StorePlace(SQLiteStore(tmp_path / name), name=f"sqlite:///{tmp_path / name}")


async def _paused_in(store: Any, path: str) -> tuple[str, str]:
    sid = _sid()
    built = await app.start_async("approve", sid, store)
    assert (await built.invoke_async(prompt(("touch", {"path": path})))).stop_reason == "interrupt"
    return sid, built.interrupts[0].id


async def _paused_on_dbos(url: str, path: str) -> tuple[str, str]:
    from interlude.dbos import start

    sid = _sid()
    await start(url, "approve", sid, prompt(("touch", {"path": path})))
    [question] = await paused(url, sid)
    return sid, question.interrupt.id


async def test_sqlite_to_dbos_answered_there(
    dbos_url: str,  # noqa: F811
    worker: Started,  # noqa: F811
    tmp_path: Path,
) -> None:
    from interlude.dbos import DbosPlace, answer, result

    lite, dbos = _lite(tmp_path), DbosPlace(dbos_url)
    path = str(tmp_path / "ran")
    sid, qid = await _paused_in(lite.store, path)

    moved = await move_async(sid, source=lite, target=dbos, by="ana")
    assert (moved.target, moved.interrupts) == (dbos.name, [qid])
    assert dbos.name == f"dbos:{dbos_url}"
    [question] = await paused(dbos_url, sid)
    assert question.interrupt.id == qid and question.agent == "approve"
    with pytest.raises(SessionMovedError, match="moved to dbos:") as refused:
        await (await app.open_async(sid, lite.store)).resume_async({qid: True}, by="bo")
    assert refused.value.target == dbos.name
    assert runs(path) == 0

    await answer(dbos_url, sid, {qid: True}, by="bo")
    out = await result(dbos_url, sid)
    assert (out["stop_reason"], out["text"]) == ("end_turn", "Done.")
    assert runs(path) == 1
    trail = out["state"]["audit"]
    assert [(e["name"], e["by"]) for e in trail] == [("moved", "ana"), ("approve", "bo")]
    assert trail[0]["answer"] == {"from": lite.name, "to": dbos.name}


async def test_dbos_to_sqlite_then_the_old_run_refuses(
    dbos_url: str,  # noqa: F811
    worker: Started,  # noqa: F811
    tmp_path: Path,
) -> None:
    from interlude.dbos import DbosPlace, answer, pending, result

    lite, dbos = _lite(tmp_path), DbosPlace(dbos_url)
    path = str(tmp_path / "ran")
    sid, qid = await _paused_on_dbos(dbos_url, path)

    await move_async(sid, source=dbos, target=lite, by="ana")
    out = await result(dbos_url, sid)
    assert (out["stop_reason"], out["moved_to"]) == ("moved", lite.name)
    assert [p for p in await pending(dbos_url) if p.session_id == sid] == []
    with pytest.raises(SessionMovedError, match=f"moved to {lite.name}") as refused:
        await answer(dbos_url, sid, {qid: True}, by="eve")
    assert refused.value.target == lite.name
    with pytest.raises(SessionMovedError):  # moved away already
        await move_async(sid, source=dbos, target=_lite(tmp_path, "c.db"))

    agent = await app.open_async(sid, lite.store)
    assert [i.id for i in agent.interrupts] == [qid]
    done = await agent.resume_async({qid: True}, by="bo")
    assert done.stop_reason == "end_turn"
    assert runs(path) == 1
    trail = await lite.store.audit_trail(sid)
    assert [(e["name"], e["by"]) for e in trail] == [("moved", "ana"), ("approve", "bo")]


async def test_dbos_to_sqlite_and_back_to_dbos(
    dbos_url: str,  # noqa: F811
    worker: Started,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Coming back, the session takes its old workflow id again; the store it left refuses."""
    from interlude.dbos import DbosPlace, answer, result

    lite, dbos = _lite(tmp_path), DbosPlace(dbos_url)
    path = str(tmp_path / "ran")
    sid, qid = await _paused_on_dbos(dbos_url, path)
    await move_async(sid, source=dbos, target=lite, by="ana")
    await move_async(sid, source=lite, target=dbos, by="bo")
    [question] = await paused(dbos_url, sid)
    assert question.interrupt.id == qid
    with pytest.raises(SessionMovedError, match="moved to dbos:"):
        await (await app.open_async(sid, lite.store)).resume_async({qid: True}, by="eve")

    await answer(dbos_url, sid, {qid: True}, by="cy")
    out = await result(dbos_url, sid)
    assert out["stop_reason"] == "end_turn" and runs(path) == 1
    assert [e["name"] for e in out["state"]["audit"]] == ["moved", "moved", "approve"]


async def test_what_cannot_move_out_of_dbos(
    dbos_url: str,  # noqa: F811
    worker: Started,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A run going now, and a move asked at a pause the run has left: refused, nothing moved."""
    from interlude.dbos import DbosPlace, answer, result, start
    from interlude.dbos import _common as c
    from interlude.dbos._client import _client, _outcome

    dbos, hold = DbosPlace(dbos_url), str(tmp_path / "model")
    sid = _sid()
    await start(dbos_url, "plain", sid, prompt(("touch", {"path": str(tmp_path / "x")}), hold=hold))
    await asyncio.sleep(0.5)
    with pytest.raises(AgentBusyError, match="not waiting on anyone"):
        await move_async(sid, source=dbos, target=_lite(tmp_path))
    (tmp_path / "model.release").touch()
    assert (await result(dbos_url, sid))["stop_reason"] == "end_turn"

    path = str(tmp_path / "ran")
    sid, qid = await _paused_on_dbos(dbos_url, path)
    client = _client(dbos_url)
    stale = {"ticket": "t-stale", c.MOVE_OUT: {"to": "x", "from": dbos.name}, "pause": 99}
    await client.send_async(sid, stale, c.TOPIC, idempotency_key="t-stale")
    out = await _outcome(client, sid, "t-stale", {}, 30)
    assert out["error"]["type"] == "AgentBusyError"
    await answer(dbos_url, sid, {qid: True}, by="bo")  # still paused there: answered
    assert (await result(dbos_url, sid))["stop_reason"] == "end_turn"
    assert runs(path) == 1


async def test_the_command_line_moves_to_and_from_dbos(
    dbos_url: str,  # noqa: F811
    worker: Started,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from interlude.cli import main
    from interlude.dbos import answer, result

    async def cli(*argv: str) -> int:
        return await asyncio.to_thread(main, list(argv))

    url = f"sqlite:///{tmp_path / 'a.db'}"
    path = str(tmp_path / "ran")
    sid, qid = await _paused_in(SQLiteStore(tmp_path / "a.db"), path)
    to = f"dbos:{dbos_url}"
    assert await cli("--store", url, "--json", "move", sid, "--to", to) == 0
    assert json.loads(capsys.readouterr().out)["to"] == to
    app_flag = ["--app", "tests.dbos.agents:app"]
    assert await cli("--store", url, *app_flag, "answer", sid, qid, "true") == 1
    assert f"was moved to {to}" in capsys.readouterr().err
    await paused(dbos_url, sid)  # (a run not started yet is not waiting on anyone: refused)

    back = f"sqlite:///{tmp_path / 'b.db'}"
    assert await cli("--dbos", dbos_url, "--json", "move", sid, "--to", back) == 0
    assert json.loads(capsys.readouterr().out)["from"] == to
    other = f"sqlite:///{tmp_path / 'c.db'}"
    assert await cli("move", sid, "--from", to, "--to", other) == 1  # --from: the same place
    assert f"was moved to {back} already" in capsys.readouterr().err
    with pytest.raises(SessionMovedError, match=f"moved to {back}"):
        await answer(dbos_url, sid, {qid: True}, by="eve")
    assert (await result(dbos_url, sid))["moved_to"] == back
    assert await cli("--store", back, *app_flag, "answer", sid, qid, "true") == 0
    assert runs(path) == 1


async def test_dbos_to_temporal(
    dbos_url: str,  # noqa: F811
    worker: Started,  # noqa: F811
    temporal_address: str,
    tmp_path: Path,
) -> None:
    from interlude.dbos import DbosPlace, answer
    from interlude.temporal import TemporalPlace
    from tests.temporal.conftest import serving
    from tests.temporal.polling import pending

    path = str(tmp_path / "ran")
    sid, qid = await _paused_on_dbos(dbos_url, path)
    async with serving(temporal_address, app=app) as env:
        temporal = TemporalPlace(env.agents)
        await move_async(sid, source=DbosPlace(dbos_url), target=temporal, by="ana")
        assert [q.id for q in await pending(env.agents, sid)] == [qid]
        with pytest.raises(SessionMovedError, match=f"moved to {temporal.name}"):
            await answer(dbos_url, sid, {qid: True}, by="eve")
        outcome = await env.agents.answer(sid, {qid: True}, by="bo")
        assert outcome["stop_reason"] == "end_turn"
        final = await env.agents.result(sid)
    assert runs(path) == 1
    assert [e["name"] for e in final["state"]["audit"]] == ["moved", "approve"]


async def test_a_run_stopped_between_steps_starts_on_dbos_and_recovers(
    dbos_url: str,  # noqa: F811
    worker: Started,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A state as a killed process leaves it (the tool call started, no result): the run
    carries on there and asks whether the call ran (never runs it blindly)."""
    from interlude.dbos import answer, result, start

    path = str(tmp_path / "ran")
    approve = await app.start_async("approve", _sid(), SQLiteStore(tmp_path / "a.db"))
    await approve.invoke_async(prompt(("touch", {"path": path})))
    state = json.loads(json.dumps(approve.export_state()))
    [call] = state["pause"]["step"]["calls"]
    tool_use = call["tool_use"]
    call.clear()
    call.update(tool_use=tool_use, phase="running", tool_name="touch", started_at=1_700_000_000.0)
    state["pause"]["interrupts"] = []

    sid = _sid()
    await start(dbos_url, "approve", sid, state=state)
    [question] = await paused(dbos_url, sid)
    assert (question.interrupt.name, question.tool_name) == ("in_doubt", "touch")
    await answer(dbos_url, sid, {question.interrupt.id: "rerun"}, by="ops")
    out = await result(dbos_url, sid)
    assert out["stop_reason"] == "end_turn"
    assert runs(path) == 1  # run once, when asked to
