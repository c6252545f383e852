"""Tools from MCP servers (``pip install 'interlude-agents[mcp]'``).

``McpServer.stdio(...)`` or ``McpServer.http(...)`` names a server; ``server.tools()`` lists its
tools as Interlude tools (connecting on first use); ``require_approval(...)`` asks a person
before the tools whose annotations a rule picks. A question the server asks during a call
(an elicitation) pauses the run as an interrupt, or is answered by an ``elicitation`` callback.
See docs/mcp.md.
"""

from __future__ import annotations

from ._approval import RequireApproval, require_approval
from ._elicit import Elicitation
from ._server import ElicitationHandler, McpServer
from ._tool import McpTool, ToolAnnotations

__all__ = [
    "Elicitation",
    "ElicitationHandler",
    "McpServer",
    "McpTool",
    "RequireApproval",
    "ToolAnnotations",
    "require_approval",
]
