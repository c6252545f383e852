"""Moving a paused run between stores (``interlude.operate.move``, ``interlude move``):
SQLite to PostgreSQL and back, answered in the new place, the tool run once, the old place
refusing answers with where the run went, and nothing else of the old place changed."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from interlude.errors import (
    AgentBusyError,
    NotPausedError,
    SessionConflictError,
    SessionMovedError,
    StateFormatError,
)
from interlude.operate import Inbox, StorePlace, Worker, move_async
from interlude.sessions import SQLiteStore, new_claim, open_store
from tests.support.postgres import make_store
from tests.temporal import agents
from tests.temporal.agents import app


def _prompt(path: Path) -> str:
    return json.dumps([["touch", {"path": str(path)}]])


def _runs(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


async def _paused(store: Any, agent: str, path: Path) -> tuple[str, str]:
    sid = f"m-{uuid.uuid4().hex[:8]}"
    built = await app.start_async(agent, sid, store)
    result = await built.invoke_async(_prompt(path))
    assert result.stop_reason == "interrupt"
    return sid, built.interrupts[0].id


def _except_close(stored: Any) -> dict[str, Any]:
    """What a close leaves as it was: everything but the version, pause, claim and trail."""
    return {
        "messages": stored.messages,
        "state": stored.state,
        "tools": stored.tools,
        "agent": stored.agent,
    }


@pytest.fixture
def pg(request: pytest.FixtureRequest) -> Any:
    return make_store(request.addfinalizer)


async def test_sqlite_to_postgres_and_back(tmp_path: Path, pg: Any) -> None:
    lite = SQLiteStore(tmp_path / "a.db")
    path = tmp_path / "ran"
    sid, qid = await _paused(lite, "approve", path)
    other, _ = await _paused(lite, "approve", tmp_path / "other")
    before, other_before = await lite.load(sid), await lite.load(other)
    assert before is not None

    moved = await move_async(sid, source=lite, target=StorePlace(pg, name="pg"), by="ana")
    assert await lite.load(other) == other_before  # the rest of the source store: unchanged
    assert await pg.list_sessions() == [sid]
    assert moved.to_dict() == {
        "session": sid,
        "from": "SQLiteStore",
        "to": "pg",
        "interrupts": [qid],
    }
    after = await lite.load(sid)
    assert after is not None and after.pause is None and after.claim["moved_to"] == "pg"
    assert _except_close(after) == _except_close(before)
    assert after.audit[:-1] == before.audit and after.audit[-1]["name"] == "moved"
    assert after.audit[-1]["answer"]["to"] == "pg"
    assert [p.session_id for p in await lite.pending_interrupts()] == [other]
    assert [p.interrupt.id for p in await pg.pending_interrupts()] == [qid]

    with pytest.raises(SessionMovedError, match="moved to pg") as refused:
        await (await app.open_async(sid, lite)).resume_async({qid: True}, by="bo")
    assert refused.value.target == "pg"
    with pytest.raises(SessionMovedError, match="moved to pg"):
        await Inbox(lite).record_async(sid, {qid: True}, by="bo")
    with pytest.raises(SessionMovedError):  # a new prompt there too
        await (await app.open_async(sid, lite)).invoke_async("again")

    # back to SQLite while still paused: its old copy is rewound to the one coming back
    await move_async(sid, source=StorePlace(pg, name="pg"), target=lite, by="bo")
    back = await lite.load(sid)
    assert back is not None and back.pause is not None
    with pytest.raises(SessionMovedError, match="moved to SQLiteStore"):
        await (await app.open_async(sid, pg)).resume_async({qid: True}, by="bo")

    result = await (await app.open_async(sid, lite)).resume_async({qid: True}, by="cy")
    assert result.stop_reason == "end_turn"
    assert _runs(path) == 1
    trail = await lite.audit_trail(sid)
    assert [e["name"] for e in trail] == ["moved", "moved", "approve"]
    assert trail[-1]["by"] == "cy"


async def test_answered_in_the_new_place(tmp_path: Path, pg: Any) -> None:
    lite = SQLiteStore(tmp_path / "a.db")
    path = tmp_path / "ran"
    sid, qid = await _paused(lite, "approve", path)
    await move_async(sid, source=lite, target=pg)
    recorded = await Inbox(pg).record_async(sid, {qid: True}, by="ana")
    assert len(recorded) == 1
    assert await Worker(app, pg).run_once() == 1  # a worker on the new place applies it
    assert _runs(path) == 1
    assert [e["by"] for e in await pg.audit_trail(sid)] == ["unknown", "ana"]


async def test_a_signed_session_verifies_where_it_went(tmp_path: Path, pg: Any) -> None:
    from interlude._audit import AuditEntry, check_chain

    lite = SQLiteStore(tmp_path / "a.db")
    path = tmp_path / "ran"
    sid, qid = await _paused(lite, "approve_signed", path)
    with pytest.raises(StateFormatError, match="signing key"):
        await move_async(sid, source=lite, target=pg)  # a signed trail: the key is needed
    assert (await lite.load(sid)).pause is not None  # type: ignore[union-attr]
    assert await pg.load(sid) is None

    await move_async(sid, source=lite, target=pg, app=app, by="ana")
    key = b"k" * 32
    for store in (lite, pg):
        trail = [AuditEntry.from_dict(e) for e in await store.audit_trail(sid)]
        assert trail[-1].chain is not None and trail[-1].chain.startswith("hmac-sha256:")
        assert check_chain(trail, key, sid) is None
    with pytest.raises(SessionMovedError):  # the closed source loads, signed, and refuses
        await (await app.open_async(sid, lite)).resume_async({qid: True}, by="bo")
    result = await (await app.open_async(sid, pg)).resume_async({qid: True}, by="bo")
    assert result.stop_reason == "end_turn" and _runs(path) == 1


async def test_what_cannot_move(tmp_path: Path) -> None:
    lite = SQLiteStore(tmp_path / "a.db")
    other = open_store("memory:")
    path = tmp_path / "ran"
    sid, qid = await _paused(lite, "approve", path)
    stored = await lite.load(sid)
    assert stored is not None
    from dataclasses import replace

    from interlude.sessions import SessionUpdate

    claimed = SessionUpdate(
        expected_version=stored.version,
        first_index=len(stored.messages),
        new_messages=[],
        pause=stored.pause,
        pending=None,
        tools=stored.tools,
        format_version=stored.format_version,
        claim=new_claim(None, 60.0),
        agent=stored.agent,
    )
    version = await lite.save(sid, claimed)
    with pytest.raises(AgentBusyError, match="being run"):
        await move_async(sid, source=lite, target=other)
    await lite.save(sid, replace(claimed, expected_version=version, claim=None))
    assert await other.load(sid) is None

    await Inbox(lite).record_async(sid, {qid: True}, by="ana")  # recorded, not applied
    with pytest.raises(SessionConflictError, match="recorded and not yet applied"):
        await move_async(sid, source=lite, target=other)
    assert await other.load(sid) is None

    done, _ = await _paused(lite, "approve", path)
    agent = await app.open_async(done, lite)
    await agent.resume_async({agent.interrupts[0].id: False}, by="ana")
    with pytest.raises(NotPausedError):
        await move_async(done, source=lite, target=other)

    taken, _ = await _paused(lite, "approve", path)
    await (await app.start_async("approve", taken, other)).invoke_async(_prompt(path))
    with pytest.raises(SessionConflictError, match="holds a session"):
        await move_async(taken, source=lite, target=StorePlace(other, name="other"))
    assert (await lite.load(taken)).pause is not None  # type: ignore[union-attr]
    assert (await lite.load(taken)).claim is None  # type: ignore[union-attr]
    assert agents is not None
