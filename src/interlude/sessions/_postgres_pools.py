"""PostgresStore's connections: a small pool of psycopg ``AsyncConnection`` objects per event
loop, so that each call runs on the caller's loop (no worker-thread hop).

An async connection belongs to the loop it is used on, and the store is used from several
loops (the per-thread loop of sync calls, a helper thread's loop, ``asyncio.run`` in scripts
and tests, workers). So each loop gets its own :class:`LoopPool`, made at its first call and
keyed weakly by the loop. A pool whose loop has closed is dropped (its idle connections closed
at once, without the loop) the next time a new loop's pool is made, when the store closes, or
when the loop is collected.

Why not ``psycopg_pool.AsyncConnectionPool``: it runs maintenance tasks on its loop (three
workers and a scheduler) from ``open()`` until ``close()``. On the per-thread loops of sync
calls they would stay pending between calls and be destroyed, pending, with the thread; and
``close()`` would have to run on every loop, some of which no longer run. The pool here has no
task of its own: everything it does happens inside the calls that use it.

A connection taken from the pool is checked without a round trip: if its socket has something
to read while idle (a server that shut down, restarted or dropped it sends an error, then
closes), it is pinged and replaced if the ping fails. A call waits at most ``timeout`` seconds
for a connection (a new one included), then fails with ``psycopg_pool.PoolTimeout``.
"""

from __future__ import annotations

import asyncio
import os
import select
import threading
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["LoopPool", "LoopPools"]

Connect = Callable[[], Awaitable["AsyncConnection[Any]"]]


def _finish(conn: AsyncConnection[Any]) -> None:
    """Close ``conn``'s socket at once, from any thread (it must not be in use)."""
    conn.pgconn.finish()


def _readable(conn: AsyncConnection[Any]) -> bool:
    """Whether an idle connection's socket has data waiting (a healthy one has none)."""
    if not hasattr(select, "poll"):  # no poll(): always ping
        return True
    try:
        fd = conn.pgconn.socket
    except Exception:  # a closed connection has no socket: not usable
        return True
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


