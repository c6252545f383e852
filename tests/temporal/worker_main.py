"""A worker in a process of its own (to be killed): ``python -m tests.temporal.worker_main
ADDRESS TASK_QUEUE [local]``. Prints "ready" once it polls. With ``local``, the slow tools run as
local activities (``slow`` too, though it is not idempotent) instead of heartbeating."""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta


async def main(address: str, queue: str, local: bool = False) -> None:
    from temporalio.client import Client

    from interlude.temporal import ActivityOptions, worker

    from .agents import KILL_TEST_TOOLS, app

    client = await Client.connect(address)
    options = {"sticky_queue_schedule_to_start_timeout": timedelta(seconds=1)}
    tools = {"slow": ActivityOptions(local=True)} if local else KILL_TEST_TOOLS
    async with worker(client, app, task_queue=queue, tools=tools, **options):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:] == ["local"]))
