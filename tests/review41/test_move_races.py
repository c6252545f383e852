"""Review of issue 41 (interlude move): races and failures that once let an answer get lost
or a run go on in two places, each now refused or finished with nothing done twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from interlude.errors import SessionConflictError, SessionMovedError
from interlude.operate import Inbox, StorePlace, Worker, move_async
from interlude.sessions import SQLiteStore
from tests.support.postgres import make_store
from tests.temporal.agents import app

ROOT = Path(__file__).resolve().parents[2]


def _prompt(path: Path) -> str:
    return json.dumps([["touch", {"path": str(path)}]])


def _runs(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


async def _paused(store: Any, path: Path) -> tuple[str, str]:
    sid = f"r-{uuid.uuid4().hex[:8]}"
    built = await app.start_async("approve", sid, store)
    assert (await built.invoke_async(_prompt(path))).stop_reason == "interrupt"
    return sid, built.interrupts[0].id


class AnsweredMeanwhile:
    """A target place; while the move puts the session in, someone answers at the source
    through the inbox (the session is frozen, its pause still listed there)."""

    def __init__(self, inner: StorePlace, source: Any, qid: str) -> None:
        self.inner, self.source, self.qid = inner, source, qid
        self.name = inner.name
        self.recorded: list[Any] = []
        self.refused: SessionMovedError | None = None

    async def take_out(self, *a: Any, **k: Any) -> Any:  # pragma: no cover
        raise NotImplementedError

    async def put_in(self, session_id: str, state: dict[str, Any]) -> None:
        try:
            self.recorded = await Inbox(self.source).record_async(
                session_id, {self.qid: True}, by="bo"
            )
        except SessionMovedError as exc:  # frozen: bo is told where it goes
            self.refused = exc
        await self.inner.put_in(session_id, state)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_an_answer_during_a_move_is_refused_naming_the_target(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    src = SQLiteStore(tmp_path / "a.db") if kind == "sqlite" else make_store(request.addfinalizer)
    dst = SQLiteStore(tmp_path / "b.db")
    path = tmp_path / "ran"
    sid, qid = await _paused(src, path)
    target = AnsweredMeanwhile(StorePlace(dst, name="b"), src, qid)

    await move_async(sid, source=src, target=target)
    # bo's answer at the source while the move ran was refused, naming where it goes
    assert target.recorded == [] and target.refused is not None
    assert target.refused.target == "b" and "being moved to b" in str(target.refused)
    assert await src.recorded_answers(sid) == []
    await Inbox(dst).record_async(sid, {qid: True}, by="bo")  # answered where it went
    await Worker(app, dst).run_once()
    assert _runs(path) == 1


_CRASH = """
import asyncio, os, sys
sys.path.insert(0, {root!r})
from interlude.operate import StorePlace, move_async
from interlude.sessions import SQLiteStore

class Dies:
    def __init__(self, inner): self.inner, self.name = inner, inner.name
    async def take_out(self, *a, **k): raise NotImplementedError
    async def put_in(self, sid, state):
        await self.inner.put_in(sid, state)
        os._exit(9)   # the mover dies (SIGKILL, OOM, power) before closing the source

asyncio.run(move_async({sid!r}, source=SQLiteStore({a!r}),
                       target=Dies(StorePlace(SQLiteStore({b!r}), name="b"))))
"""


async def test_a_mover_killed_after_put_in_leaves_the_source_frozen_until_the_move_ends(
    tmp_path: Path,
) -> None:
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    path = tmp_path / "ran"
    sid, qid = await _paused(SQLiteStore(a), path)
    code = _CRASH.format(root=str(ROOT), sid=sid, a=str(a), b=str(b))
    proc = subprocess.run(  # noqa: ASYNC221 - the mover's own process, killed mid-way
        [sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ)
    )
    assert proc.returncode == 9

    # the source stays frozen (its claim has no lease to lapse): it refuses, naming b ...
    with pytest.raises(SessionMovedError, match="being moved to b"):
        await (await app.open_async(sid, SQLiteStore(a))).resume_async({qid: True}, by="ana")
    # ... the move run again finishes it, and the run goes on in b only
    await move_async(sid, source=SQLiteStore(a), target=StorePlace(SQLiteStore(b), name="b"))
    with pytest.raises(SessionMovedError, match="was moved to b"):
        await (await app.open_async(sid, SQLiteStore(a))).resume_async({qid: True}, by="ana")
    r2 = await (await app.open_async(sid, SQLiteStore(b))).resume_async({qid: True}, by="bo")
    assert r2.stop_reason == "end_turn"
    assert _runs(path) == 1


@pytest.mark.usefixtures("worker")
async def test_a_dbos_run_whose_target_refuses_it_is_put_back(
    dbos_url: str, tmp_path: Path
) -> None:
    from interlude.dbos import DbosPlace, answer, start
    from tests.dbos.support import paused, prompt

    sid = f"md-{uuid.uuid4().hex[:8]}"
    ran = tmp_path / "x"
    await start(dbos_url, "approve", sid, prompt(("touch", {"path": str(ran)})))
    [q] = await paused(dbos_url, sid)
    lite = SQLiteStore(tmp_path / "a.db")
    await _paused_occupying(lite, sid)  # the target holds another session with that id

    with pytest.raises(SessionConflictError, match="holds a session"):
        await move_async(sid, source=DbosPlace(dbos_url), target=StorePlace(lite, name="b"))
    # the run is back on DBOS, waiting on the same question: answered there
    [again] = await paused(dbos_url, sid)
    assert again.interrupt.id == q.interrupt.id
    await answer(dbos_url, sid, {q.interrupt.id: True}, by="bo")


async def _paused_occupying(store: Any, sid: str) -> None:
    built = await app.start_async("approve", sid, store)
    await built.invoke_async(_prompt(Path("/tmp/unused-review41")))
