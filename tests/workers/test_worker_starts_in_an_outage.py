"""``interlude worker`` started while its PostgreSQL server is down waits for it (logging that
once) and then works, as a worker already running waits out an outage; a store that is wrong
rather than down ends it at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from interlude import Inbox
from interlude.sessions import open_store
from tests.support import wait_for
from tests.support.postgres import cluster
from tests.support.processes import ROOT

from .payroll_app import app
from .test_pg_restarts import _env


def test_a_worker_started_in_an_outage_waits_for_the_store(tmp_path: Path) -> None:
    with cluster() as db:
        url = db.dsn
        open_store(url).close()  # the schema exists; then the server goes away
        db.stop()
        log = tmp_path / "worker.log"
        with log.open("wb") as sink:
            worker = subprocess.Popen(
                [sys.executable, "-m", "interlude", "worker", "--store", url, "--poll", "0.1"],
                cwd=ROOT,
                env=_env(tmp_path),
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        try:

            def said_it_waits() -> bool:
                return "cannot be reached" in log.read_text()

            wait_for(said_it_waits, what="the worker to say it waits", process=worker)
            assert worker.poll() is None, log.read_text()  # still there, waiting
            db.start()
            store = open_store(url)
            (question,) = app.start("payroll", "s1", store)("pay ana").interrupts
            Inbox(store).record("s1", {question.id: True}, by="ana")

            def answered() -> bool:
                return not Inbox(store).session("s1").interrupts

            try:
                wait_for(answered, what="the answer to be applied", timeout=30, process=worker)
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{log.read_text()}") from None
            assert Inbox(store).session("s1").recorded == []  # applied, none left recorded
            assert [e["by"] for e in Inbox(store).audit("s1")] == ["ana"]
            assert log.read_text().count("cannot be reached") == 1  # said once, not per try
        finally:
            worker.terminate()
            worker.wait(timeout=30)


def test_a_worker_on_a_store_that_is_wrong_ends_at_once(tmp_path: Path) -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "interlude", "worker", "--store", "postgresql://x:y@[::1"],
        cwd=ROOT,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode != 0 and "Traceback" not in ran.stderr, ran.stderr
