"""Agents served over MCP: each agent of an :class:`~interlude.App` is an MCP tool (extra
``[mcp]``, the official ``mcp`` package), so any MCP client (Claude Desktop, Claude Code, an
IDE, another agent) can run it and answer its questions in its own dialog.

A tool takes ``prompt`` and an optional ``session_id`` (without one, a new session is made and
its id is in the result; only the caller who started a session through this door may prompt it,
anyone may answer its questions as the floor allows). When the agent stops to ask a person, the
question goes to the calling client as an elicitation (a form drawn from the question's
response schema) and the answer carries the run on within the same call, as often as it asks. A
client that cannot show forms gets the question and where to answer it as the result; a client
that goes away leaves the session paused in its store, answerable from any other door. Every
answer goes through the operator floor (``interlude.operate.Operator``) as the caller's: who
may answer, quorum and "the first answer wins" are its rules, the same at every door.

- :func:`create_mcp_app`: an ASGI application serving ``/mcp`` (streamable HTTP, bearer
  tokens as the inbox's);
- :func:`mcp_door`: the same endpoint as a door of ``interlude.server.create_app``
  (``interlude serve --mcp``);
- :func:`serve_stdio`: the tools over stdin and stdout (``interlude mcp-serve``), for one
  person; :func:`create_mcp_server`: the same as the SDK's server object, for a transport of
  your own or ``mcp.Client(server)`` in process.

This package is a door: ``import interlude`` does not import it. See docs/channels.md.
"""

from __future__ import annotations

from ._http import create_mcp_app, mcp_door
from ._stdio import create_mcp_server, serve_stdio

__all__ = ["create_mcp_app", "create_mcp_server", "mcp_door", "serve_stdio"]
