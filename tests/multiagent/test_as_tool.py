"""A whole graph (or swarm) as a tool of an agent: its questions travel up, answers down."""

from __future__ import annotations

import json

import pytest

from interlude import Agent, ToolContext, ToolUse, tool
from interlude.errors import ConfigurationError
from interlude.multiagent import Graph, Swarm, node_path
from interlude.sessions import MemoryStore
from interlude.testing import ScriptedModel


@tool
def ask(context: ToolContext) -> str:
    """Ask a person."""
    return str(context.interrupt("ask", reason="which city?"))


def team(research: list[object], writer: list[object]) -> tuple[Graph, Agent, Agent]:
    r = Agent(ScriptedModel(research), name="research")
    w = Agent(ScriptedModel(writer), tools=[ask], name="writer")
    return (
        Graph(
            {"research": r, "writer": w}, [("research", "writer")], entry="research", name="team"
        ),
        r,
        w,
    )


def test_a_graph_tool_pauses_its_caller_and_resumes_where_it_stopped() -> None:
    graph, research, writer = team(["facts"], [[ToolUse("t1", "ask", {})], "Lisbon it is."])
    lead = Agent(
        ScriptedModel([[ToolUse("c1", "team", {"prompt": "plan a trip"})], "The team chose."]),
        tools=[graph.as_tool(description="A research and writing team.")],
        name="lead",
    )
    paused = lead("Plan my holiday")
    (question,) = paused.interrupts
    assert lead.is_paused and question.name == "ask"
    assert [u.id for u in question.via] == ["c1", "node:writer"]
    assert node_path(question) == ("writer",)
    kept = lead.export_state()["pause"]["step"]["calls"][0]["checkpoint"]  # type: ignore[index]
    assert json.loads(json.dumps(kept))["record"]["kind"] == "graph"

    done = lead.resume({question.id: "Lisbon"})
    assert str(done) == "The team chose."
    assert lead.messages[2].content[0].text == "Lisbon it is."  # type: ignore[union-attr]
    assert (len(research.model.requests), len(writer.model.requests)) == (1, 2)
    assert graph.record.status == "idle"  # the graph given was never run itself


def test_a_swarm_tool_runs_to_its_end() -> None:
    solo = Agent(ScriptedModel(["done by the swarm"]), name="solo")
    lead = Agent(
        ScriptedModel([[ToolUse("c1", "crew", {"prompt": "do it"})], "ok"]),
        tools=[Swarm([solo], name="crew").as_tool()],
    )
    assert str(lead("go")) == "ok"
    assert lead.messages[2].content[0].text == "done by the swarm"  # type: ignore[union-attr]


def test_as_tool_needs_a_name_and_no_session() -> None:
    graph, _, _ = team([], [])
    with pytest.raises(ConfigurationError):
        Graph({"a": Agent(ScriptedModel([]), name="a")}, entry="a").as_tool()
    with pytest.raises(ConfigurationError):
        Graph(
            {"a": Agent(ScriptedModel([]), name="a")},
            entry="a",
            name="g",
            session=MemoryStore(),
            session_id="x",
        ).as_tool()
    assert graph.as_tool(name="other").name == "other"
