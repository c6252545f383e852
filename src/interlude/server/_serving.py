"""Serving the inbox with uvicorn, guarded against clients that hold connections open: a
request's head must arrive within ``header_timeout`` seconds of the connection opening (or of
the previous response), and at most ``max_connections`` connections are held at once (more are
closed at once). uvicorn alone has neither: it waits for a head forever."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import uvicorn

__all__ = ["HEADER_TIMEOUT", "MAX_CONNECTIONS", "uvicorn_config"]

HEADER_TIMEOUT = 10.0
"""Seconds a client has to send a request's head (request line and headers)."""
MAX_CONNECTIONS = 1000
"""Connections the server holds at once (event streams included)."""

_log = logging.getLogger("interlude.server")


def _guarded(header_timeout: float, max_connections: int) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with a header-read timeout and a connection limit."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None
        _refused_logged = 0.0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                now = time.monotonic()
                if now - GuardedH11Protocol._refused_logged > 10:  # not once per connection
                    GuardedH11Protocol._refused_logged = now
                    _log.warning("%d connections open: refusing more", max_connections)
                transport.close()
                return
            self._arm()

        def data_received(self, data: bytes) -> None:
            waiting = self.cycle is None or self.cycle.response_complete
            if waiting:  # a new request's head is due (the keep-alive timer ends here)
                self._arm()
            super().data_received(data)
            if self.cycle is not None and not self.cycle.response_complete:
                self._disarm()  # its head arrived

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._disarm()  # uvicorn's keep-alive timer covers the idle time now

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(header_timeout, self._too_slow)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _too_slow(self) -> None:
            self._head_timer = None
            if self.cycle is None or self.cycle.response_complete:
                self.transport.close()  # no request head in time

    return GuardedH11Protocol


def uvicorn_config(
    asgi: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8321,
    header_timeout: float = HEADER_TIMEOUT,
    max_connections: int = MAX_CONNECTIONS,
    **options: Any,
) -> uvicorn.Config:
    """A ``uvicorn.Config`` serving ``asgi`` (an application from ``create_app``) with a
    header-read timeout and a connection limit; ``options`` go to ``uvicorn.Config`` as they
    are. ``interlude serve`` serves with it."""
    import uvicorn

    from ..errors import ConfigurationError

    if not header_timeout > 0 or max_connections < 1:
        raise ConfigurationError(
            f"header_timeout is seconds > 0 and max_connections at least 1, got "
            f"{header_timeout!r} and {max_connections!r}"
        )
    protocol = _guarded(header_timeout, max_connections)
    return uvicorn.Config(asgi, host=host, port=port, http=protocol, **options)
