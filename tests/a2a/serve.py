"""Serve the test app over A2A on a port (a separate process the crash test SIGKILLs):
``python -m tests.a2a.serve <store url> <port>`` (from the repository)."""

from __future__ import annotations

import sys

import uvicorn

from interlude.a2a import create_a2a_app

from .apps import build_app
from .wire import TOKENS

if __name__ == "__main__":
    store, port = sys.argv[1], int(sys.argv[2])
    uvicorn.run(
        create_a2a_app(build_app(), store, tokens=TOKENS),
        host="127.0.0.1",
        port=port,
        log_level="warning",
    )
