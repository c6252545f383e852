"""Changes a tool body makes to ``agent.state`` in its activity come back to the workflow's
agent (as they would embedded), also from calls running side by side."""

from __future__ import annotations

from pathlib import Path

from .conftest import Env
from .test_workflow import _pending, _prompt


async def test_state_changed_by_tool_bodies_is_carried_back(env: Env) -> None:
    calls = [
        ("remember", {"key": "a", "value": "1"}),
        ("remember", {"key": "b", "value": "2"}),
        ("remember", {"key": "old", "value": ""}),  # removes the key
    ]
    wid = await env.agents.start("stateful", _prompt(*calls))
    result = await env.agents.result(wid)
    assert result["stop_reason"] == "end_turn"
    assert result["state"]["state"] == {"keep": "me", "a": "1", "b": "2"}


async def test_state_is_carried_back_across_a_pause(env: Env, tmp_path: Path) -> None:
    calls = [("remember", {"key": "a", "value": "1"}), ("touch", {"path": str(tmp_path / "t")})]
    wid = await env.agents.start("approve", _prompt(*calls))
    questions = await _pending(env, wid, 2)
    await env.agents.answer(wid, {questions[0].id: True})  # remember runs: a pause remains
    outcome = await env.agents.answer(wid, {questions[1].id: True})
    assert outcome["stop_reason"] == "end_turn"
    result = await env.agents.result(wid)
    assert result["state"]["state"] == {"a": "1"}
