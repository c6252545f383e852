"""Waiting on a workflow's condition, never on a fixed number of tries: what the dev server
shows (a pause, a listing: search attributes are eventually consistent) arrives when it
arrives, later on a busy machine. Each wait has the support package's deadline
(:func:`tests.support.until`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tests.support import until

__all__ = ["pending", "recorded", "until"]


async def pending(agents: Any, workflow_id: str, count: int = 1) -> list[Any]:
    """The questions of workflow ``workflow_id`` (an ``AgentClient``'s), once it has at least
    ``count``."""

    async def found() -> list[Any]:
        questions: list[Any] = await agents.pending(workflow_id)
        return questions if len(questions) >= count else []

    return await until(found, f"{count} pending question(s) on {workflow_id}")


def recorded(path: Path) -> Callable[[], Awaitable[bool]]:
    """A check for :func:`until`: whether ``path`` (where a tool records its runs, one line
    each) has a run."""

    async def check() -> bool:
        return _has_a_line(path)

    return check


def _has_a_line(path: Path) -> bool:
    return path.exists() and bool(path.read_text().splitlines())
