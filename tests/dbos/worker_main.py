"""A DBOS worker in a process of its own (to be killed): ``python -m tests.dbos.worker_main
URL EXECUTOR_ID``. Prints "ready" once it serves."""

from __future__ import annotations

import signal
import sys
import threading


def main(url: str, executor_id: str) -> None:
    from interlude.dbos import worker

    from .agents import app

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with worker(app, url, executor_id=executor_id):
        print("ready", flush=True)
        stop.wait()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
