"""A worker frozen past its lease in the middle of a tool call (SIGSTOP) while another worker
recovers the session, then thawed (SIGCONT): the stalled one may still finish the call, but
what it got is refused, not recorded; the question the other raised says so and names the
call's idempotency key."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from interlude import Inbox, Worker
from interlude.sessions import SQLiteStore

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from workers.payroll_app import app  # noqa: E402


def test_a_worker_stalled_past_its_lease_has_its_late_result_refused(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    ledger = tmp_path / "ledger.jsonl"
    started = tmp_path / "started.txt"
    path = os.pathsep.join(p for p in (str(HERE.parent), os.environ.get("PYTHONPATH", "")) if p)
    env = {
        **os.environ,
        "PYTHONPATH": path,
        "PAYROLL_LEDGER": str(ledger),
        "PAYROLL_STARTED": str(started),
        "PAYROLL_SLOW": "1",
        "PAYROLL_LEASE": "1",
    }
    store = SQLiteStore(db)
    (question,) = app.start("payroll", "s", store)("pay ana").interrupts
    Inbox(store).record("s", {question.id: True}, by="ana")
    code = (
        "import asyncio, sys\n"
        "from interlude import Worker\n"
        "from workers.payroll_app import app\n"
        "asyncio.run(Worker(app, sys.argv[1]).run_once())\n"
    )
    stalled = subprocess.Popen(
        [sys.executable, "-c", code, f"sqlite:///{db}"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.time() + 30
        while not started.exists() and time.time() < deadline:
            time.sleep(0.05)
        assert started.exists(), "the payment never started"
        stalled.send_signal(signal.SIGSTOP)  # frozen in the body: it renews nothing
        other = Worker(app, SQLiteStore(db))

        while not asyncio.run(other.run_once()) and time.time() < deadline:
            time.sleep(0.1)  # until the stalled worker's lease has run out
        (doubt,) = Inbox(store).session("s").interrupts
        assert doubt.source == "in_doubt"
        stalled.send_signal(signal.SIGCONT)
        out, _ = stalled.communicate(timeout=30)  # it wakes, finishes the call, saves
    finally:
        if stalled.poll() is None:
            stalled.kill()
    assert [line for line in ledger.read_text().splitlines()]  # the late call did happen
    view = Inbox(store).session("s")
    assert [i.id for i in view.interrupts] == [doubt.id], out  # its result was not recorded
    assert not any(
        getattr(b, "status", None) == "success" for m in view.messages for b in m.content
    ), out
    reason = doubt.reason
    assert isinstance(reason, dict)
    assert "may still finish" in reason["message"]
    assert reason["idempotency_key"] in reason["message"]
