"""Servers that misbehave: they hang at the handshake, or the user presses Ctrl-C meanwhile."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from interlude.errors import McpServerError
from interlude.mcp import McpServer
from tests.support import wait_for

from .pids import read_pid, wait_gone
from .servers import HOSTILE


def test_a_server_that_never_finishes_the_handshake_is_given_up(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    server = McpServer.stdio(
        sys.executable,
        [HOSTILE, "hang_init"],
        name="mute",
        env={"HOSTILE_PID_FILE": str(pid_file)},
        connect_timeout=1.0,
    )
    started = time.monotonic()
    with pytest.raises(McpServerError, match="'mute' did not finish connecting within 1 s"):
        server.tools()
    assert time.monotonic() - started < 15
    assert wait_gone(read_pid(pid_file))  # the hung process was stopped, not left behind
    assert not server.is_connected
    server.close()


def test_the_default_connect_timeout_is_bounded() -> None:
    server = McpServer.stdio(sys.executable, [HOSTILE, "ok"])
    assert server.connect_timeout == 60.0


def test_ctrl_c_while_connecting_stops_the_server_process(tmp_path: Path) -> None:
    pid_file, received = tmp_path / "pid", tmp_path / "received.jsonl"
    script = textwrap.dedent(
        f"""
        import sys
        from interlude.mcp import McpServer
        env = {{"HOSTILE_PID_FILE": {str(pid_file)!r}, "HOSTILE_LOG": {str(received)!r}}}
        server = McpServer.stdio(sys.executable, [{HOSTILE!r}, "hang_init"], env=env)
        try:
            server.tools()
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            raise
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )

    def connecting() -> bool:  # the server has the handshake, which it never answers
        lines = received.read_text().splitlines() if received.exists() else []
        return any(json.loads(line).get("method") == "initialize" for line in lines)

    try:
        server_pid = read_pid(pid_file)
        wait_for(connecting, what="the handshake to reach the server", process=child)
        child.send_signal(signal.SIGINT)
        out, _ = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert "interrupted" in out
    # before: the hung server was left running (orphaned) after the process had exited
    assert wait_gone(server_pid), "the server process outlived the interrupted process"


def test_a_50_mb_result_is_cut_before_the_model_sees_it() -> None:
    from interlude import Agent, Text, ToolUse
    from interlude.testing import ScriptedModel

    server = McpServer.stdio(sys.executable, [HOSTILE, "huge"], name="flood", max_output=1000)
    call = ToolUse("c1", "go", {"x": "1"})
    with Agent(ScriptedModel([[call], "done"]), tools=server.tools()) as agent:
        assert str(agent("go")) == "done"
        [result] = agent.messages[2].content
    [block] = result.content
    assert isinstance(block, Text)
    # before: all 52,428,800 characters went into the conversation (and the session)
    assert block.text.startswith("x" * 1000 + "\n[52427800 more characters cut")
    assert len(block.text) < 1200
    assert McpServer.stdio(sys.executable, [HOSTILE, "ok"]).max_output == 200_000
