"""One event loop in a daemon thread where every MCP connection of the process lives.

An MCP client holds tasks (its receive loop, a subprocess's pipes) bound to the event loop that
opened it. Agents run on whatever loop their caller has (a sync call's loop, an app's loop), so
connections live here instead and callers reach them through futures: a connection opened by a
sync ``tools()`` call serves an agent run on any loop, and closes from anywhere.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["call_in_thread", "mcp_loop", "run_in_thread"]

T = TypeVar("T")
_LOOP: tuple[int, asyncio.AbstractEventLoop] | None = None  # (pid, loop)
_LOCK = threading.Lock()


def mcp_loop() -> asyncio.AbstractEventLoop:
    """The MCP thread's loop, started on first use (and again in a forked child)."""
    global _LOOP
    with _LOCK:
        if _LOOP is None or _LOOP[0] != os.getpid() or _LOOP[1].is_closed():
            from .._sync import new_event_loop

            loop = new_event_loop()
            threading.Thread(target=loop.run_forever, name="interlude-mcp", daemon=True).start()
            _LOOP = (os.getpid(), loop)
        return _LOOP[1]


def call_in_thread(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Start ``coro`` on the MCP loop; cancelling the returned future cancels it."""
    return asyncio.run_coroutine_threadsafe(coro, mcp_loop())


async def run_in_thread(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` run on the MCP loop from any other loop (or from that loop itself)."""
    loop = mcp_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))


def block_on(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on the MCP loop and wait for it from sync code (never from the MCP loop).

    If the wait ends early (a timeout, Ctrl-C), ``coro`` is cancelled and given a few seconds
    to clean up (a server process being started is stopped) before the error goes on."""
    ended = threading.Event()

    async def guarded() -> T:
        try:
            return await coro
        finally:
            ended.set()

    future = call_in_thread(guarded())
    try:
        return future.result(timeout)
    except BaseException:
        if future.cancel():
            ended.wait(5.0)
        raise


_OPEN: set[Any] = set()
"""Servers with an open connection, closed at interpreter exit (a stdio server then ends)."""


def _close_all() -> None:
    for server in list(_OPEN):
        # exiting anyway: a server that will not close is left to its stdin's EOF
        with contextlib.suppress(Exception):
            server.close(timeout=5.0)


atexit.register(_close_all)
