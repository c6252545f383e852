"""Against the official reference server @modelcontextprotocol/server-everything (npm; built on
the TypeScript SDK, so it speaks the handshake-era protocol), over stdio and streamable HTTP."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from interlude import Agent, ToolUse
from interlude.mcp import McpServer
from interlude.testing import ScriptedModel

ASK = ToolUse("e1", "trigger-elicitation-request", {})
ECHO = ToolUse("e2", "echo", {"message": "hi"})


@pytest.mark.parametrize("executor", ["concurrent", "sequential"])
def test_two_calls_at_once_one_asks_the_person(
    everything: Callable[..., McpServer], executor: str
) -> None:
    """The server's question reaches the person even though another call to the same server
    is in flight (the handshake-era protocol does not say which call asked)."""
    agent = Agent(
        ScriptedModel([[ASK, ECHO], "Thanks."]),
        tools=everything().tools(),
        tool_executor=executor,
    )
    paused = agent("Ask me something, and echo hi")
    assert paused.stop_reason == "interrupt"
    [question] = paused.interrupts
    assert question.tool_use == ASK
    assert question.reason["message"] == "Please provide inputs for the following fields:"
    done = agent.resume({question.id: {"name": "Ana Lima"}})
    assert str(done) == "Thanks."
    asked, echoed = agent.messages[2].content
    assert asked.status == "success" and "Ana Lima" in asked.text, asked.text
    assert "cancelled" not in asked.text
    assert (echoed.status, echoed.text) == ("success", "Echo: hi")


def test_three_calls_at_once_two_ask(everything: Callable[..., McpServer]) -> None:
    other = ToolUse("e3", "trigger-elicitation-request", {})
    agent = Agent(ScriptedModel([[ASK, ECHO, other], "Thanks."]), tools=everything().tools())
    questions = agent("Ask twice").interrupts
    assert sorted(q.tool_use.id for q in questions) == ["e1", "e3"]
    assert str(agent.resume({q.id: "decline" for q in questions})) == "Thanks."
    texts = [r.text for r in agent.messages[2].content]
    assert "declined" in texts[0] and texts[1] == "Echo: hi" and "declined" in texts[2]


def test_http_server_restarted_between_calls(everything_http) -> None:
    """After a restart the server no longer knows the MCP session (server-everything answers
    400 to an unknown session id): a new session is opened and the call goes through."""
    with McpServer.http(everything_http.url, name="everything") as server:
        tools = server.tools()
        for n in range(3):
            call = ToolUse(f"t{n}", "echo", {"message": str(n)})
            agent = Agent(ScriptedModel([[call], "ok"]), tools=tools)
            agent(f"echo {n}")
            result = agent.messages[2].content[0]
            assert (result.status, result.text) == ("success", f"Echo: {n}")
            everything_http.kill()
            everything_http.start()  # the same port, a server that never saw our session
