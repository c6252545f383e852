"""The worker: the one kind of process that launches DBOS (clients never do).

``launch()`` recovers the PENDING workflows of this process's executor id; with DBOS's default
id (``local``) every launching process would take over every paused run, re-running a body in
flight. So each worker has a distinct, stable ``executor_id``, and the application version is
pinned (:data:`~interlude.dbos._common.VERSION`).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dbos import DBOS

from ..operate import App
from . import _common as c
from ._workflow import install

__all__ = ["run_worker", "worker"]

_log = logging.getLogger("interlude.dbos")

QUEUE_POLL_SECONDS = 0.1
"""How often a worker looks for runs started on the queue."""


@contextmanager
def worker(app: App, url: str, *, executor_id: str, **config: Any) -> Iterator[None]:
    """Run ``app``'s agents as DBOS workflows on the system database at ``url`` (a PostgreSQL
    URL; the database is created if missing) while the block lasts: configure DBOS (JSON only,
    ``executor_id``, the pinned version), launch it (recovering this executor's runs), listen to
    the queue runs are started on. ``config``: more ``DBOSConfig`` keys. One per process."""
    if not executor_id:
        raise ValueError("a DBOS worker needs a distinct, stable executor_id")
    install(app)
    DBOS(config=c.config(url, executor_id, **config))
    try:
        DBOS.launch()
        DBOS.register_queue(c.QUEUE, polling_interval_sec=QUEUE_POLL_SECONDS)
        yield
    finally:
        DBOS.destroy()


def run_worker(app: App, url: str, *, executor_id: str, **config: Any) -> None:
    """Serve as :func:`worker` until SIGTERM or SIGINT (from the main thread)."""
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    with worker(app, url, executor_id=executor_id, **config):
        _log.info("interlude.dbos worker %s serving", executor_id)
        while not stop.wait(1.0):
            pass
