"""The agent of the pause-in-one-process, answer-in-another test: both processes import it
(the answering one runs ``python -m tests.mcp.booking_agent DB LOG ANSWERS_JSON``)."""

from __future__ import annotations

import sys

from interlude import Agent
from interlude.mcp import McpServer
from interlude.sessions import SQLiteStore

from .servers import SERVER


def build(model: object, db: str, log: str) -> tuple[Agent, McpServer]:
    server = McpServer.stdio(sys.executable, [SERVER], name="box-office", env={"MCP_TEST_LOG": log})
    agent = Agent(model, tools=server.tools(), session=SQLiteStore(db), session_id="booking-1")
    return agent, server


if __name__ == "__main__":  # answer and finish
    import json

    from interlude.testing import ScriptedModel

    db, log, answers = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    agent, server = build(ScriptedModel(["Enjoy the show."]), db, log)
    with agent:
        assert agent.is_paused, "the pause was not in the store"
        print(agent.resume(answers, by="ana"))
