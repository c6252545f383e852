"""An MCP task nobody will follow any more is cancelled on the server (``tasks/cancel``): the
pause that holds it is discarded (in the process that asked, or any other on its session; a
graph's pause too), or the run waiting on it is cancelled (``agent.cancel()``). A task answered
as usual is never cancelled, and a server without ``tasks/cancel`` is fine: the discard stands.

The server is tests/mcp/cancel_task_server.py (examples/mcp_task_server.py, on the official
SDK's extension API, with ``tasks/cancel``), over streamable HTTP in its own process; it logs
each cancel it receives."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from interlude import Agent, ToolUse
from interlude.mcp import McpServer
from interlude.multiagent import Graph
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel

from .servers import HttpServer, ServerLog

CANCEL_SERVER = str(Path(__file__).with_name("cancel_task_server.py"))
BOOK = ToolUse("t1", "book", {"show": "Hamlet"})


@pytest.fixture(scope="module")
def _cancelling(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    log = ServerLog(tmp_path_factory.mktemp("cancel-tasks") / "server.log")
    server = HttpServer([sys.executable, CANCEL_SERVER, "{port}"], log).start()
    yield server
    server.kill()


@pytest.fixture
def cancelling(_cancelling: HttpServer) -> HttpServer:
    """The task server with ``tasks/cancel``, its log emptied for this test."""
    _cancelling.log.clear()
    return _cancelling


def _cancels(log: ServerLog) -> list[str]:
    return [line for line in log.lines() if line.startswith("tasks/cancel")]


def test_a_discarded_pause_cancels_its_task_from_another_process(
    cancelling: HttpServer, tmp_path: Path
) -> None:
    db = str(tmp_path / "s.db")
    asking = McpServer.http(cancelling.url, name="tasks")
    agent = Agent(
        ScriptedModel([[BOOK]]), tools=asking.tools(), session=SQLiteStore(db), session_id="s-1"
    )
    assert agent("Two seats for Hamlet").stop_reason == "interrupt"  # the task asks how many
    asking.close()
    assert "tasks/get input_required" in cancelling.log.lines()
    assert _cancels(cancelling.log) == []  # a pause keeps its task

    # Another process (another connection, an agent built afresh on the session) discards.
    elsewhere = McpServer.http(cancelling.url, name="tasks")
    later = Agent(
        ScriptedModel([]), tools=elsewhere.tools(), session=SQLiteStore(db), session_id="s-1"
    )
    assert later.is_paused
    later.discard_pause()
    elsewhere.close()
    assert not later.is_paused
    assert later.messages[-1].content[0].text.startswith("cancelled: the pause was discarded")
    assert _cancels(cancelling.log) == ["tasks/cancel input_required"]
    lines = cancelling.log.lines()
    assert "tasks/update" not in lines and not any(x.startswith("book done") for x in lines)


def test_a_cancelled_run_waiting_on_a_task_cancels_it(cancelling: HttpServer) -> None:
    tasks = McpServer.http(cancelling.url, name="tasks")
    agent = Agent(ScriptedModel([[ToolUse("s1", "stall", {})]]), tools=tasks.tools())

    async def main() -> str:
        run = asyncio.ensure_future(agent.invoke_async("stall"))
        while "tasks/get working" not in cancelling.log.lines():  # it polls the task now
            assert not run.done(), run
            await asyncio.sleep(0.02)
        agent.cancel()
        return (await run).stop_reason

    assert asyncio.run(main()) == "cancelled"
    tasks.close()
    assert _cancels(cancelling.log) == ["tasks/cancel working"]
    assert agent.messages[-1].content[0].text.startswith("cancelled")  # the call's result


def test_a_discarded_graph_pause_cancels_its_nodes_task(
    cancelling: HttpServer, tmp_path: Path
) -> None:
    tasks = McpServer.http(cancelling.url, name="tasks")
    graph = Graph(
        {
            "plan": Agent(ScriptedModel(["A night at the theatre."]), name="plan"),
            "book": Agent(ScriptedModel([[BOOK]]), tools=tasks.tools(), name="book"),
        },
        [("plan", "book")],
        entry="plan",
        session=SQLiteStore(str(tmp_path / "s.db")),
        session_id="g-1",
    )
    assert graph("An evening out").stop_reason == "interrupt"
    assert _cancels(cancelling.log) == []
    graph.discard_pause()  # every started node's pause goes, and with it the node's task
    tasks.close()
    assert not graph.is_paused
    assert _cancels(cancelling.log) == ["tasks/cancel input_required"]


def test_an_answered_task_is_not_cancelled(cancelling: HttpServer) -> None:
    tasks = McpServer.http(cancelling.url, name="tasks")
    agent = Agent(ScriptedModel([[BOOK], "Enjoy the show."]), tools=tasks.tools())
    [question] = agent("Two seats for Hamlet").interrupts
    assert str(agent.resume({question.id: {"n": 2}})) == "Enjoy the show."
    tasks.close()
    lines = cancelling.log.lines()
    assert "book done Hamlet 2" in lines and lines[-1] == "tasks/result"
    assert _cancels(cancelling.log) == []


def test_a_server_without_tasks_cancel_is_fine(
    tasks_server: HttpServer, caplog: pytest.LogCaptureFixture
) -> None:
    tasks = McpServer.http(tasks_server.url, name="tasks")  # the example: no tasks/cancel
    agent = Agent(ScriptedModel([[BOOK]]), tools=tasks.tools())
    assert agent("Two seats for Hamlet").stop_reason == "interrupt"
    with caplog.at_level(logging.WARNING, logger="interlude.mcp"):
        agent.discard_pause()
    tasks.close()
    assert not agent.is_paused  # the discard stands
    [record] = [r for r in caplog.records if r.name == "interlude.mcp"]
    assert record.getMessage().startswith("could not cancel task ")
    assert "its pause was discarded" in record.getMessage()
