"""Serving the inbox with uvicorn, guarded against clients that hold connections open: a
request's head must arrive within ``header_timeout`` seconds of the connection opening (or of
the previous response), at most ``max_connections`` connections are held at once, and at most
``max_client_connections`` of them come from one client address (more are closed at once), so
one client holding idle sockets cannot lock the others out. uvicorn alone has none of these:
it waits for a head forever. (How long a request's body may take is the application's limit:
``create_app(body_timeout=...)``.)"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import uvicorn

__all__ = ["HEADER_TIMEOUT", "MAX_CLIENT_CONNECTIONS", "MAX_CONNECTIONS", "uvicorn_config"]

HEADER_TIMEOUT = 10.0
"""Seconds a client has to send a request's head (request line and headers)."""
MAX_CONNECTIONS = 1000
"""Connections the server holds at once (event streams included)."""
MAX_CLIENT_CONNECTIONS = 100
"""Connections the server holds at once from one client address (its peer IP address)."""

_log = logging.getLogger("interlude.server")


def _peer(transport: asyncio.BaseTransport) -> str:
    """The client address a connection is counted under: its peer's IP address (never a
    header; behind a proxy every client is the proxy)."""
    peer = transport.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else ""


def _guarded(
    header_timeout: float, max_connections: int, max_client_connections: int
) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with a header-read timeout, a connection limit and a
    per-client connection budget (shared by the connections of one server)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    held: Counter[str] = Counter()  # connections held per client address
    refused_logged = {"server": 0.0, "client": 0.0}

    def refusing(kind: str, message: str, *args: object) -> None:
        now = time.monotonic()
        if now - refused_logged[kind] > 10:  # not once per connection
            refused_logged[kind] = now
            _log.warning(message, *args)

    class GuardedH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None
        _counted_as: str | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                refusing("server", "%d connections open: refusing more", max_connections)
                transport.close()
                return
            peer = _peer(transport)
            if held[peer] >= max_client_connections:
                refusing("client", "%s holds %d connections: refusing more", peer, held[peer])
                transport.close()
                return
            held[peer] += 1
            self._counted_as = peer
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
            peer, self._counted_as = self._counted_as, None
            if peer is not None:
                held[peer] -= 1
                if held[peer] <= 0:
                    del held[peer]
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
    max_client_connections: int = MAX_CLIENT_CONNECTIONS,
    **options: Any,
) -> uvicorn.Config:
    """A ``uvicorn.Config`` serving ``asgi`` (an application from ``create_app``) with a
    header-read timeout, a connection limit and a per-client connection budget (connections
    from one peer address: behind a proxy, raise it to ``max_connections``); ``options`` go to
    ``uvicorn.Config`` as they are (WebSockets are off unless ``ws`` says otherwise: nothing
    here speaks them, and an upgraded connection would leave the guards). ``interlude serve``
    serves with it."""
    import uvicorn

    from ..errors import ConfigurationError

    if not header_timeout > 0 or max_connections < 1 or max_client_connections < 1:
        raise ConfigurationError(
            f"header_timeout is seconds > 0, max_connections and max_client_connections at "
            f"least 1, got {header_timeout!r}, {max_connections!r} and "
            f"{max_client_connections!r}"
        )
    protocol = _guarded(header_timeout, max_connections, max_client_connections)
    options.setdefault("ws", "none")
    return uvicorn.Config(asgi, host=host, port=port, http=protocol, **options)
