"""Run claims of a graph: two processes resuming or recovering one session never both go on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from interlude.errors import NotPausedError, SessionConflictError
from interlude.sessions import MemoryStore, SessionUpdate, SQLiteStore

from .claim_child import SESSION, race_graph, ship_turns

CHILD = Path(__file__).with_name("claim_child.py")


def paused(tmp_path: Path) -> tuple[str, str, str]:
    """A paused graph in a database: (db, side-effect log, question id)."""
    db, log = str(tmp_path / "s.db"), str(tmp_path / "effects.log")
    (question,) = race_graph(SQLiteStore(db), log, ["ready"], ship_turns())("ship it").interrupts
    return db, log, question.id


class Child:
    """A child resuming the graph; it stops at its claim save until :meth:`go`."""

    def __init__(self, db: str, log: str, qid: str, when: str) -> None:
        self._ready_r, ready_w = os.pipe()
        go_r, self._go_w = os.pipe()
        args = [db, log, qid, str(ready_w), str(go_r), when]
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), *args],
            pass_fds=(ready_w, go_r),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.close(ready_w)
        os.close(go_r)

    def wait_ready(self) -> None:
        assert os.read(self._ready_r, 1) == b"r", self.proc.communicate()

    def go(self) -> None:
        os.write(self._go_w, b"g")

    def result(self) -> dict[str, str]:
        out, err = self.proc.communicate(timeout=120)
        assert self.proc.returncode == 0, err
        os.close(self._ready_r)
        os.close(self._go_w)
        parsed: dict[str, str] = json.loads(out)
        return parsed


def test_two_processes_resuming_one_pause_exactly_one_goes_on(tmp_path: Path) -> None:
    db, log, qid = paused(tmp_path)
    first, second = Child(db, log, qid, "before"), Child(db, log, qid, "before")
    first.wait_ready()
    second.wait_ready()  # both loaded the pause and are about to save their claims
    first.go()
    second.go()
    results = [first.result(), second.result()]
    assert sorted("conflict" in r for r in results) == [False, True], results
    (won,) = [r for r in results if "conflict" not in r]
    assert won == {"stop": "end_turn", "text": "shipped"}
    assert len(Path(log).read_text().splitlines()) == 1  # the tool ran once


def test_a_live_claim_refuses_a_resume_and_a_recovery_with_nothing_run(tmp_path: Path) -> None:
    db, log, qid = paused(tmp_path)
    holder = Child(db, log, qid, "after")  # its claim is stored; it waits there
    holder.wait_ready()
    other = race_graph(SQLiteStore(db), log, [], [])
    assert other.needs_recovery and not other.is_paused
    with pytest.raises(SessionConflictError, match="is being run by"):
        other.recover()
    with pytest.raises(SessionConflictError):
        other.resume({qid: True})
    holder.go()
    assert holder.result() == {"stop": "end_turn", "text": "shipped"}
    assert len(Path(log).read_text().splitlines()) == 1
    done = race_graph(SQLiteStore(db), log, [], [])
    assert not done.is_paused and not done.needs_recovery
    with pytest.raises(NotPausedError):
        done.recover()


async def test_a_lapsed_claim_is_free_and_a_live_one_from_elsewhere_is_not(tmp_path: Path) -> None:
    store = MemoryStore()
    log = str(tmp_path / "effects.log")
    (question,) = (
        await race_graph(store, log, ["ready"], ship_turns()).invoke_async("go")
    ).interrupts

    async def stopped_run(expires_at: float) -> None:
        """Store the record as a run another machine's process holds until ``expires_at``."""
        stored = await store.load(SESSION)
        assert stored is not None
        record = dict(stored.state["interlude.orchestration"])  # type: ignore[arg-type]
        record["status"] = "running"
        claim = {"owner": "elsewhere:1", "machine": "elsewhere", "pid": 1, "since": 0.0}
        update = SessionUpdate(
            expected_version=stored.version,
            first_index=len(stored.messages),
            new_messages=[],
            pause=None,
            pending=[],
            tools=[],
            format_version=1,
            state={"interlude.orchestration": record},
            claim={**claim, "expires_at": expires_at},
        )
        await store.save(SESSION, update)

    await stopped_run(time.time() + 600)
    with pytest.raises(SessionConflictError, match="elsewhere"):
        await race_graph(store, log, [], []).recover_async()
    await stopped_run(time.time() - 1)  # the lease ran out: the run is free to carry on
    graph = race_graph(store, log, [], ["shipped"])
    assert (await graph.recover_async()).stop_reason == "interrupt"  # the question stands
    done = await graph.resume_async({question.id: True})
    assert str(done) == "shipped"
    assert (await store.load(SESSION)).claim is None  # type: ignore[union-attr]
