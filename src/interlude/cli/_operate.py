"""Operating the inbox: ``serve`` (the web inbox, optionally with a worker in the same
process; with ``--temporal``, on paused agent workflows) and ``worker`` (carrying sessions on
once answered, expired or stopped)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from ._apps import _load_app
from ._commands import _operator
from ._errors import CliError
from ._hints import program
from ._mcp import serve_doors
from ._render import Output
from ._stores import _store

if TYPE_CHECKING:
    from types import FrameType

__all__ = ["_serve", "_worker", "serve_limit_options"]


def serve_limit_options(serve: argparse.ArgumentParser) -> None:
    """``serve``'s guards against clients that hold the server (docs/inbox.md, Commands) and
    the URL it is reached at. The defaults are ``interlude.server``'s (not imported here:
    the parser works without the [server] extra)."""
    serve.add_argument(
        "--header-timeout",
        type=float,
        default=10.0,
        help="seconds a client has to send a request's headers before it is cut off (10)",
    )
    serve.add_argument(
        "--body-timeout",
        type=float,
        default=30.0,
        help="seconds a request's body has to arrive, else 408 and the connection closed (30)",
    )
    serve.add_argument(
        "--max-connections",
        type=int,
        default=1000,
        help="connections held at once; more are closed at once (1000)",
    )
    serve.add_argument(
        "--max-client-connections",
        type=int,
        default=100,
        help="connections held at once from one client address; more are closed at once "
        "(100; behind a proxy every client is the proxy)",
    )
    serve.add_argument(
        "--shutdown-timeout",
        type=float,
        default=3.0,
        help="seconds requests in flight have to finish after Ctrl-C or SIGTERM; event "
        "streams end at once (3)",
    )
    serve.add_argument(
        "--public-url",
        metavar="URL",
        help="the URL this server is reached at (https://inbox.example.com), named by the "
        "A2A agent cards (default: the address it listens on)",
    )


def _serve(args: argparse.Namespace, out: Output) -> int:
    try:
        import uvicorn  # noqa: F401

        from ..server import create_app, load_tokens  # noqa: F401
    except ImportError as exc:
        raise CliError(
            f"interlude serve needs the [server] extra ({exc.name} is missing): "
            "pip install 'interlude-agents[server]'"
        ) from None
    if not args.poll > 0:
        raise CliError(f"--poll takes seconds > 0, got {args.poll}")
    if not args.header_timeout > 0 or args.max_connections < 1:
        raise CliError(
            f"--header-timeout takes seconds > 0 and --max-connections a number >= 1, got "
            f"{args.header_timeout} and {args.max_connections}"
        )
    if not args.body_timeout > 0 or args.max_client_connections < 1:
        raise CliError(
            f"--body-timeout takes seconds > 0 and --max-client-connections a number >= 1, "
            f"got {args.body_timeout} and {args.max_client_connections}"
        )
    if not args.shutdown_timeout >= 0:
        raise CliError(f"--shutdown-timeout takes seconds >= 0, got {args.shutdown_timeout}")
    if getattr(args, "dbos", None):
        from ._dbos import dbos_command

        return dbos_command(_serve_dbos)(args, out)
    if getattr(args, "temporal", None):
        if args.mcp:
            raise CliError(
                "serve --mcp serves the --app's agents on a session store (--store); with "
                "--temporal the inbox answers paused workflows"
            )
        if args.worker:
            raise CliError(
                "serve --worker runs a worker on a session store; with --temporal the workflows "
                f"are carried on by their own workers: run `{program()} --temporal "
                f"{args.temporal} temporal-worker`"
            )
        from ._temporal import _command

        return _command(_serve_temporal)(args, out)
    return _serve_store(args, out)


def _serve_store(args: argparse.Namespace, out: Output) -> int:
    from ..server import create_app

    doors = serve_doors(args)  # {}: the default doors alone
    store = _store(args.store, create=args.mcp)  # MCP clients start sessions
    tokens = _tokens(args)
    made = _made_token(args, tokens)
    # --app alone serves its agents over AG-UI too (POST /ag-ui/{agent}, with the [ag-ui] extra)
    app = _load_app(args.app)[0] if args.worker or args.app or args.mcp else None
    if args.notify and app is None:
        raise CliError("--notify needs --worker: the worker sends the notifications")
    if app is not None:
        _with_notify(app, args, inbox_url=_url(args))
    key = None
    if args.signing_key_env:
        key = os.environ.get(args.signing_key_env)
        if not key:
            raise CliError(f"--signing-key-env {args.signing_key_env}: that variable is not set")
    asgi = create_app(
        store,
        app,
        tokens=tokens,
        worker=args.worker,
        poll=args.poll,
        signing_key=key,
        **_limits(args),
        **doors,
    )
    url = _url(args)
    out.serving(url, made, tokens.get(made or "", ""), args.store, worker=args.worker)
    if doors and not out.json_mode:
        out._say(f"MCP endpoint: {url}/mcp (the same tokens, as Authorization: Bearer)", "dim")
        sys.stdout.flush()
    _run_server(args, asgi)
    return 0


def _serve_temporal(args: argparse.Namespace, out: Output) -> int:
    """``serve`` on the paused workflows of the Temporal server ``--temporal`` names."""
    import asyncio
    import json

    from ..server import create_app
    from ._temporal import _connect, _require

    _require()
    from ..temporal import TemporalInbox

    tokens = _tokens(args)
    made = _made_token(args, tokens)
    asyncio.run(_connect(args))  # one line now if it cannot be reached, not on every request
    queue = getattr(args, "task_queue", None)
    backend = TemporalInbox(args.temporal, namespace=args.namespace, task_queue=queue)
    asgi = create_app(backend, tokens=tokens, poll=args.poll, **_limits(args))
    url = _url(args)
    if out.json_mode:
        info = {"url": url, "login": f"{url}/login", "token": made, "temporal": args.temporal}
        print(json.dumps(info), flush=True)
    else:
        where = f"Temporal at {args.temporal}"
        if args.namespace != "default":
            where += f", namespace {args.namespace}"
        out._say(f"Interlude inbox on {url}  ({where})", "bold")
        out._say(f"Open {url}/login and sign in with a token.")
        if made is not None:
            out._say(f"  token for {tokens[made]} (this run only, shown once): {made}", "cyan")
        out._say(
            "Answers go to the paused workflows, which carry their runs on (their workers are "
            f"`{program()} temporal-worker`).",
            "dim",
        )
        out._say("Ctrl-C stops.", "dim")
        sys.stdout.flush()
    _run_server(args, asgi)
    return 0


def _serve_dbos(args: argparse.Namespace, out: Output) -> int:
    """``serve`` on the DBOS runs of the system database ``--dbos`` names."""
    from ._dbos import dbos_where, require_dbos

    if args.mcp or args.worker:
        flag = "--mcp serves the --app's agents" if args.mcp else "--worker runs a worker"
        raise CliError(
            f"serve {flag} on a session store (--store); with --dbos the runs are carried on "
            f"by their own workers: run `{program()} --dbos URL dbos-worker --app MODULE:APP`"
        )
    url = require_dbos(args)
    from ..dbos import DBOSInbox
    from ..server import create_app

    tokens = _tokens(args)
    made = _made_token(args, tokens)
    asgi = create_app(DBOSInbox(url), tokens=tokens, poll=args.poll, **_limits(args))
    where, link = dbos_where(url), _url(args)
    if out.json_mode:
        info = {"url": link, "login": f"{link}/login", "token": made, "dbos": where[8:]}
        print(json.dumps(info), flush=True)
    else:
        out._say(f"Interlude inbox on {link}  ({where})", "bold")
        out._say(f"Open {link}/login and sign in with a token.")
        if made is not None:
            out._say(f"  token for {tokens[made]} (this run only, shown once): {made}", "cyan")
        out._say(
            "Answers go to the paused runs, which carry on on their workers "
            f"(`{program()} dbos-worker`). Ctrl-C stops.",
            "dim",
        )
        sys.stdout.flush()
    _run_server(args, asgi)
    return 0


def _limits(args: argparse.Namespace) -> dict[str, Any]:
    """``create_app``'s options from ``serve``'s flags."""
    from urllib.parse import urlsplit

    url = args.public_url
    parts = urlsplit(url or "")
    if url is not None and (parts.scheme not in ("http", "https") or not parts.netloc):
        raise CliError(f"--public-url takes the http(s) URL this server is reached at, got {url}")
    return {"public_url": url, "body_timeout": args.body_timeout}


def _tokens(args: argparse.Namespace) -> dict[str, str]:
    from ..server import load_tokens

    return load_tokens(args.tokens)


def _made_token(args: argparse.Namespace, tokens: dict[str, str]) -> str | None:
    """With no tokens (on a loopback address only), a token made for this run, added to
    ``tokens``; None when tokens are configured."""
    if tokens:
        return None
    if not _loopback(args.host):
        raise CliError(
            f"no tokens, and --host {args.host} is not a loopback address: set "
            "INTERLUDE_TOKENS=token=name (tokens of 16+ characters) or pass --tokens FILE"
        )
    import secrets

    made = secrets.token_urlsafe(24)
    tokens[made] = _operator()
    return made


def _url(args: argparse.Namespace) -> str:
    shown_host = f"[{args.host}]" if ":" in args.host else args.host
    return f"http://{shown_host}:{args.port}"


def _run_server(args: argparse.Namespace, asgi: Any) -> None:
    import uvicorn

    from ..server import stop_streams, uvicorn_config

    config = uvicorn_config(
        asgi,
        host=args.host,
        port=args.port,
        header_timeout=args.header_timeout,
        max_connections=args.max_connections,
        max_client_connections=args.max_client_connections,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=args.shutdown_timeout,
    )

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            stop_streams(asgi)  # end the event streams now, not after the graceful timeout
            super().handle_exit(sig, frame)

    import contextlib

    with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises Ctrl-C once it has stopped
        Server(config).run()


def _loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def _worker(args: argparse.Namespace, out: Output) -> int:
    import asyncio
    import contextlib
    import logging

    from .. import Worker

    if not args.poll > 0:
        raise CliError(f"--poll takes seconds > 0, got {args.poll}")
    app, which = _load_app(args.app)
    _with_notify(app, args)
    store = _store(args.store) if args.once else _store_when_up(args.store)
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


def _with_notify(app: Any, args: argparse.Namespace, inbox_url: str | None = None) -> None:
    """Add ``--notify`` targets and ``--inbox-url`` (or ``inbox_url``, this server's address,
    unless the app names one) to the app's notifications."""
    if not args.notify and not args.inbox_url and (inbox_url is None or not app.notifications):
        return
    from ..errors import ConfigurationError
    from ..notify import Notifications

    current = app.notifications
    link = args.inbox_url or (current.inbox_url if current else None) or inbox_url
    try:
        app.notifications = Notifications.of(
            [*(current.targets if current else ()), *args.notify],
            inbox_url=link,
            secret=os.environ.get("INTERLUDE_NOTIFY_SECRET") or None,
        )
    except ConfigurationError as exc:
        raise CliError(f"--notify: {exc}") from None
    if current is not None:  # keep the app's other settings
        from dataclasses import replace

        app.notifications = replace(current, targets=app.notifications.targets, inbox_url=link)


def _store_when_up(url: str, *, max_wait: float = 10.0) -> Any:
    """The store at ``url``, waiting (backoff with jitter, up to ``max_wait`` s between tries,
    each failure streak logged once) while it cannot be reached: a worker started during a
    database outage waits it out, as one already running does. A store that is wrong rather
    than down (a bad URL, a refused login, a missing file or driver) ends it at once: only
    the store's own ``StoreUnavailableError`` is waited out."""
    import random
    import time

    from ..errors import StoreUnavailableError

    delay, told = 0.5, False
    while True:
        try:
            store = _store(url)
        except StoreUnavailableError as exc:
            if not told:
                print(f"the store cannot be reached ({exc}); waiting for it", file=sys.stderr)
                told = True
            time.sleep(delay * (0.5 + random.random() / 2))
            delay = min(delay * 2, max_wait)
            continue
        if told:
            print("the store answers again", file=sys.stderr)
        return store
