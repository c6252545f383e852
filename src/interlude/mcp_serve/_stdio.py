"""The App's agents as MCP tools for one person: over stdin and stdout (``interlude
mcp-serve``, the server a desktop client such as Claude Desktop starts as a subprocess), or as
the SDK's server object, to run on a transport of your own (or in process, in tests). Whoever
runs it answers the questions: the person it is made for, in the groups it is given."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, ResumeInputError
from ._calls import AgentCalls, Caller
from ._server import agent_server

if TYPE_CHECKING:
    import anyio
    from mcp.server import Server

    from ..operate import App, Operator
    from ..sessions import InboxStore

__all__ = ["create_mcp_server", "serve_stdio"]


def create_mcp_server(
    app: App,
    store: InboxStore | str,
    *,
    by: str,
    groups: Collection[str] | None = (),
    inbox_url: str | None = None,
    signing_key: bytes | str | None = None,
    descriptions: Mapping[str, str] | None = None,
) -> Server[Any]:
    """``app``'s agents as MCP tools, answered by ``by``: the official SDK's low-level
    ``mcp.server.Server``, to run on any transport (``server.run(read, write, ...)``), or to
    hand to ``mcp.Client(server)`` in process. :func:`serve_stdio` serves it on stdin and
    stdout; ``store`` is a store or its URL (opened here, for the server's lifetime).

    ``by`` is who answers the questions the client's forms carry (as the audit records it),
    a member of ``groups`` (empty: of none, so questions limited to groups are left to their
    members, as at every door; None: the operator, whose groups are not checked).
    ``inbox_url`` is where the inbox is, for the links in results (default: the app's
    ``inbox_url``). With ``signing_key`` a pause is verified before its questions are asked.
    ``descriptions`` are the tools' descriptions, by agent name."""
    server, _, _ = _served(app, store, by, groups, inbox_url, signing_key, descriptions)
    return server


async def serve_stdio(
    app: App,
    store: InboxStore | str,
    *,
    by: str,
    groups: Collection[str] | None = (),
    inbox_url: str | None = None,
    signing_key: bytes | str | None = None,
    descriptions: Mapping[str, str] | None = None,
    stdin: anyio.AsyncFile[str] | None = None,
    stdout: anyio.AsyncFile[str] | None = None,
) -> None:
    """Serve :func:`create_mcp_server` on this process's stdin and stdout (or the given
    streams) until the client closes them. Runs the client left under way (it went away in
    the middle of one) finish before it returns; a store opened here from a URL is closed."""
    from mcp.server.stdio import stdio_server

    server, calls, operator = _served(app, store, by, groups, inbox_url, signing_key, descriptions)
    try:
        async with stdio_server(stdin, stdout) as (read, write):
            await server.run(read, write, server.create_initialization_options())
        await calls.settle()
    finally:
        operator.close()


def _served(
    app: App,
    store: InboxStore | str,
    by: str,
    groups: Collection[str] | None,
    inbox_url: str | None,
    signing_key: bytes | str | None,
    descriptions: Mapping[str, str] | None,
) -> tuple[Server[Any], AgentCalls, Operator]:
    from ..operate import Operator

    caller = Caller(_checked_name(by), _checked_groups(groups), _inbox(app, inbox_url))
    operator = Operator(app, store, signing_key=signing_key)
    calls = AgentCalls(operator, descriptions)
    return agent_server(calls, lambda ctx: caller), calls, operator


def _checked_name(by: str) -> str:
    from .._agent import check_by

    if not isinstance(by, str) or not by.strip() or not by.isprintable():
        raise ConfigurationError(f"by is the name of who answers (printable text), got {by!r}")
    try:
        check_by(by)
    except ResumeInputError as exc:
        raise ConfigurationError(f"{by!r} cannot answer questions: {exc}") from None
    return by


def _checked_groups(groups: Collection[str] | None) -> tuple[str, ...] | None:
    if groups is None:
        return None
    if isinstance(groups, str):
        raise ConfigurationError(f"groups is a list of group names, not the text {groups!r}")
    out = tuple(dict.fromkeys(groups))
    for group in out:
        if not isinstance(group, str) or not group or not group.isprintable() or " " in group:
            raise ConfigurationError(f"a group is a printable name without spaces, got {group!r}")
    return out


def _inbox(app: App, inbox_url: str | None) -> str | None:
    if inbox_url:
        return inbox_url.rstrip("/")
    settings: Any = app.notifications
    if settings is not None and settings.inbox_url:
        return str(settings.inbox_url).rstrip("/")
    return None