class LoopPool:
    """At most ``max_size`` connections for one event loop, opened on demand."""

    def __init__(self, connect: Connect, max_size: int, timeout: float) -> None:
        self._connect = connect
        self._max_size = max_size
        self._timeout = timeout
        self._idle: list[AsyncConnection[Any]] = []
        self._size = 0  # connections open or being opened
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._lock = threading.Lock()  # the idle list, against close() from another thread
        self._pid = os.getpid()
        self.closed = False

    async def get(self) -> AsyncConnection[Any]:
        """A usable connection; ``psycopg_pool.PoolTimeout`` if none comes within the timeout,
        psycopg's error if a new one cannot be opened."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        while True:
            conn = await self._take_idle()
            if conn is not None:
                return conn
            left = deadline - loop.time()
            if self._size < self._max_size:
                return await self._open(left)
            if left <= 0:
                from psycopg_pool import PoolTimeout

                raise PoolTimeout(f"couldn't get a connection after {self._timeout:.2f} sec")
            waiter = loop.create_future()
            self._waiting.append(waiter)
            try:
                await asyncio.wait_for(waiter, left)
            except TimeoutError:
                pass
            finally:
                if waiter in self._waiting:
                    self._waiting.remove(waiter)

    async def _take_idle(self) -> AsyncConnection[Any] | None:
        while True:
            with self._lock:
                if self.closed:
                    from psycopg import InterfaceError

                    raise InterfaceError("the connection pool is closed")
                if not self._idle:
                    return None
                conn = self._idle.pop()
            if await self._usable(conn):
                return conn
            self._drop(conn)

    async def _usable(self, conn: AsyncConnection[Any]) -> bool:
        if conn.closed:
            return False
        if not _readable(conn):
            return True
        try:  # a notice, or the server's goodbye: find out which
            await conn.execute("")
        except Exception:  # any failure: replace the connection
            return False
        return not conn.closed

    async def _open(self, left: float) -> AsyncConnection[Any]:
        self._size += 1
        try:
            if left <= 0:
                from psycopg_pool import PoolTimeout

                raise PoolTimeout(f"couldn't get a connection after {self._timeout:.2f} sec")
            try:
                return await asyncio.wait_for(self._connect(), left)
            except TimeoutError:
                from psycopg_pool import PoolTimeout

                raise PoolTimeout(
                    f"couldn't get a connection after {self._timeout:.2f} sec"
                ) from None
        except BaseException:
            self._size -= 1
            self._wake()
            raise

    def put(self, conn: AsyncConnection[Any]) -> None:
        """Give ``conn`` back: kept if it is idle and healthy, else closed."""
        # libpq's own status (``conn.info`` would make an object per call): 0 is IDLE
        healthy = not conn.closed and conn.pgconn.transaction_status == 0
        with self._lock:
            keep = healthy and not self.closed
            if keep:
                self._idle.append(conn)
        if not keep:
            self._drop(conn)
        self._wake()

    def _drop(self, conn: AsyncConnection[Any]) -> None:
        self._size -= 1
        _finish(conn)

    def _wake(self) -> None:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def discard(self) -> None:
        """Close the idle connections now (from any thread, whether or not the loop still
        runs); connections in use are closed when they come back."""
        with self._lock:
            self.closed = True
            idle, self._idle = self._idle, []
        if os.getpid() != self._pid:  # a forked child: the sockets are the parent's
            return
        for conn in idle:
            _finish(conn)


class LoopPools:
    """One :class:`LoopPool` per event loop, made by ``make`` at the loop's first call."""

    def __init__(self, make: Callable[[], LoopPool]) -> None:
        self._make = make
        self._pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopPool] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()
        self.closed = False
        _EVERY.add(self)

    def pool(self) -> LoopPool:
        """The running loop's pool (made now if this is the loop's first call)."""
        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is not None:
            return pool
        with self._lock:
            if self.closed:
                from psycopg import InterfaceError

                raise InterfaceError("the connection pool is closed")
            self._sweep()
            pool = self._pools[loop] = self._make()
            weakref.finalize(loop, pool.discard)  # a loop collected unclosed
            return pool

    def connection(self) -> _Lease:
        """``async with pools.connection() as conn``: a connection of the running loop's pool,
        given back on exit."""
        return _Lease(self.pool())

    def _sweep(self) -> None:
        for loop, pool in list(self._pools.items()):
            if loop.is_closed():
                del self._pools[loop]
                pool.discard()

    def __len__(self) -> int:
        """How many loops have a pool (closed loops not yet swept included)."""
        return len(self._pools)

    def close(self) -> None:
        """Close every pool: idle connections at once, busy ones when they come back. Never
        waits for a loop, so a loop that is closed, busy or gone cannot hang it."""
        with self._lock:
            self.closed = True
            pools = list(self._pools.values())
            self._pools.clear()
        for pool in pools:
            pool.discard()


_EVERY: weakref.WeakSet[LoopPools] = weakref.WeakSet()


def _forget_after_fork() -> None:
    """In a forked child, the pools hold the parent's connections: forget them (unclosed; psycopg
    leaves a parent's connection alone in a child), so the child opens its own."""
    for pools in list(_EVERY):
        pools._pools = weakref.WeakKeyDictionary()
        pools._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


class _Lease:
    __slots__ = ("_conn", "_pool")

    def __init__(self, pool: LoopPool) -> None:
        self._pool = pool
        self._conn: AsyncConnection[Any] | None = None

    async def __aenter__(self) -> AsyncConnection[Any]:
        self._conn = await self._pool.get()
        return self._conn

    async def __aexit__(self, *exc: object) -> None:
        if self._conn is not None:
            self._pool.put(self._conn)
            self._conn = None
