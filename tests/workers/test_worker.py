"""Answering without the agent (Inbox.record) and workers that carry sessions on."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from interlude import Inbox, Worker
from interlude.errors import (
    InterruptExpiredError,
    NotPausedError,
    ResumeInputError,
    SessionConflictError,
    SessionError,
    UnknownInterruptError,
)
from interlude.sessions import SQLiteStore
from tests.support import wait_for
from tests.support.processes import ROOT

from . import payroll_app
from .payroll_app import LEDGER, app


@pytest.fixture(autouse=True)
def _clean() -> None:
    LEDGER.clear()
    payroll_app.CLOCK.clear()


def _paused(store: SQLiteStore, session_id: str, to: str = "ana") -> str:
    (question,) = app.start("payroll", session_id, store)(f"pay {to}").interrupts
    return question.id


def test_record_checks_like_resume_and_the_first_answer_wins(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    qid = _paused(store, "s1")
    inbox = Inbox(store)
    with pytest.raises(SessionError, match="no session"):
        inbox.record("nope", {qid: True}, by="ana")
    with pytest.raises(UnknownInterruptError):
        inbox.record("s1", {"v1:x": True}, by="ana")
    with pytest.raises(ResumeInputError, match="by="):
        inbox.record("s1", {qid: True}, by="ana\nroot")
    with pytest.raises(ResumeInputError, match="not the one that was shown"):
        inbox.record("s1", {qid: True}, by="ana", shown={qid: "sha256:" + "0" * 64})
    assert inbox.session("s1").recorded == []
    (recorded,) = inbox.record("s1", {qid: True}, by="ana")
    assert (recorded.interrupt_id, recorded.answer, recorded.by) == (qid, True, "ana")
    with pytest.raises(SessionConflictError):
        inbox.record("s1", {qid: False}, by="mallory")
    view = inbox.session("s1")
    assert view.agent == "payroll" and [i.id for i in view.interrupts] == [qid]
    assert [r.by for r in view.recorded] == ["ana"] and not view.running and not view.stopped
    assert LEDGER == []  # recording runs nothing


def test_a_worker_applies_recorded_answers_once_as_who_gave_them(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    yes, no = _paused(store, "yes"), _paused(store, "no", "bo")
    inbox = Inbox(store)
    inbox.record("yes", {yes: True}, by="ana")
    inbox.record("no", {no: False}, by="carl")
    worker = Worker(app, store)
    assert asyncio.run(worker.run_once()) == 2
    assert [e["to"] for e in LEDGER] == ["ana"]  # bo's payment was declined
    assert asyncio.run(worker.run_once()) == 0  # nothing left: nothing runs twice
    assert [e["by"] for e in inbox.audit("yes")] == ["ana"]
    assert [e["by"] for e in inbox.audit("no")] == ["carl"]
    assert inbox.session("yes").recorded == [] and inbox.pending() == []


def test_a_worker_settles_expired_questions(tmp_path: Path) -> None:
    payroll_app.CLOCK.append(1_800_000_000.0)
    store = SQLiteStore(tmp_path / "s.db")
    qid = _paused(store, "late")
    inbox = Inbox(store, clock=lambda: payroll_app.CLOCK[0])
    worker = Worker(app, store, clock=lambda: payroll_app.CLOCK[0])
    assert asyncio.run(worker.run_once()) == 0  # not yet expired
    payroll_app.CLOCK[0] += 3600
    with pytest.raises(InterruptExpiredError):
        inbox.record("late", {qid: True}, by="ana")
    assert asyncio.run(worker.run_once()) == 1
    assert LEDGER == []  # no default: expiry declines
    assert [(e["by"], e["expired"]) for e in inbox.audit("late")] == [("expiry", True)]
    with pytest.raises(NotPausedError):
        inbox.record("late", {qid: True}, by="ana")


def test_a_worker_needs_a_store_with_an_answer_queue() -> None:
    """A store of the session part only is refused when the worker is made, saying why."""
    from interlude.errors import ConfigurationError
    from interlude.sessions import AnswerQueue, MemoryStore, SessionStore, SessionUpdate

    class SessionsOnly:
        def __init__(self) -> None:
            self.inner = MemoryStore()

        async def load(self, session_id: str) -> Any:
            return await self.inner.load(session_id)

        async def save(self, session_id: str, update: SessionUpdate) -> int:
            return await self.inner.save(session_id, update)

        async def audit_trail(self, session_id: str) -> Any:
            return await self.inner.audit_trail(session_id)

        async def list_sessions(self) -> list[str]:
            return await self.inner.list_sessions()

        async def delete(self, session_id: str) -> None:
            await self.inner.delete(session_id)

    store = SessionsOnly()
    assert isinstance(store, SessionStore) and not isinstance(store, AnswerQueue)
    with pytest.raises(ConfigurationError, match="SessionsOnly has none"):
        Worker(app, store)  # type: ignore[arg-type]


def test_an_answer_to_a_changed_question_is_dropped_not_applied(tmp_path: Path) -> None:
    """The worker's resume checks the digest recorded with the answer against the pause."""
    import sqlite3

    store = SQLiteStore(tmp_path / "s.db")
    qid = _paused(store, "s")
    Inbox(store).record("s", {qid: True}, by="ana")
    with sqlite3.connect(tmp_path / "s.db") as conn:  # the pause changes after the answer
        (pause,) = conn.execute("SELECT pause FROM sessions").fetchone()
        data = json.loads(pause)
        data["interrupts"][0]["tool_use"]["input"]["cents"] = 10**6
        conn.execute("UPDATE sessions SET pause = ?", (json.dumps(data),))
    worker = Worker(app, SQLiteStore(tmp_path / "s.db"))
    asyncio.run(worker.run_once())
    assert LEDGER == [] and Inbox(store).session("s").recorded == []


