"""Operating the inbox: ``serve`` (the web inbox, optionally with a worker in the same
process) and ``worker`` (carrying sessions on once answered, expired or stopped)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._apps import _load_app
from ._commands import _operator
from ._errors import CliError
from ._render import Output
from ._stores import _store

if TYPE_CHECKING:
    from types import FrameType

__all__ = ["_serve", "_worker"]


def _serve(args: argparse.Namespace, out: Output) -> int:
    try:
        import uvicorn

        from ..server import create_app, load_tokens
    except ImportError as exc:
        raise CliError(
            f"interlude serve needs the [server] extra ({exc.name} is missing): "
            "pip install 'interlude[server]'"
        ) from None
    if not args.poll > 0:
        raise CliError(f"--poll takes seconds > 0, got {args.poll}")
    store = _store(args.store)
    tokens = load_tokens(args.tokens)
    made = None
    if not tokens:
        if not _loopback(args.host):
            raise CliError(
                f"no tokens, and --host {args.host} is not a loopback address: set "
                "INTERLUDE_TOKENS=token=name (tokens of 16+ characters) or pass --tokens FILE"
            )
        import secrets

        made = secrets.token_urlsafe(24)
        tokens = {made: _operator()}
    app = _load_app(args.app)[0] if args.worker else None
    asgi = create_app(store, app, tokens=tokens, worker=args.worker, poll=args.poll)
    shown_host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{shown_host}:{args.port}"
    out.serving(url, made, tokens.get(made or "", ""), args.store, worker=args.worker)
    config = uvicorn.Config(
        asgi,
        host=args.host,
        port=args.port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=3,
    )
    from ..server._app import stop_streams

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            stop_streams(asgi)  # end the event streams now, not after the graceful timeout
            super().handle_exit(sig, frame)

    import contextlib

    with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises Ctrl-C once it has stopped
        Server(config).run()
    return 0


def _loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def _worker(args: argparse.Namespace, out: Output) -> int:
    import asyncio
    import contextlib
    import logging

    from .. import Worker

    if not args.poll > 0:
        raise CliError(f"--poll takes seconds > 0, got {args.poll}")
    store = _store(args.store)
    app, which = _load_app(args.app)
    worker = Worker(app, store, poll=args.poll)
    if args.once:
        handled = asyncio.run(worker.run_once())
        out.worked(handled, dict(worker.failed))
        return 1 if worker.failed else 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    out.working_forever(args.store, which)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: stop between sessions
        asyncio.run(worker.run())
    out.worked(worker.handled, dict(worker.failed))
    return 0
