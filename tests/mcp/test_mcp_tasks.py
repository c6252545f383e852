"""MCP Tasks: a tool call the server runs as a task (examples/mcp_task_server.py, built on the
official SDK's extension API, over streamable HTTP in its own process).

What the task asks pauses the run as an interrupt; the answer goes back with ``tasks/update``
from another process; long tasks are polled; a process killed right after ``tasks/update``
recovers without the tool running twice; a stale or duplicate answer is refused."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from interlude import Agent, ToolCallProgress, ToolUse
from interlude.errors import AlreadyAnsweredError, AnswerValidationError, StateIntegrityError
from interlude.mcp import McpServer
from interlude.testing import ScriptedModel
from tests.support import wait_for
from tests.support.processes import ROOT

from .servers import HttpServer, ServerLog
from .task_agent import build

AGENT = [sys.executable, "-m", "tests.mcp.task_agent"]
"""The answering process: it builds the agent of tests/mcp/task_agent.py, as the tests do."""


BOOK = ToolUse("t1", "book", {"show": "Hamlet"})


def pause(db: Path, url: str) -> Any:
    """Run the agent until the task asks how many seats; the agent's process state is closed."""
    agent, server = build(ScriptedModel([[BOOK], "unused"]), str(db), url)
    with agent:
        paused = agent("Two seats for Hamlet")
        assert paused.stop_reason == "interrupt"
        [question] = paused.interrupts
    server.close()
    return question


