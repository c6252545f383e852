"""AG-UI: serve an :class:`~interlude.App`'s agents, graphs and swarms to AG-UI front-ends
(extra ``[ag-ui]``).

``POST /ag-ui/{agent}`` takes a ``RunAgentInput`` (its thread id is the session), streams the
run's events as SSE and ends a paused run with ``RUN_FINISHED`` whose outcome is
``{"type": "interrupt", "interrupts": [...]}``. The next run's ``resume[]`` is checked as
``Agent.resume`` checks answers: a refused entry ends the run with ``RUN_ERROR`` and nothing
changes. A graph's or swarm's nodes run as AG-UI subagents, and a node's question names it
(``subagentRunId``, ``metadata.interlude.nodePath``). ``interlude serve --app`` serves the
route next to the inbox; :func:`create_endpoint` makes it an ASGI application to mount
elsewhere. See docs/protocols.md.
"""

from __future__ import annotations

from ._endpoint import create_endpoint
from ._endpoint import server_routes as server_routes  # the door the inbox server mounts

__all__ = ["create_endpoint"]
