"""The calling side as its own process: a lead agent (session in a SQLite file) whose tool is a
remote agent served by another process.
``python -m tests.a2a.caller <db> <url> start|answer|recover`` prints the result as JSON.
With ``A2A_CALLER_CRASH=1`` the process SIGKILLs itself once the remote reply is in (the answer
applied remotely), before the lead records the tool's result."""

from __future__ import annotations

import json
import os
import signal
import sys

from interlude import Agent, ToolContext, ToolResult, ToolUse
from interlude.a2a import RemoteAgent, RemoteAgentTool
from interlude.sessions import open_store
from interlude.testing import ScriptedModel

from .wire import TOKEN


class DiesAfterTheRemoteReplied:
    """The remote agent's tool, and a SIGKILL (with ``A2A_CALLER_CRASH=1``) once the remote
    reply is in, before the tool's result is handed back (and so before it is recorded)."""

    def __init__(self, inner: RemoteAgentTool) -> None:
        self.inner = inner
        self.name = inner.name
        self.spec = inner.spec
        self.idempotent = inner.idempotent

    async def run(self, tool_use: ToolUse, context: ToolContext) -> ToolResult:
        result = await self.inner.run(tool_use, context)
        if os.environ.get("A2A_CALLER_CRASH") == "1":
            os.kill(os.getpid(), signal.SIGKILL)
        return result


def main(db: str, url: str, phase: str) -> None:
    model = ScriptedModel(
        [[ToolUse("t1", "ops", {"prompt": "Remove the old log"})], "Ops removed it."],
        resumable=True,
    )
    tool = DiesAfterTheRemoteReplied(RemoteAgent(url, token=TOKEN).as_tool("ops"))
    lead = Agent(
        model,
        tools=[tool],
        session=open_store(db),
        session_id="lead-1",
        name="lead",
    )
    if phase == "start":
        result = lead("Free some disk space")
    elif phase == "answer":
        [question] = lead.interrupts
        result = lead.resume({question.id: True}, by="ana")
    else:
        result = lead.recover()
    print(
        json.dumps(
            {
                "stop": result.stop_reason,
                "text": str(result),
                "questions": [q.id for q in result.interrupts],
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:4])
