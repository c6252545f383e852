"""Swarm members that are graphs or swarms: the handoff message is their task, their last
node's reply is what they said, they cannot hand off (the swarm ends with them); questions
come up with their node path, answers go down, each member durable in its own session."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from interlude import Agent, ToolContext, ToolUse, tool
from interlude.errors import ConfigurationError
from interlude.multiagent import HANDOFF, Graph, Swarm, node_path
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel


def handoff(tid: str, to: str, message: str) -> ToolUse:
    return ToolUse(tid, HANDOFF, {"agent_name": to, "message": message})


@tool
def approve(context: ToolContext) -> str:
    """Ask a person to approve."""
    return "approved" if context.interrupt("approve", reason="go ahead?") is True else "refused"


def build(turns: dict[str, list[object]], store: SQLiteStore | None = None) -> Swarm:
    """``lead`` hands off to ``team``, a graph ``draft -> check`` whose ``check`` asks."""
    team = Graph(
        {
            "draft": Agent(ScriptedModel(turns["draft"]), name="draft"),
            "check": Agent(ScriptedModel(turns["check"]), tools=[approve], name="check"),
        },
        [("draft", "check")],
        entry="draft",
        name="team",
    )
    lead = Agent(ScriptedModel(turns["lead"]), name="lead")
    if store is None:
        return Swarm([lead, team], entry="lead")
    return Swarm([lead, team], entry="lead", session=store, session_id="sw-1")


FIRST: dict[str, list[object]] = {
    "lead": [[handoff("h1", "team", "write the notes")], "Over to the team."],
    "draft": ["Draft: three changes."],
    "check": [[ToolUse("a1", "approve", {})]],
}
SECOND: dict[str, list[object]] = {"lead": [], "draft": [], "check": ["Checked and approved."]}


def test_a_graph_member_takes_the_handoff_pauses_and_ends_the_swarm() -> None:
    swarm = build({**FIRST, "check": [*FIRST["check"], *SECOND["check"]]})
    paused = swarm("Ship the release notes")
    assert paused.stop_reason == "interrupt" and paused.order == ["lead"]
    (question,) = paused.interrupts
    assert question.name == "approve" and node_path(question) == ("team", "check")
    done = swarm.resume({question.id: True})
    assert done.stop_reason == "end_turn" and done.order == ["lead", "team"]
    assert str(done) == "Checked and approved." == str(done.nodes["team"])
    team = swarm.nodes["team"]
    assert not hasattr(team, "agent")  # a nested copy, not an agent
    # the graph member's entry node got the swarm's prompt, with the handoff message
    draft_prompt = swarm.nodes["team"].inner.nodes["draft"].agent.messages[0].text  # type: ignore[union-attr]
    assert draft_prompt.startswith("Ship the release notes")
    assert "lead handed the task to you: write the notes" in draft_prompt
    assert "- lead: Over to the team." in draft_prompt


def test_a_graph_member_has_no_handoff_tool_and_agents_may_hand_off_to_it() -> None:
    swarm = build({**FIRST, "check": [*FIRST["check"], *SECOND["check"]]})
    (question,) = swarm("go").interrupts
    swarm.resume({question.id: False})
    check = swarm.nodes["team"].inner.nodes["check"].agent  # type: ignore[union-attr]
    assert HANDOFF not in [s.name for s in check.model.requests[0].tool_specs]
    lead = swarm.nodes["lead"].agent  # type: ignore[union-attr]
    (spec,) = [s for s in lead.model.requests[0].tool_specs if s.name == HANDOFF]
    assert spec.input_schema["properties"]["agent_name"]["enum"] == ["lead", "team"]


def test_a_swarm_member_swarm_and_the_entry_member_a_graph() -> None:
    inner = Swarm(
        [
            Agent(ScriptedModel([[handoff("h1", "b", "finish")], "a said"]), name="a"),
            Agent(ScriptedModel(["b finished"]), name="b"),
        ],
        name="pair",
    )
    other = Agent(ScriptedModel([]), name="other")
    result = Swarm([inner, other], entry="pair")("task")
    assert result.order == ["pair"] and str(result) == "b finished"


def test_a_member_orchestration_needs_a_name_and_no_session(tmp_path: Path) -> None:
    unnamed = Graph({"x": Agent(ScriptedModel([]), name="x")}, entry="x")
    with pytest.raises(ConfigurationError, match="graph member of a swarm needs a name"):
        Swarm([Agent(ScriptedModel([]), name="lead"), unnamed])
    stored = Graph(
        {"x": Agent(ScriptedModel([]), name="x")},
        entry="x",
        name="team",
        session=SQLiteStore(str(tmp_path / "s.db")),
        session_id="g",
    )
    with pytest.raises(ConfigurationError, match="without session="):
        Swarm([Agent(ScriptedModel([]), name="lead"), stored])


def test_durable_per_member_answered_in_a_fresh_swarm(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    (question,) = build(FIRST, SQLiteStore(db))("Ship the release notes").interrupts
    store = SQLiteStore(db)
    sessions = asyncio.run(store.list_sessions())
    assert "sw-1:node:team:node:check" in sessions  # the member's own node, two levels down
    listed = asyncio.run(store.pending_interrupts())
    assert [(p.session_id, p.interrupt.id) for p in listed] == [("sw-1", question.id)]

    fresh = build(SECOND, SQLiteStore(db))  # only the replies still to come
    assert fresh.is_paused and [q.id for q in fresh.interrupts] == [question.id]
    done = fresh.resume({question.id: True})
    assert done.order == ["lead", "team"] and str(done) == "Checked and approved."
    assert asyncio.run(store.pending_interrupts()) == []
