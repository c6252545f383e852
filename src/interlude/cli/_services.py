"""The commands that run until stopped: ``serve``, ``worker``, ``temporal-worker`` and
``dbos-worker`` (their parsers; ``_main`` says where each sends ``--temporal`` / ``--dbos``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ._dbos import dbos_worker_command
from ._mcp import mcp_serve_command
from ._operate import _serve, _worker, serve_limit_options
from ._temporal import DEFAULT_TASK_QUEUE, temporal_worker

__all__ = ["service_commands"]


def service_commands(sub: Any, command_parser: Callable[..., argparse.ArgumentParser]) -> None:
    """serve, worker, temporal-worker and dbos-worker: the commands that run until stopped."""
    serve = command_parser(
        sub,
        "serve",
        _serve,
        "serve the web inbox (HTML pages and a JSON API) where people answer questions",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument("--port", type=int, default=8321, help="port to listen on (8321)")
    serve.add_argument(
        "--tokens",
        metavar="FILE",
        help='JSON file {"token": "approver name", ...} (default: $INTERLUDE_TOKENS, '
        "tok1=ana,tok2=bo; with neither, on a loopback address only, a token for your OS "
        "user is made and printed once)",
    )
    serve.add_argument(
        "--worker",
        action="store_true",
        help="also run a worker in this process: it carries sessions on once answered",
    )
    serve.add_argument("--poll", type=float, default=0.5, help="seconds between checks (0.5)")
    serve.add_argument(
        "--mcp",
        action="store_true",
        help="also serve the --app's agents as MCP tools at /mcp (streamable HTTP, the same "
        "tokens), answering their questions in the client's own forms",
    )
    serve_limit_options(serve)
    serve.add_argument(
        "--signing-key-env",
        metavar="VAR",
        help="verify every pause with the signing key in environment variable VAR (the agents' "
        "signing_key) before showing its questions or checking answers against them",
    )
    _notify_options(serve, "with --worker: ")
    _queue_option(serve, "with --temporal: only workflows on this task queue")
    mcp_serve_command(sub, command_parser)

    worker = command_parser(
        sub,
        "worker",
        _worker,
        "carry on sessions that have recorded answers, expired questions or stopped runs",
    )
    worker.add_argument("--once", action="store_true", help="handle what is there now, then exit")
    worker.add_argument("--poll", type=float, default=0.5, help="seconds between checks (0.5)")
    _notify_options(worker, "")

    temporal = command_parser(
        sub,
        "temporal-worker",
        temporal_worker,
        "run agents of the --app as Temporal workflows (needs --temporal), until Ctrl-C",
    )
    _queue_option(temporal, f"the task queue to poll ({DEFAULT_TASK_QUEUE})")
    dbos_worker_command(sub, command_parser)


def _notify_options(p: argparse.ArgumentParser, prefix: str) -> None:
    p.add_argument(
        "--notify",
        metavar="URL",
        action="append",
        default=[],
        help=f"{prefix}notify about questions (asked, deadline near, escalated, expired, "
        "answered): an http(s):// webhook (signed with $INTERLUDE_NOTIFY_SECRET) or "
        "smtp://host:port?from=ADDRESS&to=ADDRESS; repeatable; added to the app's notify=",
    )
    p.add_argument(
        "--inbox-url",
        metavar="URL",
        help="the inbox's address, for the links in notifications"
        + (" (default: this server's)" if prefix else ""),
    )


def _queue_option(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--task-queue", metavar="QUEUE", help=help)
