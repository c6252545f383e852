"""The agent of the MCP Tasks tests, imported by the test and run as the answering process:
``python -m tests.mcp.task_agent DB URL ANSWERS_JSON`` loads the paused session and resumes
it."""

from __future__ import annotations

import sys

from interlude import Agent
from interlude.mcp import McpServer
from interlude.sessions import SQLiteStore


def build(model: object, db: str, url: str) -> tuple[Agent, McpServer]:
    server = McpServer.http(url, name="tasks")
    agent = Agent(model, tools=server.tools(), session=SQLiteStore(db), session_id="task-1")
    return agent, server


if __name__ == "__main__":
    import json

    from interlude.testing import ScriptedModel

    db, url, answers = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    agent, server = build(ScriptedModel(["Enjoy the show."]), db, url)
    with agent:
        assert agent.is_paused, "the pause was not in the store"
        print(agent.resume(answers), flush=True)
        print(json.dumps(agent.messages[2].content[0].text), flush=True)
