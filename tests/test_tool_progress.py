"""A tool's progress reports (ToolContext.report_progress) are ToolCallProgress stream events."""

from __future__ import annotations

from interlude import Agent, ToolCallFinished, ToolCallProgress, ToolContext, ToolUse, tool
from interlude.testing import ScriptedModel


@tool
def copy_files(count: int, context: ToolContext) -> str:
    """Copy files.

    Args:
        count: How many.
    """
    for n in range(1, count + 1):
        context.report_progress(n, count, f"file {n}")
    return f"copied {count}"


async def test_progress_reports_are_stream_events() -> None:
    call = ToolUse("c1", "copy_files", {"count": 2})
    agent = Agent(ScriptedModel([[call], "Copied."]), tools=[copy_files])
    events = [e async for e in agent.stream_async("Copy two files")]
    progress = [e for e in events if isinstance(e, ToolCallProgress)]
    assert progress == [
        ToolCallProgress(call, 1, 2, "file 1"),
        ToolCallProgress(call, 2, 2, "file 2"),
    ]
    finished = next(i for i, e in enumerate(events) if isinstance(e, ToolCallFinished))
    assert events.index(progress[-1]) < finished


def test_progress_without_a_stream_goes_nowhere() -> None:
    agent = Agent(
        ScriptedModel([[ToolUse("c1", "copy_files", {"count": 3})], "ok"]), tools=[copy_files]
    )
    assert str(agent("Copy")) == "ok"
    assert agent.messages[2].content[0].text == "copied 3"
