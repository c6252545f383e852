"""Workers under store faults: a recorded answer survives a failed resume (it is removed only
by the commit that applies it), and a worker keeps going through store errors."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from interlude import Inbox, Worker
from interlude.sessions import SQLiteStore

from . import payroll_app
from .flaky import FlakyStore
from .payroll_app import LEDGER, app


@pytest.fixture(autouse=True)
def _clean() -> None:
    LEDGER.clear()
    payroll_app.CLOCK.clear()


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_a_failed_resume_keeps_the_recorded_answer_for_the_next_try(tmp_path: Path) -> None:
    store = FlakyStore(SQLiteStore(tmp_path / "s.db"))
    (question,) = app.start("payroll", "s1", store)("pay ana").interrupts
    inbox = Inbox(store)
    inbox.record("s1", {question.id: True}, by="ana")
    clock = Clock()
    worker = Worker(app, store, clock=clock)
    store.saves_fail = 1  # the resume's first save, the one that commits the answer
    assert asyncio.run(worker.run_once()) == 0
    assert "s1" in worker.failed and LEDGER == []
    view = inbox.session("s1")
    assert [i.id for i in view.interrupts] == [question.id]  # still asked...
    assert [(r.interrupt_id, r.by) for r in view.recorded] == [(question.id, "ana")]  # ...answered
    clock.now += 60  # past the session's backoff
    assert asyncio.run(worker.run_once()) == 1
    assert [e["to"] for e in LEDGER] == ["ana"]
    view = inbox.session("s1")
    assert view.recorded == [] and view.interrupts == []
    assert [(a["interrupt_id"], a["by"]) for a in inbox.audit("s1")] == [(question.id, "ana")]
    assert "s1" not in worker.failed


def test_an_answer_is_removed_by_the_save_that_applies_it(tmp_path: Path) -> None:
    """The resume fails after its first save (a later save fails): the answer is applied and
    gone, and the stopped run is recovered, paying once."""
    store = FlakyStore(SQLiteStore(tmp_path / "s.db"))
    (question,) = app.start("payroll", "s1", store)("pay ana").interrupts
    Inbox(store).record("s1", {question.id: True}, by="ana")
    clock = Clock()
    worker = Worker(app, store, clock=clock)

    real_save = store.inner.save
    saves = 0

    async def second_save_fails(session_id: str, update: object) -> int:
        nonlocal saves
        saves += 1
        if saves == 2:
            store.saves_fail = 1
        return await real_save(session_id, update)  # type: ignore[arg-type]

    store.inner.save = second_save_fails  # type: ignore[method-assign]
    asyncio.run(worker.run_once())
    view = Inbox(store).session("s1")
    assert view.recorded == [] and view.interrupts == []  # applied: in the audit, not recorded
    assert [a["by"] for a in Inbox(store).audit("s1")] == ["ana"]


def test_a_worker_waits_out_store_errors_logs_each_once_and_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = FlakyStore(SQLiteStore(tmp_path / "s.db"))
    (question,) = app.start("payroll", "s1", store)("pay ana").interrupts
    Inbox(store).record("s1", {question.id: True}, by="ana")
    store.queries_fail = 4  # the store is down for four passes
    worker = Worker(app, store, poll=0.02)
    seen: list[bool] = []

    async def go() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        for _ in range(200):
            await asyncio.sleep(0.01)
            seen.append(worker.health.ok)
            if LEDGER:
                break
        assert not task.done()  # alive through the outage
        stop.set()
        await asyncio.wait_for(task, 5)

    with caplog.at_level("WARNING", logger="interlude.worker"):
        asyncio.run(go())
    assert [e["to"] for e in LEDGER] == ["ana"]
    assert False in seen and worker.health.ok and worker.health.failures == 0
    failures = [r for r in caplog.records if "the store failed" in r.message]
    assert len(failures) == 1  # four failed passes, one line
    assert any("answers again after 4 failed" in r.message for r in caplog.records)


def test_only_a_configuration_error_ends_a_worker(tmp_path: Path) -> None:
    from interlude import App
    from interlude.errors import ConfigurationError

    broken = App()

    @broken.agent("payroll")
    def build(session: object) -> object:
        raise ConfigurationError("the operator's agent is built wrongly")

    store = SQLiteStore(tmp_path / "s.db")
    (question,) = app.start("payroll", "s1", store)("pay ana").interrupts
    Inbox(store).record("s1", {question.id: True}, by="ana")
    with pytest.raises(ConfigurationError, match="built wrongly"):
        asyncio.run(asyncio.wait_for(Worker(broken, store, poll=0.02).run(), 5))
    assert Inbox(store).session("s1").recorded  # nothing was applied, nothing dropped
