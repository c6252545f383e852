"""Serve the test app over A2A on a port (a separate process the crash test SIGKILLs):
``python a2a_serve.py <store url> <port>``."""

from __future__ import annotations

import sys

import uvicorn
from a2a_apps import build_app
from a2a_wire import TOKENS

from interlude.a2a import create_a2a_app

if __name__ == "__main__":
    store, port = sys.argv[1], int(sys.argv[2])
    uvicorn.run(
        create_a2a_app(build_app(), store, tokens=TOKENS),
        host="127.0.0.1",
        port=port,
        log_level="warning",
    )
