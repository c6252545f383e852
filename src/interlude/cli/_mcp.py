"""``interlude mcp-serve``: the ``--app``'s agents as MCP tools over stdin and stdout, the
server an MCP client (Claude Desktop, Claude Code, an IDE) starts as a subprocess; and the
``/mcp`` door ``interlude serve --mcp`` adds to the inbox. See ``interlude.mcp_serve``.

Standard output is the protocol's: nothing else is printed there (errors before serving go to
stderr, as every command's do)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from ._errors import CliError
from ._render import Output

__all__ = ["mcp_serve_command", "serve_doors"]

CommandParser = Callable[..., argparse.ArgumentParser]


def mcp_serve_command(sub: Any, command_parser: CommandParser) -> None:
    """Add ``mcp-serve`` to the command line."""
    p = command_parser(
        sub,
        "mcp-serve",
        _mcp_serve,
        "serve the --app's agents as MCP tools over stdin/stdout, for an MCP client to start",
    )
    p.add_argument(
        "--by",
        metavar="NAME",
        help="who answers the questions the client's forms carry, for the audit trail "
        "(default: your OS user name)",
    )
    p.add_argument(
        "--group",
        metavar="GROUP",
        action="append",
        default=[],
        help="a group --by is in (repeatable); without one, questions limited to groups are "
        "left to their members, as at every door",
    )
    p.add_argument(
        "--inbox-url",
        metavar="URL",
        help="where the inbox is served, for the links in results (default: the app's inbox_url)",
    )
    p.add_argument(
        "--signing-key-env",
        metavar="VAR",
        help="verify every pause with the signing key in environment variable VAR (the agents' "
        "signing_key) before asking its questions",
    )


def _mcp_serve(args: argparse.Namespace, out: Output) -> int:
    import asyncio

    from ..errors import ConfigurationError
    from ._apps import _load_app
    from ._commands import _operator
    from ._stores import _store

    serve_stdio = _require()
    app = _load_app(args.app)[0]
    key = _signing_key(args.signing_key_env)
    store = _store(args.store, create=True)
    by = args.by or _operator()
    try:
        asyncio.run(
            serve_stdio(
                app,
                store,
                by=by,
                groups=tuple(args.group),
                inbox_url=args.inbox_url,
                signing_key=key,
            )
        )
    except ConfigurationError as exc:
        raise CliError(str(exc)) from None
    except KeyboardInterrupt:
        pass
    return 0


def _require() -> Any:
    try:
        from ..mcp_serve import serve_stdio
    except ImportError as exc:
        raise CliError(
            f"interlude mcp-serve needs the [mcp] extra ({exc.name} is missing): "
            "pip install 'interlude-agents[mcp]'"
        ) from None
    return serve_stdio


def _signing_key(variable: str | None) -> str | None:
    if not variable:
        return None
    key = os.environ.get(variable)
    if not key:
        raise CliError(f"--signing-key-env {variable}: that variable is not set")
    return key


def serve_doors(args: argparse.Namespace) -> dict[str, Any]:
    """``create_app``'s ``doors=`` for ``serve``: the default doors (AG-UI, A2A), and ``/mcp``
    with ``--mcp``, one-time answer links when ``$INTERLUDE_LINK_SECRET`` is set, Slack's
    actions when ``$INTERLUDE_SLACK_SIGNING_SECRET`` is (nothing added: the defaults stand)."""
    from ..operate import load_link_secret
    from ..server import DEFAULT_DOORS, links_door, slack_door_from_env

    added: list[Any] = []
    if getattr(args, "mcp", False):
        try:
            from ..mcp_serve import mcp_door
        except ImportError as exc:
            raise CliError(
                f"serve --mcp needs the [mcp] extra ({exc.name} is missing): "
                "pip install 'interlude-agents[mcp]'"
            ) from None
        added.append(mcp_door)
    secret = load_link_secret()
    if secret is not None:
        added.append(links_door(secret))
    slack = slack_door_from_env()
    if slack is not None:
        added.append(slack)
    return {"doors": (*DEFAULT_DOORS, *added)} if added else {}
