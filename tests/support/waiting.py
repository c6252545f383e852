"""Waiting on a condition, never on a fixed time: each wait has a deadline, generous enough
for a busy machine, and says what it waited for when it runs out. ``until`` is the twin for
coroutines (the event loop keeps running meanwhile)."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

DEADLINE = 60.0
"""How long a wait goes on by default: a condition that holds in well under a second on a
quiet machine may take tens of seconds at load 30."""


def wait_for(
    check: Callable[[], object],
    *,
    what: str,
    timeout: float = DEADLINE,
    every: float = 0.02,
    process: subprocess.Popen[str] | None = None,
) -> None:
    """Return once ``check()`` is true; AssertionError naming ``what`` at the deadline, or as
    soon as ``process`` (what should make it true) has ended."""
    deadline = time.monotonic() + timeout
    while not check():
        if process is not None and process.poll() is not None:
            raise AssertionError(f"{what}: the process ended (exit {process.returncode})")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def wait_for_port(
    port: int,
    host: str = "127.0.0.1",
    *,
    what: str | None = None,
    timeout: float = DEADLINE,
    process: subprocess.Popen[str] | None = None,
) -> None:
    """Return once something accepts connections on ``host:port``."""

    def accepts() -> bool:
        try:
            socket.create_connection((host, port), timeout=0.5).close()
        except OSError:
            return False
        return True

    wait_for(accepts, what=what or f"{host}:{port} to accept", timeout=timeout, process=process)


T = TypeVar("T")


async def until(
    check: Callable[[], Awaitable[T]], what: str, within: float = DEADLINE, every: float = 0.05
) -> T:
    """``await check()`` until it returns something true; that value. An AssertionError
    naming ``what`` once ``within`` seconds have passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        got = await check()
        if got:
            return got
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {within:.0f} s waiting for {what}")
        await asyncio.sleep(every)
