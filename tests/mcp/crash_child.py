"""Runs an agent whose model calls the MCP server's ``slow`` tool (no hints: not idempotent),
on a SQLite session; touches ``marker`` just before the call, then waits in it to be killed."""

from __future__ import annotations

import sys
from pathlib import Path

from interlude import Agent, ToolUse
from interlude.hooks import BeforeToolCallEvent
from interlude.mcp import McpServer
from interlude.testing import ScriptedModel

db, marker, server = sys.argv[1], sys.argv[2], sys.argv[3]
notes = McpServer.stdio(sys.executable, [server], name="notes")
model = ScriptedModel([[ToolUse("c1", "slow", {"seconds": 60})], "done"])
agent = Agent(model, tools=notes.tools(), session=f"sqlite:///{db}", session_id="s")
agent.hooks.add_callback(BeforeToolCallEvent, lambda event: Path(marker).write_text("calling"))
agent("go")
