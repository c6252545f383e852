"""A worker in a process of its own (to be killed): ``python -m tests.temporal.worker_main
ADDRESS TASK_QUEUE``. Prints "ready" once it polls."""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta


async def main(address: str, queue: str) -> None:
    from temporalio.client import Client

    from interlude.temporal import worker

    from .agents import KILL_TEST_TOOLS, app

    client = await Client.connect(address)
    options = {"sticky_queue_schedule_to_start_timeout": timedelta(seconds=1)}
    async with worker(client, app, task_queue=queue, tools=KILL_TEST_TOOLS, **options):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
