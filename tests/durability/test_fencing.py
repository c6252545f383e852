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
from pathlib import Path

from interlude import Inbox, Worker
from interlude.sessions import SQLiteStore
from tests.support import wait_for
from tests.support.processes import ROOT

from .fencing_app import app


def _stopped(pid: int) -> bool:
    """Whether the process is stopped (SIGSTOP): its state in /proc is "T"."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "T"


def test_a_worker_stalled_past_its_lease_has_its_late_result_refused(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    ledger = tmp_path / "ledger.jsonl"
    env = {"FENCING_LEDGER": str(ledger), "FENCING_FREEZE": "1", "FENCING_LEASE": "1"}
    store = SQLiteStore(db)
    (question,) = app.start("payroll", "s", store)("pay ana").interrupts
    Inbox(store).record("s", {question.id: True}, by="ana")
    code = (
        "import asyncio, sys\n"
        "from interlude import Worker\n"
        "from tests.durability.fencing_app import app\n"
        "asyncio.run(Worker(app, sys.argv[1]).run_once())\n"
    )
    stalled = subprocess.Popen(
        [sys.executable, "-c", code, f"sqlite:///{db}"],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        # frozen in the body (it stops itself there): it renews nothing
        wait_for(lambda: _stopped(stalled.pid), what="the payment to start", process=stalled)
        other = Worker(app, SQLiteStore(db))
        wait_for(  # until the stalled worker's lease has run out and the other one recovers
            lambda: asyncio.run(other.run_once()), what="the other worker to recover", every=0.1
        )
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
