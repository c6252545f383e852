"""An agent for the crash-recovery test: `boom` kills its own process when it runs."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from interlude import Agent, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel


def build(db: str, log: str, turns: list[Any], lease: float = 600.0) -> Agent:
    @tool
    def record(item: str) -> str:
        """Record an item.

        Args:
            item: What to record.
        """
        with Path(log).open("a") as f:
            f.write(f"{item}\n")
        return f"recorded {item}"

    @tool
    def boom() -> str:
        """Kill this process."""
        os.kill(os.getpid(), signal.SIGKILL)
        return "unreachable"

    def approve_boom(event: BeforeToolCallEvent) -> None:
        if event.tool_use.name == "boom":
            event.interrupt("approve")

    agent = Agent(
        ScriptedModel(turns),
        tools=[record, boom],
        session=SQLiteStore(db),
        session_id="crash",
        session_lease=lease,
    )
    agent.hooks.add_callback(BeforeToolCallEvent, approve_boom)
    return agent