def test_four_worker_processes_finish_500_answered_sessions_each_once(tmp_path: Path) -> None:
    """Four workers over PostgreSQL share 500 answered sessions: all finish, none runs twice."""
    from tests.support.postgres import fresh_store, schema_url

    with fresh_store() as store:
        inbox = Inbox(store)
        n = 500
        for k in range(n):
            qid = _paused(store, f"s{k}", f"p{k}")
            inbox.record(f"s{k}", {qid: True}, by="ana")
        assert len(inbox.pending()) == n
        ledger = tmp_path / "ledger.jsonl"
        env = {**os.environ, "PAYROLL_LEDGER": str(ledger)}
        code = (
            "import asyncio, sys\n"
            "from interlude import Worker\n"
            "from tests.workers.payroll_app import app\n"
            "w = Worker(app, sys.argv[1], poll=0.05)\n"
            "async def main():\n"
            "    idle = 0\n"
            "    while idle < 3:\n"
            "        idle = 0 if await w.run_once() else idle + 1\n"
            "        await asyncio.sleep(0.05)\n"
            "    print(w.handled)\n"
            "asyncio.run(main())\n"
        )
        url = schema_url(store.schema)
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", code, url],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(4)
        ]
        handled = []
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
            handled.append(int(out.strip()))
        paid = [json.loads(line)["to"] for line in ledger.read_text().splitlines()]
        assert sorted(paid) == sorted(f"p{k}" for k in range(n))  # each exactly once
        assert sum(handled) == n and all(h > 0 for h in handled), handled
        assert inbox.pending() == []
        assert asyncio.run(store.sessions_to_resume(10**10)) == []


def test_a_worker_killed_mid_payment_is_recovered_by_another_which_asks_first(
    tmp_path: Path,
) -> None:
    """A worker process is SIGKILLed while a payment runs. Once its claim's lease runs out,
    another worker recovers the session: the payment, maybe made, is not made again; the
    session waits on an in-doubt question instead, and answering it finishes the run."""
    import signal

    db = tmp_path / "s.db"
    started = tmp_path / "started.txt"
    env = {
        **os.environ,
        "PAYROLL_LEDGER": str(tmp_path / "ledger.jsonl"),
        "PAYROLL_STARTED": str(started),
        "PAYROLL_SLOW": "60",
        "PAYROLL_LEASE": "1",
    }
    store = SQLiteStore(db)
    qid = _paused(store, "s")
    Inbox(store).record("s", {qid: True}, by="ana")
    code = (
        "import asyncio, sys\n"
        "from interlude import Worker\n"
        "from tests.workers.payroll_app import app\n"
        "asyncio.run(Worker(app, sys.argv[1]).run_once())\n"
    )
    doomed = subprocess.Popen([sys.executable, "-c", code, f"sqlite:///{db}"], cwd=ROOT, env=env)
    try:
        # Its text, not only the file: the body makes the file, then writes it (two steps).
        wait_for(
            lambda: started.exists() and started.read_text(),
            what="the payment to start",
            process=doomed,
        )
        assert started.read_text() == "ana\n", "the payment never started"
        doomed.send_signal(signal.SIGKILL)
    finally:
        doomed.wait(timeout=30)
    worker = Worker(app, SQLiteStore(db))
    # until the dead worker's claim has run out (1 s) and another worker carries the session on
    wait_for(lambda: asyncio.run(worker.run_once()), what="the recovery", every=0.2)
    view = Inbox(store).session("s")
    (question,) = view.interrupts
    assert question.source == "in_doubt" and question.tool_use.input == {"to": "ana", "cents": 100}
    assert not (tmp_path / "ledger.jsonl").exists()  # nothing paid twice (or at all, here)
    Inbox(store).record("s", {question.id: "fail"}, by="ana")
    assert asyncio.run(worker.run_once()) == 1
    assert Inbox(store).pending() == [] and not (tmp_path / "ledger.jsonl").exists()
    assert [e["by"] for e in Inbox(store).audit("s")] == ["ana", "ana"]
