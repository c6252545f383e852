"""Swarm: handoffs, the shared context, pauses from any agent, limits, sessions."""

from __future__ import annotations

import pytest

from interlude import Agent, ToolContext, ToolUse, tool
from interlude.errors import ConfigurationError, HandoffLimitError
from interlude.multiagent import HANDOFF, BeforeNodeCallEvent, Swarm, node_path
from interlude.sessions import MemoryStore
from interlude.testing import ScriptedModel


def handoff(tid: str, to: str, message: str) -> ToolUse:
    return ToolUse(tid, HANDOFF, {"agent_name": to, "message": message})


@tool
def weather(context: ToolContext) -> str:
    """Ask a person for the weather."""
    return str(context.interrupt("weather", reason="need the weather"))


def test_agents_hand_off_with_the_shared_context() -> None:
    research = Agent(
        ScriptedModel([[handoff("h1", "writer", "write it up")], "Lisbon is warm."]),
        name="research",
    )
    writer = Agent(ScriptedModel(["A warm trip to Lisbon."]), name="writer")
    swarm = Swarm([research, writer], entry="research")
    result = swarm("plan a trip")
    assert result.stop_reason == "end_turn" and result.order == ["research", "writer"]
    assert str(result) == "A warm trip to Lisbon."
    assert HANDOFF in [s.name for s in research.model.requests[0].tool_specs]
    prompt = writer.model.requests[0].messages[-1].text
    assert prompt.startswith("plan a trip")
    assert "- research: Lisbon is warm." in prompt
    assert "research handed the task to you: write it up" in prompt


def test_a_handoff_to_an_unknown_agent_or_to_itself_is_refused() -> None:
    solo = Agent(
        ScriptedModel([[handoff("h1", "nobody", "x"), handoff("h2", "solo", "y")], "Alone."]),
        name="solo",
    )
    other = Agent(ScriptedModel([]), name="other")
    result = Swarm([solo, other])("go")
    assert result.order == ["solo"] and str(result) == "Alone."
    errors = [b for b in solo.model.requests[1].messages[-1].content]
    assert [b.status for b in errors] == ["error", "error"]  # type: ignore[union-attr]


def test_a_question_from_the_second_agent_pauses_the_swarm() -> None:
    first = Agent(
        ScriptedModel([[handoff("h1", "forecaster", "check")], "Over to you."]), name="first"
    )
    forecaster = Agent(
        ScriptedModel([[ToolUse("t1", "weather", {})], "It is sunny."]),
        tools=[weather],
        name="forecaster",
    )
    swarm = Swarm([first, forecaster])
    paused = swarm("weather?")
    (question,) = paused.interrupts
    assert paused.order == ["first"] and node_path(question) == ("forecaster",)
    done = swarm.resume({question.id: "sunny"})
    assert done.order == ["first", "forecaster"] and str(done) == "It is sunny."
    assert len(first.model.requests) == 2  # not asked again


def test_a_rejected_agent_ends_the_swarm() -> None:
    def approve(event: BeforeNodeCallEvent) -> None:
        if event.node != "info" and event.interrupt("approve") != "yes":
            event.cancel("rejected")

    info = Agent(ScriptedModel([[handoff("h1", "weather", "go")], "handing over"]), name="info")
    weather_agent = Agent(ScriptedModel([]), name="weather")
    swarm = Swarm([info, weather_agent], hooks=[])
    swarm.hooks.add_callback(BeforeNodeCallEvent, approve)
    (question,) = swarm("go").interrupts
    assert question.source == "before_node_call" and node_path(question) == ("weather",)
    result = swarm.resume({question.id: "no"})
    assert result.order == ["info", "weather"] and str(result) == "rejected"
    assert result.nodes["weather"].stop_reason == "cancelled"


def test_handoffs_are_bounded() -> None:
    ping = Agent(
        ScriptedModel([[handoff("p1", "pong", "")], "a", [handoff("p2", "pong", "")], "b"]),
        name="ping",
    )
    pong = Agent(ScriptedModel([[handoff("q1", "ping", "")], "c"]), name="pong")
    swarm = Swarm([ping, pong], max_handoffs=2)
    with pytest.raises(HandoffLimitError, match="handoff 3; max_handoffs is 2"):
        swarm("go")
    assert len(pong.model.requests) == 2  # ran once; the third handoff did not start it
    assert not swarm.is_paused and not swarm.needs_recovery


async def test_a_fresh_swarm_on_the_same_store_carries_on() -> None:
    store = MemoryStore()

    def build(first: list[object], second: list[object]) -> Swarm:
        return Swarm(
            [
                Agent(ScriptedModel(first), name="first"),
                Agent(ScriptedModel(second), tools=[weather], name="forecaster"),
            ],
            session=store,
            session_id="s1",
        )

    paused = await build(
        [[handoff("h1", "forecaster", "check")], "Over."], [[ToolUse("t1", "weather", {})]]
    ).invoke_async("weather?")
    (question,) = paused.interrupts
    done = await build([], ["Sunny."]).resume_async({question.id: "sunny"})
    assert done.order == ["first", "forecaster"] and str(done) == "Sunny."


def test_configuration_errors() -> None:
    a = Agent(ScriptedModel([]), name="a")
    for args, kwargs in [
        (([],), {}),
        (([a, Agent(ScriptedModel([]), name="a")],), {}),
        (([Agent(ScriptedModel([]))],), {}),
        (([a],), {"entry": "b"}),
        (([a],), {"max_handoffs": -1}),
    ]:
        with pytest.raises(ConfigurationError):
            Swarm(*args, **kwargs)  # type: ignore[arg-type]


def test_export_and_import_carry_a_swarm_pause() -> None:
    def build(first: list[object], second: list[object]) -> Swarm:
        return Swarm(
            [
                Agent(ScriptedModel(first), name="first"),
                Agent(ScriptedModel(second), tools=[weather], name="forecaster"),
            ],
            name="crew",
        )

    one = build([[handoff("h1", "forecaster", "check")], "Over."], [[ToolUse("t1", "weather", {})]])
    (question,) = one("weather?").interrupts
    two = build([], ["Rainy."])
    two.import_state(one.export_state())
    assert str(two.resume({question.id: "rain"})) == "Rainy."
