"""The agent's process SIGKILLed in the middle of an MCP tool call: the recovered session asks
a person whether the call ran (the tool has no idempotent hint), it does not call it again."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from interlude import Agent
from interlude.mcp import McpServer
from interlude.testing import ScriptedModel
from tests.support import wait_for

from .servers import SERVER, ServerLog

CHILD = str(Path(__file__).with_name("crash_child.py"))


def test_a_call_cut_by_sigkill_is_in_doubt_after_recovery(tmp_path: Path) -> None:
    db, log = tmp_path / "s.db", ServerLog(tmp_path / "server.log")
    child = subprocess.Popen([sys.executable, CHILD, str(db), SERVER, str(log.path)])
    try:  # the call's "running" checkpoint is stored before the call is sent to the server
        wait_for(lambda: log.lines() == ["slow 60.0"], what="the tool call to run", process=child)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL  # killed in the call, not ended by itself
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
