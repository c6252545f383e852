"""``interlude worker`` processes killed with SIGKILL around a notification: before the send
it is delivered once after a restart; after the send but before it is marked sent it is
delivered twice with the same id, which the receiver de-duplicates."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from interlude.sessions import SQLiteStore
from tests.support.processes import ROOT

from . import notify_app
from .receivers import Receiver

SECRET = "the-secret-of-the-cli"


def _worker(db: Path, receiver: Receiver, kill: str | None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "INTERLUDE_NOTIFY_SECRET": SECRET}
    cmd = [sys.executable, "-m", "interlude", "worker", "--once", "--store", f"sqlite:///{db}"]
    cmd += ["--app", "tests.notify.notify_app:app"]
    if kill:  # the app's own target, which dies
        env |= {"NOTIFY_KILL": kill, "NOTIFY_URL": receiver.url, "NOTIFY_LEASE": "0.5"}
    else:  # a plain worker, told where to notify on its command line
        cmd += ["--notify", receiver.url, "--inbox-url", "https://inbox.example"]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("kill", ["before", "after"])
def test_a_worker_killed_around_the_send(tmp_path: Path, receiver: Receiver, kill: str) -> None:
    db = tmp_path / "s.db"
    with SQLiteStore(db) as store:
        notify_app.app.start("payer", "s1", store)("Pay flo")  # the pause is stored
    dead = _worker(db, receiver, kill)
    assert dead.returncode == -9, dead.stderr
    assert len(receiver.got) == (0 if kill == "before" else 1)
    time.sleep(0.6)  # the dead worker's lease on the notification runs out
    done = _worker(db, receiver, None)
    assert done.returncode == 0, done.stderr
    assert len(receiver.got) == (1 if kill == "before" else 2)
    ids = {r.headers["x-interlude-notification-id"] for r in receiver.got}
    assert len(ids) == 1  # the same notification each time
    (body,) = receiver.delivered  # de-duplicated by id: one
    assert body["event"] == "asked" and body["session_id"] == "s1"
    assert receiver.got[-1].json["url"] == "https://inbox.example/sessions/s1"  # --inbox-url
    assert receiver.got[-1].signed_by(SECRET)  # --notify URL signs with the environment's
    with SQLiteStore(db) as store:
        (n,) = asyncio.run(store.notifications("s1"))
    assert (n.id, n.status, n.attempts) == (body["id"], "sent", 1)
    assert _worker(db, receiver, None).returncode == 0
    assert len(receiver.got) == (1 if kill == "before" else 2)  # sent: not again
