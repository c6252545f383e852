"""Swarm members that are graphs or swarms: the handoff message is their task, their last
node's reply is what they said, they cannot hand off (the swarm ends with them); questions
come up with their node path, answers go down, each member durable in its own session."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from interlude import Agent, ToolContext, ToolUse, tool
from interlude.errors import ConfigurationError
from interlude.multiagent import (
    HANDOFF,
    Graph,
    NodeEvent,
    NodeFinished,
    NodeStarted,
    Swarm,
    node_path,
)
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


def full_turns() -> dict[str, list[object]]:
    return {**FIRST, "check": [*FIRST["check"], *SECOND["check"]]}


def test_export_and_import_a_paused_swarm_with_a_graph_member() -> None:
    swarm = build(full_turns())
    (question,) = swarm("go").interrupts
    data = json.loads(json.dumps(swarm.export_state()))
    again = build({"lead": [], "draft": [], "check": ["Checked after import."]})
    again.import_state(data)
    assert again.is_paused and [q.id for q in again.interrupts] == [question.id]
    done = again.resume({question.id: True})
    assert done.order == ["lead", "team"] and str(done) == "Checked after import."


def test_discarding_the_pause_discards_the_graph_members() -> None:
    swarm = build(full_turns())
    swarm("go")
    team = swarm.nodes["team"].inner  # type: ignore[union-attr]
    assert team.is_paused
    swarm.discard_pause()
    assert not swarm.is_paused and not swarm.nodes["team"].inner.is_paused  # type: ignore[union-attr]


def test_a_graph_members_events_are_streamed_tagged_with_its_path() -> None:
    async def go() -> list[object]:
        return [e async for e in build(full_turns()).stream_async("go")]

    events = asyncio.run(go())
    inner = [e.event for e in events if isinstance(e, NodeEvent) and e.node == "team"]
    assert inner and all(isinstance(e, NodeEvent | NodeStarted | NodeFinished) for e in inner)
    assert {e.node for e in inner if isinstance(e, NodeEvent)} == {"draft", "check"}


def test_a_swarm_with_a_graph_member_as_a_tool() -> None:
    swarm = build(full_turns())
    boss = Agent(
        ScriptedModel([[ToolUse("s1", "crew", {"prompt": "ship it"})], "Boss done."]),
        tools=[swarm.as_tool(name="crew")],
    )
    (question,) = boss("go").interrupts
    assert [u.name for u in question.via][:3] == ["crew", "team", "check"]
    assert str(boss.resume({question.id: True})) == "Boss done."
    assert "Checked and approved." in boss.messages[2].content[0].content[0].text  # type: ignore[union-attr]
