"""Runs an agent whose model calls the MCP server's ``slow`` tool (no hints: not idempotent),
on a SQLite session: ``python crash_child.py DB SERVER LOG``. The server logs each tool run to
``LOG``; the child then waits in the call to be killed."""

from __future__ import annotations

import sys

from interlude import Agent, ToolUse
from interlude.mcp import McpServer
from interlude.testing import ScriptedModel

db, server, log = sys.argv[1], sys.argv[2], sys.argv[3]
notes = McpServer.stdio(sys.executable, [server], name="notes", env={"MCP_TEST_LOG": log})
model = ScriptedModel([[ToolUse("c1", "slow", {"seconds": 60})], "done"])
agent = Agent(model, tools=notes.tools(), session=f"sqlite:///{db}", session_id="s")
agent("go")
