"""Graphs and swarms as nodes of a graph: questions up with their node path, answers down,
durable per node at every level."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from interlude import Agent, ToolUse
from interlude.multiagent import Graph, node_path
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel

from .graph_child import ask
from .nested_child import FIRST, SESSION, nested_graph

CHILD = Path(__file__).with_name("nested_child.py")


def test_paused_three_deep_and_answered_from_a_fresh_process(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    graph = nested_graph(db, FIRST)
    paused = graph("Plan a trip in May")
    assert paused.stop_reason == "interrupt" and paused.order == ["research"]
    (question,) = paused.interrupts
    assert question.name == "hold_room" and node_path(question) == ("trip", "planner")
    assert [u.name for u in question.via][:3] == ["trip", "planner", "booker"]  # then its tool
    store = SQLiteStore(db)
    listed = asyncio.run(store.pending_interrupts())
    assert [(p.session_id, p.interrupt.id) for p in listed] == [(SESSION, question.id)]
    sessions = asyncio.run(store.list_sessions())
    assert f"{SESSION}:node:trip:node:planner" in sessions  # durable per node, two levels down
    del graph

    child = subprocess.run(
        [sys.executable, str(CHILD), db, question.id, "true"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout) == {
        "order": ["research", "trip", "summary"],
        "text": "Summary: Lisbon, room held.",
        "stop": "end_turn",
        "trip": "Plan: five days in Lisbon, room held.",
    }
    assert asyncio.run(store.pending_interrupts()) == []
    (entry,) = asyncio.run(store.audit_trail(SESSION))
    assert (entry["by"], entry["node"], entry["interrupt_id"]) == (
        "ana",
        ["trip", "planner"],
        question.id,
    )
    again = nested_graph(db, {k: [] for k in FIRST})
    assert not again.is_paused and not again.needs_recovery


def test_a_nested_graph_pauses_and_resumes_through_export_and_import() -> None:
    def build(a_turns: list[object]) -> Graph:
        inner = Graph(
            {"a": Agent(ScriptedModel(a_turns), tools=[ask]), "b": Agent(ScriptedModel(["b"]))},
            [("a", "b")],
            entry="a",
        )
        last = Agent(ScriptedModel(["last done"]))
        return Graph({"inner": inner, "last": last}, [("inner", "last")], entry="inner")

    graph = build([[ToolUse("t1", "ask", {"what": "x"})]])
    (question,) = graph("go").interrupts
    assert node_path(question) == ("inner", "a")
    saved = json.loads(json.dumps(graph.export_state()))
    fresh = build(["a done"])  # only the reply still to come
    fresh.import_state(saved)
    assert [q.id for q in fresh.interrupts] == [question.id]
    done = fresh.resume({question.id: "yes"}, by="bo")
    assert done.order == ["inner", "last"] and str(done.nodes["inner"]) == "b"
    assert str(done) == "last done"
    assert [(e["by"], e["node"]) for e in fresh.audit] == [("bo", ["inner", "a"])]
