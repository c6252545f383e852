"""A conversation manager under Temporal: the model activity refuses a conversation too long
for its window, the workflow's manager reduces, and the activity (whose agent applies the
window again to what it is sent) answers the reduced conversation."""

from __future__ import annotations

from interlude import Agent, Message, Text
from interlude.testing import ScriptedModel

from .conftest import Env


async def test_overflow_in_the_model_activity_is_reduced_and_retried(env: Env) -> None:
    history = [
        Message(role, [Text(f"{role} {i}")]) for i in range(4) for role in ("user", "assistant")
    ]
    state = Agent(ScriptedModel([]), messages=history).export_state()
    wid = await env.agents.start("windowed", "latest", state=state)
    result = await env.agents.result(wid)
    assert result["stop_reason"] == "end_turn"
    assert result["text"] == "Fits: 3 message(s), first 'user 3'."
    saved = result["state"]
    assert len(saved["messages"]) == 10  # the conversation itself is whole
    assert saved["state"]["interlude.conversation"]["start"] == 6  # what is left out, kept
