"""A worker of tests/engines/agents.py's App in a process of its own (to be killed)::

    python -m tests.engines.worker_main dbos URL EXECUTOR_ID
    python -m tests.engines.worker_main temporal ADDRESS TASK_QUEUE

Prints "ready" once it serves; the tools record under ``$INTERLUDE_ENGINES_RUNS``."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from datetime import timedelta


def dbos_main(url: str, executor_id: str) -> None:
    from interlude.dbos import worker

    from .agents import app

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with worker(app, url, executor_id=executor_id):
        print("ready", flush=True)
        stop.wait()


async def temporal_main(address: str, queue: str) -> None:
    from temporalio.client import Client

    from interlude.temporal import worker

    from .agents import app, temporal_tools

    client = await Client.connect(address)
    sticky = timedelta(seconds=1)
    async with worker(
        client,
        app,
        task_queue=queue,
        tools=temporal_tools(),
        sticky_queue_schedule_to_start_timeout=sticky,
    ):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    if sys.argv[1] == "dbos":
        dbos_main(sys.argv[2], sys.argv[3])
    else:
        asyncio.run(temporal_main(sys.argv[2], sys.argv[3]))
