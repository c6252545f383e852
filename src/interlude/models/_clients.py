"""An async SDK client per live event loop, closed when its loop shuts down."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:  # asyncio is imported when first needed: `import interlude` stays light
    import asyncio

__all__ = ["LoopClients"]

C = TypeVar("C")


class LoopClients(Generic[C]):
    """An async SDK client per running event loop, kept only while that loop is alive.

    Pooled connections belong to the loop that opened them, so every loop gets a client of its
    own (``make()``). When a loop shuts down through ``asyncio.run`` / ``asyncio.Runner`` (or
    ``loop.shutdown_asyncgens()``), its client is closed there (``close(client)``) and
    forgotten. A loop closed without that, or left behind by a thread that ended, is forgotten
    at the next lookup, its client with it (its sockets are freed with the garbage).
    """

    def __init__(self, make: Callable[[], C], close: Callable[[C], Awaitable[object]]) -> None:
        self._make = make
        self._close = close
        self._lock = threading.Lock()
        self._clients: dict[asyncio.AbstractEventLoop, _Entry[C]] = {}

    def __len__(self) -> int:
        return len(self._clients)

    def get(self) -> C:
        """The running loop's client (built on first use)."""
        import asyncio

        loop = asyncio.get_running_loop()
        with self._lock:
            for old in [k for k, e in self._clients.items() if k is not loop and e.stale(k)]:
                del self._clients[old]
            entry = self._clients.get(loop)
            if entry is not None:
                entry.thread = threading.current_thread()
                return entry.client
            client = self._make()
            closer = self._close_at_shutdown(loop, client)
            self._clients[loop] = _Entry(client, closer, threading.current_thread())
        # Run the closer to its first yield: that registers it with the running loop, which
        # closes it (running its `finally`) when it shuts its async generators down.
        step = closer.asend(None)
        with contextlib.suppress(StopIteration):
            step.send(None)
        return client

    async def _close_at_shutdown(
        self, loop: asyncio.AbstractEventLoop, client: C
    ) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            with self._lock:
                entry = self._clients.get(loop)
                if entry is not None and entry.client is client:
                    del self._clients[loop]
            with contextlib.suppress(Exception):  # the loop is ending: nobody to tell
                await self._close(client)


class _Entry(Generic[C]):
    __slots__ = ("client", "closer", "thread")

    def __init__(
        self, client: C, closer: AsyncGenerator[None, None], thread: threading.Thread
    ) -> None:
        self.client = client
        self.closer = closer  # kept alive here: the loop holds its async generators weakly
        self.thread = thread

    def stale(self, loop: asyncio.AbstractEventLoop) -> bool:
        """The loop is closed, or idle with the thread that last used it gone."""
        return loop.is_closed() or (not loop.is_running() and not self.thread.is_alive())
