"""Waiting on a condition from a coroutine (the event loop keeps running meanwhile): the
asynchronous twin of :func:`tests.support.wait_for`, with the same deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from .waiting import DEADLINE

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
