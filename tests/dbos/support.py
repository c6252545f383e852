"""Helpers of the DBOS tests: a prompt for the test agents, waiting for a pause."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from interlude.sessions import PendingInterrupt


def prompt(*calls: tuple[str, dict[str, Any]], hold: str | None = None) -> str:
    return json.dumps({"calls": [list(c) for c in calls], "hold": hold})


def session() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


async def paused(url: str, session_id: str, within: float = 60.0) -> list[PendingInterrupt]:
    """The questions of ``session_id`` once ``pending`` lists some."""
    from interlude.dbos import pending

    deadline = asyncio.get_running_loop().time() + within
    while True:
        found = [p for p in await pending(url) if p.session_id == session_id]
        if found:
            return found
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{session_id} did not pause within {within} s")
        await asyncio.sleep(0.05)
