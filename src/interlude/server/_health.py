"""The server's health: the in-process worker kept running (restarted with backoff when it
stops), ``GET /healthz``, the line the pages' header shows, and the 503 answer for a store
outage (``StoreUnavailableError``) on every route."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ._output import JSON

if TYPE_CHECKING:
    from ..operate import Worker
    from ._state import ServerState

__all__ = ["RETRY_AFTER", "Supervisor", "health_line", "health_routes", "outage"]

RETRY_AFTER = 5
"""Seconds a client is told to wait (``Retry-After``) when the store is unavailable."""

_log = logging.getLogger("interlude.server")


class Supervisor:
    """Runs ``worker`` until ``stopping`` is set, starting it again (after a backoff doubling
    from ``first`` to ``cap`` seconds, with jitter) whenever it stops with an error, which is
    logged at once. ``restarts``, ``running`` and ``last_crash`` say how it went."""

    def __init__(
        self, worker: Worker, stopping: asyncio.Event, *, first: float = 0.5, cap: float = 30.0
    ) -> None:
        self.worker = worker
        self.stopping = stopping
        self.first, self.cap = first, cap
        self.restarts = 0
        self.running = False
        self.last_crash: str | None = None
        self.crashed_at: float | None = None

    async def run(self) -> None:
        delay = self.first
        while not self.stopping.is_set():
            self.running = True
            try:
                await self.worker.run(self.stopping)
                return  # asked to stop
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.running = False
                self.restarts += 1
                self.crashed_at = time.time()
                self.last_crash = f"{type(exc).__name__}: {exc}"
                wait = delay / 2 + random.uniform(0, delay / 2)
                _log.error(
                    "the inbox's worker stopped (%s); starting it again in %.1f s",
                    self.last_crash,
                    wait,
                    exc_info=exc,
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), wait)
                delay = min(self.cap, delay * 2)
            finally:
                self.running = False

    def health(self) -> dict[str, Any]:
        """The worker's part of ``/healthz`` (no error text: that is in the log)."""
        h = self.worker.health
        return {
            "ok": self.running and h.ok,
            "running": self.running,
            "restarts": self.restarts,
            "store_ok": h.ok,
            "failing_since": h.failing_since,
            "failures": h.failures,
            "last_pass": h.last_pass,
        }


def health_line(state: ServerState) -> str | None:
    """What the pages' header says when the worker is unwell (None: all is well)."""
    supervisor: Supervisor | None = state.supervisor
    if supervisor is None:
        return None
    h = supervisor.worker.health
    if not supervisor.running:
        return f"The worker stopped ({supervisor.last_crash}); it is being restarted."
    if not h.ok:
        since = time.strftime("%H:%M:%S", time.localtime(h.failing_since or time.time()))
        return f"The worker cannot reach the store since {since} ({h.last_error}); retrying."
    return None


async def healthz(request: Request) -> Response:
    """200 when the store answers and the worker (if any) runs and reaches it; 503 otherwise."""
    state: ServerState = request.app.state.interlude
    store_ok = True
    try:
        await asyncio.wait_for(state.backend.pending(limit=1), RETRY_AFTER)
    except Exception as exc:  # the store (or Temporal) cannot answer now
        _log.warning("health check: the store did not answer (%s: %s)", type(exc).__name__, exc)
        store_ok = False
    worker = None if state.supervisor is None else state.supervisor.health()
    ok = store_ok and (worker is None or worker["ok"])
    body = {"ok": ok, "store": {"ok": store_ok}, "worker": worker}
    headers = {"Cache-Control": "no-store"}
    if not ok:
        headers["Retry-After"] = str(RETRY_AFTER)
    return JSON(body, status_code=200 if ok else 503, headers=headers)


async def outage(request: Request, exc: Exception) -> Response:
    """A store outage on any route: 503 with ``Retry-After`` and a JSON body (the details go
    to the log, not to the client)."""
    _log.warning("%s %s: the store is unavailable (%s)", request.method, request.url.path, exc)
    return JSON(
        {
            "error": "the session store is unavailable just now; try again shortly",
            "retry_after": RETRY_AFTER,
            "interrupt_id": None,
            "path": None,
        },
        status_code=503,
        headers={"Retry-After": str(RETRY_AFTER), "Cache-Control": "no-store"},
    )


def health_routes() -> list[Route]:
    return [Route("/healthz", healthz, methods=["GET"])]
