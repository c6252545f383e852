"""Graph durability: export/import, a session in a store, another process, a killed process."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from interlude import Agent, ToolUse
from interlude.errors import (
    AgentPausedError,
    ConfigurationError,
    StateFormatError,
    StateMismatchError,
)
from interlude.multiagent import BeforeNodeCallEvent, Graph, node_path
from interlude.sessions import MemoryStore, SessionUpdate, SQLiteStore
from interlude.testing import ScriptedModel

from .graph_child import SESSION, ask, writer_graph

CHILD = Path(__file__).with_name("graph_child.py")


def run_child(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHILD), *args], capture_output=True, text=True, timeout=120
    )


def plain_graph(research: list[object], writer: list[object]) -> Graph:
    return Graph(
        {
            "research": Agent(ScriptedModel(research), name="research"),
            "writer": Agent(ScriptedModel(writer), tools=[ask], name="writer"),
        },
        [("research", "writer")],
        entry="research",
        name="trip",
    )


def test_export_and_import_carry_a_pause_to_a_fresh_graph() -> None:
    first = plain_graph(["facts"], [[ToolUse("t1", "ask", {"what": "where"})]])
    (question,) = first("plan a trip").interrupts
    saved = json.loads(json.dumps(first.export_state()))

    second = plain_graph([], ["Going to Lisbon."])  # research must not be asked again
    second.import_state(saved)
    assert second.is_paused and [q.id for q in second.interrupts] == [question.id]
    done = second.resume({question.id: "Lisbon"})
    assert done.order == ["research", "writer"] and str(done) == "Going to Lisbon."
    assert str(done.nodes["research"]) == "facts"

    broken = dict(saved, version=99)
    for bad, error in [(broken, StateFormatError), (dict(saved, name="other"), StateMismatchError)]:
        fresh = plain_graph([], [])
        with pytest.raises(error):
            fresh.import_state(bad)
        assert not fresh.is_paused


async def test_a_new_graph_on_the_same_store_carries_on(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    first = writer_graph(db, ["facts"], [[ToolUse("t1", "ask", {"what": "where"})]])
    paused = await first.invoke_async("plan a trip")
    (question,) = paused.interrupts

    store = SQLiteStore(db)
    listed = await store.pending_interrupts()
    assert [(p.session_id, p.interrupt.id) for p in listed] == [(SESSION, question.id)]
    assert node_path(listed[0].interrupt) == ("writer",)
    sessions = await store.list_sessions()
    assert sessions == sorted([SESSION, f"{SESSION}:node:research", f"{SESSION}:node:writer"])
    with pytest.raises(ConfigurationError):
        first.import_state(first.export_state())  # with a session, the store is the truth

    second = writer_graph(db, [], ["Going to Lisbon."])
    assert second.is_paused and second.interrupts[0].id == question.id
    done = await second.resume_async({question.id: "Lisbon"}, by="ana")
    assert done.order == ["research", "writer"] and str(done) == "Going to Lisbon."
    assert await store.pending_interrupts() == []
    writer_audit = await store.audit_trail(f"{SESSION}:node:writer")
    assert [e["by"] for e in writer_audit] == ["ana"]

    third = writer_graph(db, [], [])  # finished: takes a new task, loads the results
    assert not third.is_paused and not third.needs_recovery


async def test_a_before_node_question_survives_a_restart() -> None:
    store = MemoryStore()
    ran: list[str] = []

    def build(turns: list[object]) -> Graph:
        graph = Graph(
            {"deploy": Agent(ScriptedModel(turns), name="deploy")},
            entry="deploy",
            session=store,
            session_id="g1",
        )

        def approve(event: BeforeNodeCallEvent) -> None:
            ran.append(event.node)
            if event.interrupt("go") is not True:
                event.cancel("no")

        graph.hooks.add_callback(BeforeNodeCallEvent, approve)
        return graph

    (question,) = (await build([]).invoke_async("ship it")).interrupts
    done = await build(["shipped"]).resume_async({question.id: True})
    assert str(done) == "shipped" and ran == ["deploy", "deploy"]


def test_the_resume_runs_in_another_process(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    first = writer_graph(db, ["facts"], [[ToolUse("t1", "ask", {"what": "where"})]])
    (question,) = first("plan a trip").interrupts
    del first

    child = run_child(db, "resume", question.id)
    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout) == {
        "order": ["research", "writer"],
        "text": "Written.",
        "stop": "end_turn",
    }
    again = writer_graph(db, [], [])
    assert not again.is_paused and asyncio.run(SQLiteStore(db).pending_interrupts()) == []


def test_a_process_killed_inside_a_node_is_recovered_without_repeating_finished_nodes(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "s.db")
    killed = run_child(db, "crash")
    assert killed.returncode == -9, killed.stderr  # killed inside work's tool, after fetch
    recovered = run_child(db, "recover")  # fetch's model has no reply to give: not asked
    assert recovered.returncode == 0, recovered.stderr
    assert json.loads(recovered.stdout) == {
        "order": ["fetch", "work"],
        "text": "work done",
        "stop": "end_turn",
    }


class _DiesOnRecording:
    """A store that dies (as a killed process would) when the graph records ``node`` done."""

    def __init__(self, store: MemoryStore, node: str) -> None:
        self._store, self._node = store, node

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    async def save(self, session_id: str, update: SessionUpdate) -> int:
        record = (update.state or {}).get("interlude.orchestration")
        if isinstance(record, dict) and self._node in record["results"]:
            raise SystemExit("killed before the graph recorded the node")
        return await self._store.save(session_id, update)


async def test_a_node_that_finished_before_the_graph_recorded_it_is_not_run_again() -> None:
    store = MemoryStore()

    def build(first: list[object], second: list[object], dying: bool) -> Graph:
        where: object = _DiesOnRecording(store, "first") if dying else store
        return Graph(
            {
                "first": Agent(ScriptedModel(first), name="first"),
                "second": Agent(ScriptedModel(second), name="second"),
            },
            [("first", "second")],
            entry="first",
            session=where,  # type: ignore[arg-type]
            session_id="g",
        )

    with pytest.raises(SystemExit):
        await build(["first reply"], [], dying=True).invoke_async("go")
    fresh = build([], ["second reply"], dying=False)  # first's model has nothing to give
    assert fresh.needs_recovery and not fresh.is_paused
    with pytest.raises(AgentPausedError):
        await fresh.invoke_async("another task")
    done = await fresh.recover_async()
    assert done.order == ["first", "second"] and str(done.nodes["first"]) == "first reply"
    assert str(done) == "second reply"
