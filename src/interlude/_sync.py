"""Running the async core from sync code."""

from __future__ import annotations

import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import asyncio

__all__ = ["run_sync"]

T = TypeVar("T")
_local = threading.local()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from sync code.

    Each thread keeps one event loop for its sync calls (so repeated calls do not pay for a new
    loop and thread pool each time). Called where a loop is already running (a notebook, an
    async app), the coroutine runs on a fresh loop in a helper thread instead of failing.
    """
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        runner: asyncio.Runner | None = getattr(_local, "runner", None)
        if runner is None:
            runner = _local.runner = asyncio.Runner()
            if threading.current_thread() is threading.main_thread():
                import atexit

                atexit.register(runner.close)
        return runner.run(coro)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="interlude-sync") as pool:
        return pool.submit(asyncio.run, coro).result()