def answer_elsewhere(db: Path, url: str, answers: dict[str, Any]) -> list[str]:
    done = subprocess.run(
        [*AGENT, str(db), url, json.dumps(answers)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def test_input_required_is_an_interrupt_answered_in_another_process(
    tasks_server: HttpServer, tmp_path: Path
) -> None:
    server = tasks_server
    db = tmp_path / "s.db"
    question = pause(db, server.url)
    assert question.source == "tool_call" and question.tool_use == BOOK
    assert question.name.startswith("elicitation:")
    assert question.reason == {"server": "tasks", "message": "How many seats for Hamlet?"}
    form, refusals = question.response_schema["anyOf"]
    assert form["properties"]["n"] == {"type": "integer"}
    assert refusals == {"enum": ["decline", "cancel"]}
    assert server.log.lines()[:2] == ["tools/call book -> task", "book start Hamlet"]
    assert "tasks/get input_required" in server.log.lines()
    assert "tasks/update" not in server.log.lines()

    out = answer_elsewhere(db, server.url, {question.id: {"n": 2}})
    assert out == ["Enjoy the show.", json.dumps("booked 2 seats for Hamlet")]
    done = server.log.lines()
    assert done.count("tools/call book -> task") == 1  # the tool was called once
    assert done.count("book start Hamlet") == 1  # and ran once
    assert done.count("tasks/update") == 1
    assert done.count("book done Hamlet 2") == 1
    assert done[-1] == "tasks/result"


async def test_a_long_task_is_polled_not_held_open(tasks_server: HttpServer) -> None:
    server = tasks_server
    tasks = McpServer.http(server.url, name="tasks")
    crunch = ToolUse("c1", "crunch", {"seconds": 2.0})
    agent = Agent(ScriptedModel([[crunch], "Crunched."]), tools=await tasks.list_tools())
    started = time.monotonic()
    events = [e async for e in agent.stream_async("crunch")]
    took = time.monotonic() - started
    await tasks.aclose()
    assert agent.messages[2].content[0].text == "crunched for 2.0 s"
    assert took >= 2.0
    done = server.log.lines()
    polls = [line for line in done if line.startswith("tasks/get")]
    # tools/call came back at once with the task; the wait was short tasks/get requests, each
    # answered at once while the task worked (how many fit in its 2 s depends on how fast the
    # machine answers them), the last one seeing it done: not one request held open
    assert done[0] == "tools/call book -> task".replace("book", "crunch")
    assert polls[-1] == "tasks/get completed" and set(polls[:-1]) == {"tasks/get working"}
    assert 2 <= len(polls) <= 20, polls  # backoff: from 0.1 s (the server's pollInterval) up
    assert done.count("crunch start") == 1 and done[-1] == "tasks/result"
    progress = [e for e in events if isinstance(e, ToolCallProgress)]
    assert progress and all(e.message.endswith("%") for e in progress)  # its status messages
    assert [e.progress for e in progress] == list(range(1, len(progress) + 1))


def test_two_rounds_of_questions(tasks_server: HttpServer) -> None:
    server = tasks_server
    tasks = McpServer.http(server.url, name="tasks")
    call = ToolUse("v1", "survey", {"topic": "music"})
    agent = Agent(ScriptedModel([[call], "Thanks."]), tools=tasks.tools())
    answers = {
        "Your name?": {"name": "Ana"},
        "Your age?": {"age": 40},
        "Favourite colour?": {"c": "red"},
    }
    asked: list[str] = []
    result = agent("survey")
    while result.stop_reason == "interrupt":
        [question] = result.interrupts  # one question per pause, in the request keys' order
        asked.append(question.reason["message"])
        result = agent.resume({question.id: answers[question.reason["message"]]})
    tasks.close()
    assert asked == ["Your age?", "Your name?", "Favourite colour?"]
    assert agent.messages[2].content[0].text == "Ana (40) likes red"
    done = server.log.lines()
    assert done.count("survey start music") == 1 and done.count("tasks/update") == 2


def test_sigkill_right_after_tasks_update_then_recovery(
    task_http: Callable[..., HttpServer], server_log: ServerLog, tmp_path: Path
) -> None:
    """The task works 3 s more after its answer: the answering process, killed as soon as the
    server took the answer, is polling then (not yet given the result)."""
    marker = tmp_path / "updated"
    server = task_http(MCP_TEST_UPDATE_MARKER=str(marker), MCP_TEST_AFTER_UPDATE="3")
    db = tmp_path / "s.db"
    question = pause(db, server.url)
    child = subprocess.Popen(
        [*AGENT, str(db), server.url, json.dumps({question.id: {"n": 3}})],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:  # the server took the answer: the child is polling now
        wait_for(marker.exists, what="tasks/update from the answering process", process=child)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL  # killed while it polled, not ended by itself
    assert "book done Hamlet 3" not in server_log.lines()  # killed before the result came

    agent, tasks = build(ScriptedModel(["Recovered."]), str(db), server.url)
    with agent:
        assert agent.needs_recovery
        recovered = agent.recover()
        # the call has no idempotent hint: a person decides; "rerun" follows the task again
        [doubt] = recovered.interrupts
        assert doubt.name == "in_doubt"
        assert str(agent.resume({doubt.id: "rerun"})) == "Recovered."
        assert agent.messages[2].content[0].text == "booked 3 seats for Hamlet"
    tasks.close()
    lines = server_log.lines()
    assert lines.count("tools/call book -> task") == 1
    assert lines.count("book start Hamlet") == 1
    assert lines.count("tasks/update") == 1  # the re-run saw the task working: not sent again
    assert lines.count("book done Hamlet 3") == 1


def test_an_expired_task_fails_clearly(
    task_http: Callable[..., HttpServer], server_log: ServerLog, tmp_path: Path
) -> None:
    server = task_http(MCP_TEST_TASK_TTL="1500")
    db = tmp_path / "s.db"
    question = pause(db, server.url)
    time.sleep(1.6)  # not a wait for something to happen: the task's 1.5 s of life run out
    agent, tasks = build(ScriptedModel(["Sorry."]), str(db), server.url)
    with agent:
        assert str(agent.resume({question.id: {"n": 2}})) == "Sorry."
        result = agent.messages[2].content[0]
    tasks.close()
    assert result.status == "error"
    assert "no longer has task" in result.text and "expired" in result.text
    lines = server_log.lines()
    assert "tasks/update" not in lines and "book done Hamlet 2" not in lines


def test_a_forged_task_id_is_refused(tasks_server: HttpServer) -> None:
    server = tasks_server
    key = b"k" * 32
    tasks = McpServer.http(server.url, name="tasks")
    agent = Agent(ScriptedModel([[BOOK]]), tools=tasks.tools(), signing_key=key)
    assert agent("book").stop_reason == "interrupt"
    state = agent.export_state()
    forged = json.loads(json.dumps(state))
    record = forged["pause"]["step"]["calls"][0]["checkpoint"]["mcp_task"]
    assert record["server"] == "tasks" and len(record["task"]) == 32  # kept with the call
    record["task"] = "0" * 32  # point the answer at another task
    target = Agent(ScriptedModel(["unused"]), tools=tasks.tools(), signing_key=key)
    with pytest.raises(StateIntegrityError):
        target.import_state(forged)
    assert not target.is_paused
    tasks.close()


def test_duplicate_and_invalid_answers_are_refused(
    tasks_server: HttpServer, tmp_path: Path
) -> None:
    server = tasks_server
    db = tmp_path / "s.db"
    question = pause(db, server.url)

    agent, tasks = build(ScriptedModel(["Booked."]), str(db), server.url)
    with agent:
        # an answer that does not fit the requested schema: refused, nothing changed
        before = agent.export_state()
        with pytest.raises(AnswerValidationError):
            agent.resume({question.id: {"n": "two"}})
        assert agent.export_state() == before
        assert str(agent.resume({question.id: {"n": 2}})) == "Booked."
        # the same answer again: answered already (the first answer wins), nothing changes
        after = agent.export_state()
        with pytest.raises(AlreadyAnsweredError):
            agent.resume({question.id: {"n": 2}})
        assert agent.export_state() == after
    tasks.close()
    # and an answer replayed to the server itself: the task is no longer waiting
    done = server.log.lines()
    assert done.count("tasks/update") == 1 and done.count("book done Hamlet 2") == 1


def test_the_elicitation_callback_answers_a_task_without_a_pause(
    tasks_server: HttpServer,
) -> None:
    server = tasks_server
    seen: list[str] = []

    def seats(question: Any) -> Any:
        seen.append(question.message)
        return {"n": 4}

    tasks = McpServer.http(server.url, name="tasks", elicitation=seats)
    with Agent(ScriptedModel([[BOOK], "Booked."]), tools=tasks.tools()) as agent:
        assert str(agent("Four seats")) == "Booked."  # no pause
        assert agent.messages[2].content[0].text == "booked 4 seats for Hamlet"
    tasks.close()
    assert seen == ["How many seats for Hamlet?"]
    assert server.log.lines().count("tasks/update") == 1


def test_a_copy_of_the_pause_answered_twice_runs_the_task_once(
    tasks_server: HttpServer,
) -> None:
    """Two copies of one paused state (export_state, no shared store to stop the second): the
    second resume finds the task no longer waiting and does not send its answers again."""
    server = tasks_server
    tasks = McpServer.http(server.url, name="tasks")
    first = Agent(ScriptedModel([[BOOK], "Booked."]), tools=tasks.tools())
    [question] = first("book").interrupts
    second = Agent(ScriptedModel(["Booked too."]), tools=tasks.tools())
    second.import_state(first.export_state())
    assert str(first.resume({question.id: {"n": 2}})) == "Booked."
    assert str(second.resume({question.id: {"n": 5}})) == "Booked too."
    tasks.close()
    # the copy's answer (5 seats) never reached the server: it got the task's one result
    assert second.messages[2].content[0].text == "booked 2 seats for Hamlet"
    done = server.log.lines()
    assert done.count("tasks/update") == 1 and done.count("book start Hamlet") == 1


async def test_a_task_that_asks_to_be_polled_in_eleven_days_ends_at_the_task_timeout(
    task_http: Callable[..., HttpServer], server_log: ServerLog
) -> None:
    """A lying server: the task stays working and asks for a pollInterval of 1e9 ms (11.6
    days). The wait is capped by the task's deadline (task_timeout), so the call ends within
    seconds with an error result (before: one tasks/get, then asleep for 11.6 days)."""
    server = task_http(MCP_TEST_POLL_INTERVAL="1e9")
    tasks = McpServer.http(server.url, name="tasks", task_timeout=1.5)
    stall = ToolUse("s1", "stall", {})
    agent = Agent(ScriptedModel([[stall], "Gave up."]), tools=await tasks.list_tools())
    started = time.monotonic()
    result = await asyncio.wait_for(agent.invoke_async("stall"), 30)
    took = time.monotonic() - started
    await tasks.aclose()
    assert str(result) == "Gave up."
    [outcome] = agent.messages[2].content
    assert outcome.status == "error"
    assert outcome.text.startswith("gave up on task ")
    assert "of 'stall' on MCP server 'tasks' after 1.5 s (task_timeout): it was still " in (
        outcome.text
    )
    # the test server has no tasks/cancel: the model is told the task may still run
    assert outcome.text.endswith(
        "it may still be running on the server, and its result is not fetched"
    )
    assert 1.5 <= took < 10, took
    lines = server_log.lines()
    assert lines.count("stall start") == 1
    assert 2 <= lines.count("tasks/get working") <= 3, lines  # not one, then a nap of days


def test_task_timeout_must_be_positive() -> None:
    from interlude.errors import ConfigurationError

    for bad in (0, -1.0):
        with pytest.raises(ConfigurationError, match="task_timeout must be"):
            McpServer.http("http://127.0.0.1:1/mcp", task_timeout=bad)
