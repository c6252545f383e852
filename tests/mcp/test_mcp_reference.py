"""Against the official reference server @modelcontextprotocol/server-everything (npm; built on
the TypeScript SDK, so it speaks the handshake-era protocol), over streamable HTTP (one node
process for the session, an MCP session of their own for each connection) and over stdio."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from interlude import Agent, ToolCallFinished, ToolCallProgress, ToolUse
from interlude.mcp import Elicitation, McpServer
from interlude.testing import ScriptedModel

from .servers import HttpServer

ASK = ToolUse("e1", "trigger-elicitation-request", {})
ECHO = ToolUse("e2", "echo", {"message": "hi"})
URL = "https://auth.example.com/authorize"


@pytest.mark.parametrize("executor", ["concurrent", "sequential"])
def test_two_calls_at_once_one_asks_the_person(
    everything_stdio: Callable[..., McpServer], executor: str
) -> None:
    """The server's question reaches the person even though another call to the same server
    is in flight (the handshake-era protocol does not say which call asked). Over stdio: the
    server's own process."""
    agent = Agent(
        ScriptedModel([[ASK, ECHO], "Thanks."]),
        tools=everything_stdio().tools(),
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


def test_http_server_restarted_between_calls(everything_http: HttpServer) -> None:
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


def test_a_page_to_visit_first_is_a_question(everything: Callable[..., McpServer]) -> None:
    """-32042 (the user must first visit a page, here a prerequisite sign-in) is a URL-mode
    question; once the user has been there, the call is sent again."""
    call = ToolUse("u1", "trigger-url-elicitation", {"url": URL, "errorPath": True})
    agent = Agent(ScriptedModel([[call], "Signed in."]), tools=everything().tools())
    [first] = agent("Sign me in").interrupts
    assert first.tool_use == call
    assert first.reason == {
        "server": "everything",
        "message": "Open this link to satisfy the prerequisite, then retry the request.",
        "url": "https://modelcontextprotocol.io",
    }
    assert first.response_schema == {"enum": ["accept", "decline", "cancel"]}
    result = agent.resume({first.id: "accept"})
    while result.stop_reason == "interrupt":  # the server then sends the user to the page itself
        [then] = result.interrupts
        assert then.reason["url"] == URL
        result = agent.resume({then.id: "accept"})
    assert str(result) == "Signed in."
    [done] = agent.messages[2].content
    assert done.status == "success" and "User completed the URL elicitation flow" in done.text


def test_a_page_the_user_will_not_visit(everything: Callable[..., McpServer]) -> None:
    call = ToolUse("u1", "trigger-url-elicitation", {"url": URL, "errorPath": True})
    server = everything()
    agent = Agent(ScriptedModel([[call], "Not signed in."]), tools=server.tools())
    [first] = agent("Sign me in").interrupts
    server.close()  # as if answered in another process: a server that asks for the page again
    agent.resume({first.id: "decline"})
    [result] = agent.messages[2].content
    assert result.status == "error"
    assert result.text == (
        "MCP server 'everything' needs the user to visit https://modelcontextprotocol.io before "
        "'trigger-url-elicitation' can run; the user answered 'decline'"
    )


async def test_progress_notifications_are_stream_events(
    everything: Callable[..., McpServer],
) -> None:
    """Calls ask for progress (a progress token); the server's notifications reach the run's
    stream as ToolCallProgress events, before the call's result."""
    call = ToolUse("p1", "trigger-long-running-operation", {"duration": 0.6, "steps": 3})
    server = everything()
    agent = Agent(ScriptedModel([[call], "Done."]), tools=await server.list_tools())
    events = [e async for e in agent.stream_async("Run the long operation")]
    progress = [e for e in events if isinstance(e, ToolCallProgress)]
    assert [(e.tool_use, e.progress, e.total) for e in progress] == [
        (call, 1, 3),
        (call, 2, 3),
        (call, 3, 3),
    ]
    finished = next(i for i, e in enumerate(events) if isinstance(e, ToolCallFinished))
    assert events.index(progress[-1]) < finished
    assert agent.messages[2].content[0].text.startswith("Long running operation completed.")


def test_a_request_too_large_is_that_call_s_error(everything: Callable[..., McpServer]) -> None:
    """server-everything refuses a 5 MB argument with HTTP 413 and JSON-RPC -32000: the call's
    error result says so, and the session stays open (before: "not reachable", and the
    session was dropped)."""
    with everything() as server:
        tools = server.tools()
        big = ToolUse("b1", "echo", {"message": "x" * 5_000_000})
        agent = Agent(ScriptedModel([[big], "Too big."]), tools=tools)
        agent("Echo this")
        [result] = agent.messages[2].content
        assert result.status == "error"
        assert result.text.startswith("MCP server 'everything' failed to run 'echo': ")
        assert "Payload Too Large" in result.text
        assert server.is_connected
        agent = Agent(ScriptedModel([[ECHO], "ok"]), tools=tools)
        agent("Echo hi")
        assert agent.messages[2].content[0].text == "Echo: hi"


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
def test_the_python_reference_time_server(
    time_server: Callable[..., McpServer], protocol: str
) -> None:
    """mcp-server-time (the official Python SDK's reference server, from PyPI) under either
    protocol, two calls at once."""
    calls = [
        ToolUse("t1", "get_current_time", {"timezone": "Europe/Lisbon"}),
        ToolUse(
            "t2",
            "convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        ),
    ]
    tools = time_server(protocol=protocol).tools()
    assert {t.name for t in tools} == {"get_current_time", "convert_time"}
    assert all(t.annotations.read_only for t in tools)
    agent = Agent(ScriptedModel([calls, "It is time."]), tools=tools)
    assert str(agent("What time is it?")) == "It is time."
    now, converted = agent.messages[2].content
    assert now.status == "success" and now.content[0].value["timezone"] == "Europe/Lisbon"
    assert converted.status == "success"
    assert converted.content[0].value["target"]["datetime"].endswith("21:00:00+09:00")


RESEARCH = "simulate-research-query"
"""server-everything's task tool: listed with execution.taskSupport "required" (2025-11-25)."""


async def test_a_tool_that_requires_a_task_is_called_as_one(
    everything: Callable[..., McpServer],
) -> None:
    """The call asks for a task (``task`` in the tools/call params), polls tasks/get (its status
    messages are progress events) and fetches tasks/result (before: every call failed with
    -32601 "requires task augmentation")."""
    server = everything()
    tools = {t.name: t for t in await server.list_tools()}
    call = ToolUse("r1", RESEARCH, {"topic": "tides"})
    agent = Agent(ScriptedModel([[call], "Researched."]), tools=list(tools.values()))
    events = [e async for e in agent.stream_async("Research the tides")]
    [result] = agent.messages[2].content
    assert result.status == "success", result.text
    assert result.text.startswith("# Research Report: tides")
    assert "Stage 4: Generating report" in result.text
    stages = [e.message for e in events if isinstance(e, ToolCallProgress)]
    assert stages and all(m is not None and m.endswith("...") for m in stages), stages
    assert tools[RESEARCH].as_task and not tools["echo"].as_task


def test_a_task_s_question_pauses_the_run(everything: Callable[..., McpServer]) -> None:
    """A 2025-11-25 task asks on tasks/result (the question carries the task's id): it is an
    interrupt; at the pause the task is cancelled, and on resume the tool is called again, the
    new task asks again and gets the stored answer."""
    call = ToolUse("r2", RESEARCH, {"topic": "python", "ambiguous": True})
    agent = Agent(ScriptedModel([[call], "Researched."]), tools=everything().tools())
    paused = agent("Research python")
    [question] = paused.interrupts
    assert question.tool_use == call and question.name.startswith("elicitation:")
    assert question.reason["server"] == "everything"
    assert question.reason["message"].startswith('The research query "python" could have')
    assert str(agent.resume({question.id: {"interpretation": "snake"}})) == "Researched."
    [result] = agent.messages[2].content
    assert result.status == "success", result.text
    assert result.text.startswith("# Research Report: python (snake)")


def test_the_elicitation_callback_answers_a_task_s_question(
    everything: Callable[..., McpServer],
) -> None:
    asked: list[str] = []

    def clarify(question: Elicitation) -> object:
        asked.append(question.message)
        return {"interpretation": "comedy"}

    call = ToolUse("r3", RESEARCH, {"topic": "python", "ambiguous": True})
    server = everything(elicitation=clarify)
    agent = Agent(ScriptedModel([[call], "Researched."]), tools=server.tools())
    assert str(agent("Research python")) == "Researched."  # no pause
    assert len(asked) == 1 and asked[0].startswith('The research query "python"')
    assert agent.messages[2].content[0].text.startswith("# Research Report: python (comedy)")


def test_without_task_support_a_tool_that_requires_a_task_is_left_out(
    everything: Callable[..., McpServer], caplog: pytest.LogCaptureFixture
) -> None:
    """tasks=False: the model is never offered a tool it could not call (before: the tool was
    offered, and every call of it failed)."""
    with caplog.at_level(logging.WARNING, logger="interlude.mcp"):
        names = [t.name for t in everything(tasks=False).tools()]
    assert RESEARCH not in names and "echo" in names
    [warning] = [r for r in caplog.records if r.name == "interlude.mcp"]
    assert warning.levelno == logging.WARNING
    assert warning.getMessage() == (
        "MCP server 'everything' lists 'simulate-research-query', which runs only as a task "
        "(execution.taskSupport 'required'), but task support is off (McpServer(tasks=False)): "
        "the tool is left out"
    )
