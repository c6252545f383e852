"""A small MCP server for the docs: an ops toolbox whose tools say what they do to the machine.

Run it as a stdio server (``python examples/mcp_server.py``) or over streamable HTTP
(``python examples/mcp_server.py http 8000``, then ``http://127.0.0.1:8000/mcp``). Nothing is
really deleted: the log files are simulated.
"""

from __future__ import annotations

import sys
from typing import Annotated

from mcp.server.mcpserver import AcceptedElicitation, Elicit, ElicitationResult, MCPServer, Resolve
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

server = MCPServer("ops", log_level="CRITICAL")
LOGS = {"/var/log/app/app-2026-01.log": 120, "/var/log/app/app-2026-02.log": 220}


class Usage(BaseModel):
    path: str
    megabytes: int


@server.tool(annotations=ToolAnnotations(read_only_hint=True, title="Disk usage"))
def disk_usage(path: str) -> Usage:
    """How much space the files under a directory take."""
    return Usage(path=path, megabytes=sum(mb for p, mb in LOGS.items() if p.startswith(path)))


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def delete_logs(directory: str) -> str:
    """Delete the old log files in a directory (simulated)."""
    freed = sum(mb for p, mb in LOGS.items() if p.startswith(directory))
    return f"deleted the logs in {directory}, {freed} MB freed"


class Retention(BaseModel):
    keep: int = Field(description="How many archives to keep")


def ask_retention(directory: str) -> Elicit[Retention]:
    return Elicit(f"How many archives of {directory} should be kept?", Retention)


@server.tool(annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True))
def rotate_logs(
    directory: str, retention: Annotated[ElicitationResult[Retention], Resolve(ask_retention)]
) -> str:
    """Rotate the logs of a directory, asking the user how many archives to keep."""
    if not isinstance(retention, AcceptedElicitation):
        return f"logs left as they were ({retention.action})"
    return f"rotated {directory}, keeping {retention.data.keep} archives"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        import anyio

        anyio.run(lambda: server.run_streamable_http_async(port=int(sys.argv[2])))
    else:
        server.run()
