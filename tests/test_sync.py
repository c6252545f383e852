"""The sync entry points: Ctrl-C leaves a valid conversation; calls work inside a running loop."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

from interlude import Agent, ToolUse, tool
from interlude.testing import ScriptedModel


def test_ctrl_c_during_a_sync_run_repairs_the_conversation_then_raises() -> None:
    code = textwrap.dedent(
        """
        import asyncio, os, signal
        from interlude import Agent, ToolUse, tool
        from interlude.testing import ScriptedModel

        @tool
        async def slow() -> str:
            '''Take a while: Ctrl-C comes while it runs (sent by itself, so always then).'''
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.sleep(3600)
            return "late"

        agent = Agent(ScriptedModel([[ToolUse("t1", "slow", {})], "after"]), tools=[slow])
        try:
            agent("go")
        except KeyboardInterrupt:
            last = agent.messages[-1].content[0]
            print([m.role for m in agent.messages], last.status, last.text)
            print(str(agent("next")))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    lines = out.stdout.splitlines()
    assert lines[0].startswith("['user', 'assistant', 'user'] error cancelled"), out.stderr
    assert "may have had effects" in lines[0]  # it had started: the model is told so
    assert lines[1] == "after"  # the agent takes a new prompt


async def test_sync_call_inside_a_running_loop_runs_on_a_helper_thread() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    agent = Agent(ScriptedModel([[ToolUse("t1", "add", {"a": 1, "b": 2})], "3"]), tools=[add])
    assert str(agent("sum")) == "3"  # a sync call from inside this test's event loop
    assert asyncio.get_running_loop().is_running()
