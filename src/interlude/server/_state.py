"""What the server's routes share: the backend, the auth, the templates, the shutdown signal."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..operate import InboxBackend
    from ._auth import Auth

__all__ = ["ServerState"]


@dataclass(slots=True, kw_only=True)
class ServerState:
    backend: InboxBackend
    """Where the questions come from and the answers go (a store, or Temporal)."""
    auth: Auth
    poll: float
    templates: Any
    """The Jinja2 environment of the HTML pages."""
    stream_seconds: float = 300.0
    """How long one event stream stays open (the browser reconnects)."""
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    loop: asyncio.AbstractEventLoop | None = None
    """The serving loop (set in the lifespan), for :meth:`stop` from another thread."""
    hub: Any = None
    """The event streams' shared poller (``_events.Hub``)."""
    worker: Any = None
    """The in-process worker (``serve --worker``), woken when an answer is recorded."""
    supervisor: Any = None
    """What keeps the in-process worker running (``_health.Supervisor``), for ``/healthz``."""
    app: Any = None
    """The App whose agents the server builds (``serve --app``): "fork here" needs it."""

    def stop(self) -> None:
        """The server is about to stop: end the event streams and the worker now, rather than
        when the lifespan ends (after the open connections drain). Safe from any thread or a
        signal handler."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(self.stopping.set)

    def recorded(self) -> None:
        """An answer was recorded: the in-process worker (if any) looks at once."""
        if self.worker is not None:
            self.worker.wake()
