"""PostgreSQL restarts under load: four workers (three ``interlude worker`` processes and the
one inside ``interlude serve --worker``) and clients answering through the inbox's JSON API,
while the database is restarted (fast), stopped at once and started, and restarted three times
3 s apart. No recorded answer may be lost, no worker may die, no stopped run may be left.

The database is a throwaway cluster of the test's own (never the shared server). The figures of
each run are printed (``-s``) and kept in ``FIGURES``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from interlude import Inbox
from tests.support import free_port, wait_for_port
from tests.support.postgres import Cluster, cluster
from tests.support.processes import ROOT

from . import payroll_app
from .payroll_app import app

TOKEN = "restart-token-0123456789"
FIGURES: list[dict[str, Any]] = []


def _env(tmp_path: Path) -> dict[str, str]:
    """The environment of the workers (run from the repository, where ``--app`` finds the
    payroll app)."""
    return {
        **os.environ,
        "PAYROLL_LEDGER": str(tmp_path / "ledger.jsonl"),
        "PAYROLL_LEASE": "2",  # a run stopped by a failed save is recovered 2 s later
        "PAYROLL_STARTED": str(tmp_path / "started.txt"),
        "PAYROLL_SLOW": "0.3",  # payments take a while: restarts land in the middle of runs
        "INTERLUDE_TOKENS": f"{TOKEN}=ana",
        "INTERLUDE_APP": "tests.workers.payroll_app:app",
    }


def _start(tmp_path: Path, url: str, port: int) -> list[subprocess.Popen[bytes]]:
    cli = [sys.executable, "-m", "interlude"]
    env = _env(tmp_path)
    commands = [[*cli, "worker", "--store", url, "--poll", "0.1"] for _ in range(3)]
    commands.append([*cli, "serve", "--worker", "--store", url, "--port", str(port)])
    commands[-1] += ["--poll", "0.1"]
    procs = []
    for i, command in enumerate(commands):
        log = open(tmp_path / f"proc{i}.log", "wb")  # noqa: SIM115 - closed with the process
        procs.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log))
    return procs


def _answer_all(base: str, questions: dict[str, str], spread: float) -> set[str]:
    """Answer every question over the API as a client that honours 503 / Retry-After does;
    the sessions whose answer the inbox took (202, or 409 after a try whose reply was lost)."""
    taken: set[str] = set()
    gap = spread / max(len(questions), 1)
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        for sid, qid in questions.items():
            tried = False
            for _ in range(200):
                try:
                    r = http.post(f"/api/sessions/{sid}/answers", json={"answers": {qid: True}})
                except httpx.HTTPError:
                    tried = True
                    time.sleep(0.2)
                    continue
                if r.status_code == 202 or (r.status_code == 409 and tried):
                    taken.add(sid)
                    break
                assert r.status_code == 503, (sid, r.status_code, r.text)
                assert r.headers["retry-after"]
                tried = True
                time.sleep(0.2)  # shorter than Retry-After: the test has no time to lose
            time.sleep(gap)
    return taken


def _settled(inbox: Inbox, ids: list[str]) -> bool:
    for sid in ids:
        view = inbox.session(sid)
        approved = [i for i in view.interrupts if i.source != "in_doubt"]
        if view.recorded or view.stopped or view.running or approved:
            return False
    return True


def _wait(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return True
        except Exception:
            pass
        time.sleep(0.25)
    return False


def _phase(
    name: str, db: Cluster, store: Any, base: str, tmp_path: Path, disrupt: Callable[[], None]
) -> dict[str, Any]:
    ids = [f"{name}-{k}" for k in range(24)]
    questions = {}
    for sid in ids:
        (q,) = app.start("payroll", sid, store)(f"pay {sid}").interrupts
        questions[sid] = q.id
    taken: set[str] = set()
    load = threading.Thread(target=lambda: taken.update(_answer_all(base, questions, 4.0)))
    load.start()
    time.sleep(0.8)
    disrupt()
    load.join(120)
    inbox = Inbox(store)
    settled = _wait(lambda: _settled(inbox, ids), 45)
    applied = {sid for sid in ids if any(e["by"] == "ana" for e in inbox.audit(sid))}
    in_doubt = [
        sid for sid in ids if any(i.source == "in_doubt" for i in inbox.session(sid).interrupts)
    ]
    ledger = tmp_path / "ledger.jsonl"
    lines = ledger.read_text().splitlines() if ledger.exists() else []
    paid = [json.loads(line)["to"] for line in lines]
    stopped = [sid for sid in ids if inbox.session(sid).stopped]
    return {
        "run": name,
        "answers_recorded": len(taken),
        "answers_applied": len(applied),
        "lost": sorted(taken - applied),
        "paid_once": sum(paid.count(sid) == 1 for sid in ids),
        "paid_twice": sorted(sid for sid in ids if paid.count(sid) > 1),
        "recovered_to_in_doubt_question": len(in_doubt),
        "stopped_left": stopped,
        "settled": settled,
    }


def test_postgres_restarts_lose_no_answer_and_kill_no_worker(tmp_path: Path) -> None:
    from interlude.sessions import PostgresStore

    payroll_app.LEDGER.clear()
    with cluster() as db:
        url = db.dsn + "&schema=restarts"
        store = PostgresStore(url)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        os.environ["PAYROLL_LEDGER"] = str(tmp_path / "ledger.jsonl")  # the test's own runs
        procs = _start(tmp_path, url, port)
        try:
            wait_for_port(port, what="interlude serve --worker", process=procs[-1])
            assert httpx.get(f"{base}/openapi.json").status_code == 200

            def three() -> None:
                for _ in range(3):
                    db.restart("fast")
                    time.sleep(3)

            runs = [
                ("fast", lambda: db.restart("fast")),
                ("immediate", lambda: (db.stop("immediate"), time.sleep(1), db.start())),
                ("three", three),
            ]
            for name, disrupt in runs:
                figures = _phase(name, db, store, base, tmp_path, disrupt)
                figures["workers_alive"] = sum(p.poll() is None for p in procs)
                FIGURES.append(figures)
                print(json.dumps(figures))
            assert _wait(lambda: httpx.get(f"{base}/healthz").json()["ok"], 30)
            health = httpx.get(f"{base}/healthz").json()
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
            os.environ.pop("PAYROLL_LEDGER", None)
            store.close()
    logs = {f.name: f.read_text(errors="replace") for f in sorted(tmp_path.glob("proc*.log"))}
    faults = {
        name: {
            "store_failed": text.count("the store failed"),
            "store_back": text.count("answers again"),
            "session_failures": text.count("session '"),
            "worker_restarts": text.count("worker stopped"),
        }
        for name, text in logs.items()
    }
    print(json.dumps(faults))
    for f in FIGURES:
        assert f["workers_alive"] == 4, (f, logs)
        assert f["answers_recorded"] == 24 and f["lost"] == [], f
        assert f["answers_applied"] == 24, f
        assert f["settled"] and f["stopped_left"] == [], f
        assert f["paid_twice"] == [], f
    assert health["worker"]["running"], health


pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
