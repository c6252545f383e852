"""The agent's process SIGKILLed in the middle of an MCP tool call: the recovered session asks
a person whether the call ran (the tool has no idempotent hint), it does not call it again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from interlude import Agent
from interlude.mcp import McpServer
from interlude.testing import ScriptedModel

CHILD = str(Path(__file__).with_name("crash_child.py"))
SERVER = str(Path(__file__).with_name("server.py"))


def test_a_call_cut_by_sigkill_is_in_doubt_after_recovery(tmp_path: Path) -> None:
    db, marker = tmp_path / "s.db", tmp_path / "marker"
    child = subprocess.Popen([sys.executable, CHILD, str(db), str(marker), SERVER])
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert child.poll() is None, "the child ended before calling the tool"
            assert time.monotonic() < deadline, "the child never reached the tool call"
            time.sleep(0.05)
        time.sleep(1.0)  # the call's "running" checkpoint is stored before the body starts
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    notes = McpServer.stdio(sys.executable, [SERVER], name="notes")
    with Agent(
        ScriptedModel(["recovered"]),
        tools=notes.tools(),
        session=f"sqlite:///{db}",
        session_id="s",
    ) as agent:
        assert agent.needs_recovery
        result = agent.recover()
        assert result.stop_reason == "interrupt"
        [question] = result.interrupts
        assert (question.name, question.source) == ("in_doubt", "in_doubt")
        assert question.tool_use is not None and question.tool_use.name == "slow"
        assert str(agent.resume({question.id: "fail"})) == "recovered"
