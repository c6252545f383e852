"""An ASGI app served by a real uvicorn in a thread of the test process, on a free loopback
port: started, waited on until it serves, stopped at the end of the block."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .ports import free_port
from .waiting import wait_for

if TYPE_CHECKING:
    import uvicorn


@contextmanager
def in_thread(config: uvicorn.Config) -> Iterator[uvicorn.Server]:
    """Run a uvicorn server of ``config`` in a thread until the block ends; yields it once it
    serves (AssertionError if it ends first, or never starts, or never stops). Its
    ``server_state.connections`` are the connections it holds."""
    import uvicorn

    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started or not thread.is_alive(), what="uvicorn to start")
    assert server.started, f"uvicorn ended before it served on port {config.port}"
    try:
        yield server
    finally:
        server.should_exit = True
        thread.join(30)
        assert not thread.is_alive(), "uvicorn did not stop"


@contextmanager
def serving(asgi: Any, **options: Any) -> Iterator[str]:
    """Serve ``asgi`` with uvicorn (``options``: more ``uvicorn.Config`` settings) until the
    block ends; yields the base URL."""
    import uvicorn

    settings: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": free_port(),
        "log_level": "warning",
        "lifespan": "on",
        "timeout_graceful_shutdown": 1,
        **options,
    }
    with in_thread(uvicorn.Config(asgi, **settings)):
        yield f"http://{settings['host']}:{settings['port']}"
