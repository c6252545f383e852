"""Running the async core from sync code."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import asyncio

__all__ = ["new_event_loop", "run_sync"]

T = TypeVar("T")
_local = threading.local()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from sync code.

    Each thread keeps one event loop for its sync calls, so repeated calls pay neither for a
    new loop and thread pool nor for ``asyncio.Runner``'s per-call signal handling (a third of
    a short run's cost). Ctrl-C still leaves things tidy: the run's task is cancelled and run to
    its end (the agent repairs its conversation), then KeyboardInterrupt propagates. Called
    where a loop is already running (a notebook, an async app), the coroutine runs on a fresh
    loop in a helper thread instead of failing.
    """
    import asyncio

    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        helper = _helper_loop()
        if running is not helper:
            return asyncio.run_coroutine_threadsafe(coro, helper).result()
        from concurrent.futures import ThreadPoolExecutor  # nested in the helper: a fresh one

        with ThreadPoolExecutor(1, thread_name_prefix="interlude-sync") as pool:
            return pool.submit(asyncio.run, coro).result()
    try:
        loop = _thread_loop()
        if _owns_sigint():
            return _run_catching_sigint(loop, coro)
        task = loop.create_task(coro)
    except BaseException:  # Ctrl-C before the run existed: it never starts
        coro.close()
        raise
    try:
        return loop.run_until_complete(task)
    except KeyboardInterrupt:
        while not task.done():  # let the run repair itself, even through more Ctrl-C presses
            task.cancel()
            with contextlib.suppress(BaseException):
                loop.run_until_complete(task)
        raise


_HELPER: tuple[int, asyncio.AbstractEventLoop] | None = None  # (pid, loop)
_HELPER_LOCK = threading.Lock()


def _helper_loop() -> asyncio.AbstractEventLoop:
    """One event loop in a daemon thread, for sync calls made where a loop already runs (an
    async app building an agent, a worker): starting a thread and a loop per call costs a few
    milliseconds."""
    global _HELPER
    import os

    with _HELPER_LOCK:  # a forked child has no helper thread: it starts its own
        if _HELPER is None or _HELPER[0] != os.getpid() or _HELPER[1].is_closed():
            loop = new_event_loop()
            threading.Thread(target=loop.run_forever, name="interlude-sync", daemon=True).start()
            _HELPER = (os.getpid(), loop)
        return _HELPER[1]


def _owns_sigint() -> bool:
    """Whether Ctrl-C is Python's default here (the main thread, no handler of the app's).

    ``_signal`` is the C module under ``signal``: the same calls without the conversion of
    every handler to an enum, which costs more than the rest of a short sync call's setup."""
    import _signal  # type: ignore[import-not-found]  # C module under signal, no stubs

    return (
        threading.current_thread() is threading.main_thread()
        and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler
    )


def _run_catching_sigint(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro``; Ctrl-C cancels it (as often as pressed) instead of raising wherever the
    code happens to be, so a save is never cut in half and the run always ends tidily (its
    claim let go, its pause kept or its conversation closed). KeyboardInterrupt follows.

    The handler is in place before the run's task exists, so no Ctrl-C can leave a task
    behind that would start later (at exit, or in the next sync call)."""
    import _signal
    import asyncio

    pressed = False
    task: asyncio.Task[T] | None = None

    def on_sigint(signum: int, frame: object) -> None:
        nonlocal pressed
        pressed = True
        if task is not None:
            loop.call_soon_threadsafe(task.cancel)

    _signal.signal(_signal.SIGINT, on_sigint)
    try:
        if pressed:
            coro.close()
            raise KeyboardInterrupt
        task = loop.create_task(coro)
        if pressed:
            task.cancel()
        result = loop.run_until_complete(task)
    except asyncio.CancelledError:
        if pressed:
            raise KeyboardInterrupt from None
        raise
    finally:
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    if pressed:
        raise KeyboardInterrupt
    return result


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop, made whole even if Ctrl-C comes meanwhile: in the main thread SIGINT
    is held back while it is built (a loop cut half-way complains when it is collected), and
    delivered, as KeyboardInterrupt, right after."""
    import asyncio
    import signal

    if threading.current_thread() is not threading.main_thread() or not hasattr(
        signal, "pthread_sigmask"
    ):
        return asyncio.new_event_loop()
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        return asyncio.new_event_loop()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _thread_loop() -> asyncio.AbstractEventLoop:
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is None or loop.is_closed():
        loop = _local.loop = new_event_loop()  # not set as the thread's loop
        if threading.current_thread() is threading.main_thread():
            import atexit

            atexit.register(_close, loop)
    return loop


def _close(loop: asyncio.AbstractEventLoop) -> None:
    if loop.is_closed() or loop.is_running():
        return
    try:
        import asyncio

        left = asyncio.all_tasks(loop)  # none, unless a caller was interrupted oddly
        for task in left:
            task.cancel()
        if left:
            loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()
