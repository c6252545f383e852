"""An MCP server's tools as Interlude tools: listing, calls and results, a server lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from interlude import Agent, Image, Json, ToolResult, ToolUse
from interlude.errors import McpServerError
from interlude.mcp import McpServer, McpTool
from interlude.testing import ScriptedModel
from tests.support import wait_for

from .pids import alive, read_pid, wait_gone
from .servers import HOSTILE, HttpServer, ServerLog

PNG = b"\x89PNG\r\n\x1a\n"


def run_calls(tools: list[McpTool], calls: list[ToolUse]) -> list[ToolResult]:
    """One model turn asking for ``calls``; the results the tools gave."""
    agent = Agent(ScriptedModel([calls, "done"]), tools=tools)
    assert agent("go").stop_reason == "end_turn"
    results = agent.messages[2].content
    assert all(isinstance(r, ToolResult) for r in results)
    return results  # type: ignore[return-value]


def check_listing(tools: list[McpTool]) -> None:
    by_name = {t.name: t for t in tools}
    assert {"read_note", "delete_note", "append_note", "add", "pixel", "fail", "book"} <= set(
        by_name
    )
    read = by_name["read_note"]
    assert read.spec.description == "Read a note by name."
    assert read.spec.input_schema["properties"]["name"]["type"] == "string"
    assert read.spec.input_schema["required"] == ["name"]
    assert read.annotations.read_only and not read.annotations.destructive
    assert read.annotations.title == "Read a note"
    assert read.idempotent  # read-only: safe to run again after a crash
    delete = by_name["delete_note"]
    assert delete.annotations.destructive and not delete.annotations.read_only
    assert delete.idempotent and delete.annotations.idempotent  # idempotentHint=True
    append = by_name["append_note"]
    assert not append.annotations.destructive and not append.idempotent
    add = by_name["add"]  # no annotations: the spec's defaults (may destroy, not idempotent)
    assert add.annotations.destructive and not add.idempotent and add.annotations.open_world
    assert add.output_schema is not None and "total" in add.output_schema["properties"]


def check_results(tools: list[McpTool]) -> None:
    text, structured, image, error = run_calls(
        tools,
        [
            ToolUse("t1", "read_note", {"name": "shopping"}),
            ToolUse("t2", "add", {"a": 2, "b": 40}),
            ToolUse("t3", "pixel", {}),
            ToolUse("t4", "fail", {"why": "the disk is full"}),
        ],
    )
    assert (text.status, text.text) == ("success", "note shopping: buy milk")
    assert structured.status == "success"
    assert structured.content == [Json({"total": 42, "terms": [2, 40]})]
    assert image.status == "success"
    [png] = image.content
    assert isinstance(png, Image) and png.media_type == "image/png" and png.data.startswith(PNG)
    assert error.status == "error" and "failed because the disk is full" in error.text


def test_stdio_tools_listed_and_called(
    stdio: Callable[..., McpServer], server_log: ServerLog
) -> None:
    server = stdio()
    assert not server.is_connected  # nothing happens before the first use
    tools = server.tools()
    assert server.is_connected
    check_listing(tools)
    check_results(tools)
    assert server_log.lines() == ["read shopping"]


def test_http_tools_listed_and_called(notes_http: HttpServer) -> None:
    with McpServer.http(notes_http.url, name="notes") as server:
        assert server.name == "notes"
        tools = server.tools()
        check_listing(tools)
        check_results(tools)
    assert not server.is_connected
    assert notes_http.log.lines() == ["read shopping"]


def test_prefix_keeps_two_servers_apart(notes: McpServer) -> None:
    tools = notes.tools(prefix="notes_")
    assert "notes_read_note" in {t.name for t in tools}
    [result] = run_calls(tools, [ToolUse("t1", "notes_read_note", {"name": "x"})])
    assert result.text == "note x: buy milk"


async def test_async_listing_and_run(stdio: Callable[..., McpServer]) -> None:
    server = stdio()
    tools = await server.list_tools()
    agent = Agent(ScriptedModel([[ToolUse("t1", "add", {"a": 1, "b": 1})], "2"]), tools=tools)
    async with agent:
        assert str(await agent.invoke_async("1+1?")) == "2"
        assert agent.messages[2].content[0].content == [Json({"total": 2, "terms": [1, 1]})]
    assert not server.is_connected  # the agent's close closed the connection


def test_stdio_server_killed_mid_session(stdio: Callable[..., McpServer]) -> None:
    server = stdio()
    tools = server.tools()
    [first] = run_calls(tools, [ToolUse("t1", "pid", {})])
    pid = int(first.text)
    os.kill(pid, signal.SIGKILL)
    assert wait_gone(pid), f"process {pid} still runs"

    # The next call finds the server gone: an error result naming it, and the run goes on.
    [lost] = run_calls(tools, [ToolUse("t2", "read_note", {"name": "a"})])
    assert lost.status == "error"
    assert "MCP server 'notes' is not reachable" in lost.text

    # The call after that starts the server again.
    [again] = run_calls(tools, [ToolUse("t3", "pid", {})])
    assert again.status == "success" and int(again.text) != pid


def test_http_server_killed_then_back(http: HttpServer) -> None:
    server = McpServer.http(http.url, name="web-notes")
    try:
        tools = server.tools()
        http.kill()
        [lost] = run_calls(tools, [ToolUse("t1", "read_note", {"name": "a"})])
        assert lost.status == "error" and "MCP server 'web-notes' is not reachable" in lost.text
        http.start()  # the same address again
        [back] = run_calls(tools, [ToolUse("t2", "read_note", {"name": "a"})])
        assert (back.status, back.text) == ("success", "note a: buy milk")
    finally:
        server.close()


def test_agent_close_ends_the_stdio_server(stdio: Callable[..., McpServer]) -> None:
    server = stdio()
    with Agent(ScriptedModel([[ToolUse("t1", "pid", {})], "ok"]), tools=server.tools()) as agent:
        agent("pid?")
        pid = int(agent.messages[2].content[0].text)
        assert alive(pid)
    assert not server.is_connected
    assert wait_gone(pid), f"process {pid} still runs"


def test_unreachable_server_at_listing_raises() -> None:
    server = McpServer.stdio(sys.executable, ["-c", "raise SystemExit(3)"], name="broken")
    with pytest.raises(McpServerError, match="'broken'"):
        server.tools()
    assert not server.is_connected


def test_import_interlude_does_not_import_mcp() -> None:
    code = "import interlude, sys; print([m for m in ('mcp', 'interlude.mcp') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_public_names() -> None:
    import interlude.mcp

    exported = interlude.mcp.__all__
    assert exported == sorted(exported)
    assert all(hasattr(interlude.mcp, n) for n in exported)


def test_timeout_gives_an_error_result(stdio: Callable[..., McpServer]) -> None:
    """Each request is given ``timeout`` seconds: the slow call (an hour) fails at 3 s, the
    quick ones (well within 3 s, even on a busy machine) go through on the same session."""
    tools = stdio(timeout=3).tools()
    slow, quick = run_calls(
        tools,
        [ToolUse("t1", "slow", {"seconds": 3600}), ToolUse("t2", "read_note", {"name": "a"})],
    )
    assert slow.status == "error" and "MCP server 'notes' failed to run 'slow'" in slow.text
    assert quick.text == "note a: buy milk"
    [later] = run_calls(tools, [ToolUse("t3", "read_note", {"name": "b"})])
    assert later.text == "note b: buy milk"


def test_default_names_and_bad_arguments() -> None:
    npx = McpServer.stdio("npx", ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"])
    assert npx.name == "server-filesystem"
    assert McpServer.stdio("python", ["examples/mcp_server.py"]).name == "mcp_server"
    assert McpServer.http("http://127.0.0.1:8000/mcp").name == "127.0.0.1:8000"
    from interlude.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="list of arguments"):
        McpServer.stdio("python", "server.py")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="http"):
        McpServer.http("localhost:8000/mcp")
    with pytest.raises(ConfigurationError, match="protocol"):
        McpServer.stdio("python", protocol="2019")  # type: ignore[arg-type]


def test_agent_close_closes_every_tool_even_after_a_failure() -> None:
    from interlude import ToolSpec

    closed: list[str] = []

    class Held:
        def __init__(self, name: str, fail: bool) -> None:
            self.name, self.fail = name, fail
            self.spec = ToolSpec(name, "holds something open")

        async def run(self, tool_use, context):  # never called here
            raise AssertionError

        async def aclose(self) -> None:
            closed.append(self.name)
            if self.fail:
                raise OSError(f"{self.name} would not close")

    agent = Agent(ScriptedModel([]), tools=[Held("a", True), Held("b", False)])
    with pytest.raises(OSError, match="a would not close"):
        agent.close()
    assert closed == ["a", "b"]


def test_http_server_restarted_between_calls_legacy_session(http: HttpServer) -> None:
    """A handshake-era session the restarted server does not know (the Python SDK answers 404
    "Session not found"): a new session is opened and the call goes through, every time."""
    with McpServer.http(http.url, name="web-notes", protocol="legacy") as server:
        tools = server.tools()
        pids = set()
        for n in range(3):
            [result] = run_calls(tools, [ToolUse(f"t{n}", "pid", {})])
            assert result.status == "success", result.text
            pids.add(int(result.text))
            http.kill()
            http.start()  # the same port, a server that never saw our session
        assert len(pids) == 3


def test_a_server_error_is_not_a_lost_server(tmp_path: Path) -> None:
    """JSON-RPC -32000 is the generic "server error" code (what a server answers to a request
    it refuses, e.g. one too large); the connection goes on and the model reads the error."""
    pid_file = tmp_path / "pid"
    server = McpServer.stdio(
        sys.executable,
        [HOSTILE, "server_error"],
        name="raw",
        env={"HOSTILE_PID_FILE": str(pid_file)},
    )
    with server:
        tools = server.tools()
        pid = read_pid(pid_file)
        first, second = run_calls(
            tools, [ToolUse("t1", "go", {"x": "too big"}), ToolUse("t2", "go", {"x": "1"})]
        )
        assert first.status == "error"
        assert "Request Entity Too Large" in first.text and "not reachable" not in first.text
        assert (second.status, second.text) == ("success", "ok")
        assert server.is_connected and read_pid(pid_file) == pid  # the same process


def test_a_call_cut_by_a_restart_is_not_sent_again(http: HttpServer, server_log: ServerLog) -> None:
    """Only a call the server refused for an unknown session is sent again: one that was
    running when the server restarted may have done its work, so it is that call's error."""

    problems: list[BaseException] = []

    def restart() -> None:  # once the call runs on the server (its body has logged it)
        try:
            wait_for(lambda: "slow 60.0" in server_log.lines(), what="the slow call to run")
            http.kill()
            http.start()
        except BaseException as exc:  # seen by the test, after the call
            problems.append(exc)

    with McpServer.http(http.url, name="web-notes", protocol="legacy") as server:
        tools = server.tools()
        restarter = threading.Thread(target=restart)
        restarter.start()
        [cut] = run_calls(tools, [ToolUse("t1", "slow", {"seconds": 60})])
        restarter.join()
        assert not problems, problems
        assert cut.status == "error" and "web-notes" in cut.text
        [after] = run_calls(tools, [ToolUse("t2", "read_note", {"name": "a"})])
        assert (after.status, after.text) == ("success", "note a: buy milk")
    assert server_log.lines() == ["slow 60.0", "read a"]
