"""``graph.undo(to, node=...)``: a node's current run taken back to a checkpoint of its agent's
session (its compensations newest first, once each), the graph's record made to match, and
the graph carried on from there; on MemoryStore and SQLite."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from interlude import Agent, ToolUse, UndoPlan, tool
from interlude.errors import AgentBusyError, UndoError
from interlude.multiagent import Graph, Swarm
from interlude.sessions import MemoryStore, open_store
from interlude.testing import ScriptedModel

from . import undo_agent
from .undo_agent import EFFECTS, Calls

SESSIONS = ("g", "g:node:a", "g:node:b")
BOOKED = ["pay 120", "flight Lisbon", "hotel 3", "car 2", "mail ana@example.com"]


class Killed(Exception):
    """What a store raises where a process is killed (what ran is what a killed one ran)."""


@pytest.fixture(autouse=True)
def _no_effects() -> None:
    EFFECTS.clear()


@pytest.fixture(params=["memory", "sqlite"])
def store(request: Any, tmp_path: Path) -> Any:
    if request.param == "memory":
        return MemoryStore()
    opened = open_store(f"sqlite:///{tmp_path / 'g.db'}")
    request.addfinalizer(opened.close)
    return opened


def trip_tools(hotel: Any = None, mail: Any = None) -> list[Any]:
    return [
        undo_agent.pay,
        undo_agent.flight,
        hotel or undo_agent.hotel,
        undo_agent.car,
        mail or undo_agent.mail,
    ]


def build(
    store: Any, calls: Calls, tools: list[Any] | None = None, facts: int = 1, lease: float = 30.0
) -> Graph:
    """``a -> b``: ``a`` replies with facts; ``b`` books the trip in five calls (undo_agent)."""
    trip = Agent(calls.model, tools=tools or trip_tools(), name="trip", session_lease=lease)
    return Graph(
        {"a": Agent(ScriptedModel(["facts"] * facts), name="a"), "b": trip},
        [("a", "b")],
        entry="a",
        session=store,
        session_id="g",
    )


def dump(store: Any) -> list[Any]:
    return [asyncio.run(store.load(s)) for s in SESSIONS]


def pending(store: Any) -> list[str]:
    return [p.interrupt.id for p in asyncio.run(store.pending_interrupts())]


def node_undo_entries(graph: Graph, node: str) -> list[tuple[Any, ...]]:
    agent = graph.nodes[node].agent  # type: ignore[union-attr]
    return [(e.answer["call"], e.by) for e in agent.audit if e.name == "undo"]  # type: ignore[index]


def booked(store: Any, calls: Calls, **kw: Any) -> Graph:
    graph = build(store, calls, **kw)
    result = graph("Book me a trip")
    assert result.stop_reason == "end_turn" and result.order == ["a", "b"]
    assert str(result) == "Your trip is booked." and EFFECTS == BOOKED
    EFFECTS.clear()
    return graph


def test_a_node_undone_to_an_early_checkpoint_and_the_graph_carried_on(store: Any) -> None:
    calls = Calls()
    graph = booked(store, calls)
    assert calls.count == 6
    assert [p.id for p in graph.node_checkpoints("b")][:5] == ["m0", "m1", "m2", "m3", "m4"]
    result = graph.undo("m4", node="b", by="ana")
    assert result.stop_reason == "undone" and result.interrupts == []
    # the calls after m4 taken back, newest first, once each
    assert EFFECTS == [
        "retract mail to ana@example.com",
        "return car 2 days",
        "cancel hotel 3 nights",
    ]
    # b is no longer finished; a's result stands; the graph holds a stopped run
    assert result.order == ["a"] and list(result.nodes) == ["a"]
    assert graph.needs_recovery and not graph.is_paused and graph.interrupts == []
    (entry,) = [e for e in graph.audit if e["name"] == "undo"]
    assert entry["by"] == "ana" and entry["node"] == ["b"]
    assert entry["answer"] == {
        "node": "b",
        "checkpoint": "m4",
        "calls": ["c5", "c4", "c3"],
        "skipped": [],
    }
    stored = asyncio.run(store.load("g"))
    assert stored is not None and stored.claim is None  # any process may carry it on
    # another process carries the graph on: b recovers from m4 (pay and flight stand)
    again = build(store, calls, facts=0)  # a's model has no reply left: a does not run again
    assert again.needs_recovery
    assert node_undo_entries(again, "b") == [("c5", "ana"), ("c4", "ana"), ("c3", "ana")]
    done = again.recover()
    assert done.stop_reason == "end_turn" and done.order == ["a", "b"]
    assert str(done) == "Your trip is booked."
    assert EFFECTS[3:] == ["hotel 3", "car 2", "mail ana@example.com"]
    assert calls.count == 10  # hotel, car, mail and the reply: nothing before m4 asked again
    assert not again.needs_recovery and not again.is_paused
    assert len(again.nodes["b"].agent.messages) == 12  # type: ignore[union-attr]


def test_a_dry_run_returns_the_node_plan_and_changes_nothing(store: Any) -> None:
    graph = booked(store, Calls())
    before = dump(store)
    plan = graph.undo("m4", node="b", dry_run=True)
    assert isinstance(plan, UndoPlan)
    assert [(s.call_id, s.tool, s.compensation) for s in plan.steps] == [
        ("c5", "mail", "mail.undo"),
        ("c4", "car", "car.undo"),
        ("c3", "hotel", "cancel_hotel"),
    ]
    assert (plan.keep, plan.stands) == (5, "stopped")
    assert EFFECTS == [] and dump(store) == before
    assert not graph.needs_recovery and graph.record.status == "idle"
    # a dry run of a refused undo is refused too
    with pytest.raises(UndoError, match=r"'a'.*b ran after it"):
        graph.undo("m0", node="a", dry_run=True)


def test_refused_undos_name_the_problem_and_change_nothing(store: Any) -> None:
    graph = booked(store, Calls(), tools=trip_tools(mail=undo_agent.plain_mail))
    before = dump(store)
    with pytest.raises(UndoError, match=r"cannot undo node 'a': b ran after it"):
        graph.undo("m0", node="a")
    with pytest.raises(UndoError, match="has no node 'c'; its nodes: a, b"):
        graph.undo("m0", node="c")
    with pytest.raises(UndoError, match="has no node 'c'; its nodes: a, b"):
        graph.node_checkpoints("c")
    with pytest.raises(UndoError, match=r"c5 \(mail\) has no compensation") as caught:
        graph.undo("m4", node="b")
    assert caught.value.calls == ("c5",)
    assert EFFECTS == [] and dump(store) == before and graph.record.status == "idle"
    # skipped, the call is left as it is and the rest is undone
    assert graph.undo("m4", node="b", skip=["c5"]).stop_reason == "undone"
    assert EFFECTS == ["return car 2 days", "cancel hotel 3 nights"]
    # b now holds a stopped run: a second undo waits for the recovery
    with pytest.raises(UndoError, match="stopped before it finished: recover"):
        graph.undo("m2", node="b")


def test_a_checkpoint_before_the_nodes_current_run_is_refused(store: Any) -> None:
    calls = Calls()
    graph = build(store, calls, facts=2)
    graph("Book me a trip")
    graph("And once more")  # b's model has seen its five results: it replies at once
    EFFECTS.clear()
    before = dump(store)
    with pytest.raises(UndoError, match=r"'m4' of node 'b' is before its run .* m12"):
        graph.undo("m4", node="b")
    assert dump(store) == before and EFFECTS == []


def test_an_undo_while_the_graph_runs_is_refused() -> None:
    async def main() -> None:
        started, release = asyncio.Event(), asyncio.Event()

        @tool
        async def wait() -> str:
            """Wait."""
            started.set()
            await release.wait()
            return "ok"

        model = ScriptedModel([[ToolUse("w1", "wait", {})], "done"])
        graph = Graph({"b": Agent(model, tools=[wait], name="b")}, entry="b")
        running = asyncio.ensure_future(graph.invoke_async("go"))
        await started.wait()
        with pytest.raises(AgentBusyError, match="while the graph runs"):
            await graph.undo_async("m0", node="b")
        release.set()
        assert str(await running) == "done"
        assert graph.node_checkpoints("b")[-1].id == "m3"  # the undo changed nothing

    asyncio.run(main())


def test_a_compensation_that_needs_approval_pauses_the_graph_on_it(store: Any) -> None:
    @tool(needs_approval=True)
    def unbook_hotel(input: dict[str, Any], result: Any) -> str:
        """Cancel the hotel (costs a fee)."""
        EFFECTS.append(f"unbook hotel {result}")
        return "unbooked"

    gated = tool(compensate=unbook_hotel, name="hotel")(undo_agent.hotel.fn)
    calls = Calls()
    graph = booked(store, calls, tools=trip_tools(hotel=gated))
    paused = graph.undo("m4", node="b", by="ana")
    assert paused.stop_reason == "interrupt"
    (question,) = paused.interrupts
    assert question.id.startswith("v1:node:b:") and question.name == "approval"
    assert question.tool_use is not None and question.tool_use.name == "unbook_hotel"
    assert EFFECTS == ["retract mail to ana@example.com", "return car 2 days"]
    assert graph.is_paused and graph.interrupts == [question]
    assert pending(store) == [question.id]  # listed under the graph, as any node question
    # another process answers it: the undo ends, b carries on from m4, the graph finishes
    again = build(store, calls, tools=trip_tools(hotel=gated), facts=0)
    done = again.resume({question.id: True}, by="bo")
    assert done.stop_reason == "end_turn" and done.order == ["a", "b"]
    assert EFFECTS == [
        "retract mail to ana@example.com",
        "return car 2 days",
        "unbook hotel H-3",
        "hotel 3",
        "car 2",
        "mail ana@example.com",
    ]
    assert pending(store) == []
    assert node_undo_entries(again, "b") == [("c5", "ana"), ("c4", "ana"), ("c3", "ana")]


def test_an_undo_of_the_node_the_graph_waits_on_drops_its_questions(store: Any) -> None:
    gated_mail = tool(compensate=undo_agent.retract, name="mail", needs_approval=True)(
        undo_agent._mail
    )
    calls = Calls()
    graph = build(store, calls, tools=trip_tools(mail=gated_mail))
    (question,) = graph("Book me a trip").interrupts
    assert pending(store) == [question.id]
    EFFECTS.clear()
    result = graph.undo("m2", node="b", by="ana")
    assert result.stop_reason == "undone"
    assert EFFECTS == ["return car 2 days", "cancel hotel 3 nights", "cancel flight F-Lisbon"]
    assert not graph.is_paused and graph.needs_recovery and pending(store) == []
    # carried on: b books again from m2 and asks again about the mail
    (asked,) = graph.recover().interrupts
    assert asked.name == "approval" and pending(store) == [asked.id]
    assert EFFECTS[3:] == ["flight Lisbon", "hotel 3", "car 2"]
    done = graph.resume({asked.id: True})
    assert str(done) == "Your trip is booked." and EFFECTS[-1] == "mail ana@example.com"
    assert EFFECTS.count("pay 120") == 0  # pay stood: it never ran again


def test_a_swarm_member_is_undone_and_the_swarm_carried_on() -> None:
    store = MemoryStore()
    calls = Calls()

    def swarm() -> Swarm:
        lead = Agent(
            ScriptedModel(
                [
                    [ToolUse("h1", "handoff_to_agent", {"agent_name": "trip", "message": "book"})],
                    "Over to trip.",
                ]
            ),
            name="lead",
        )
        trip = Agent(calls.model, tools=trip_tools(), name="trip")
        return Swarm([lead, trip], session=store, session_id="s")

    first = swarm()
    assert str(first("Book me a trip")) == "Your trip is booked."
    EFFECTS.clear()
    with pytest.raises(UndoError, match="cannot undo node 'lead': trip ran after it"):
        first.undo("m0", node="lead")
    assert first.undo("m6", node="trip").stop_reason == "undone"
    assert EFFECTS == ["retract mail to ana@example.com", "return car 2 days"]
    done = swarm().recover()
    assert done.order == ["lead", "trip"] and str(done) == "Your trip is booked."
    assert EFFECTS[2:] == ["car 2", "mail ana@example.com"]


def test_a_process_killed_before_the_node_undo_began_recovers_the_node_as_it_was() -> None:
    inner = MemoryStore()
    calls = Calls()
    booked(inner, calls)

    class Dies(MemoryStore):
        """The process dies at the node agent's first save of the undo."""

        async def save(self, session_id: str, update: Any) -> int:
            if session_id == "g:node:b":
                raise Killed("killed")
            return await inner.save(session_id, update)

        async def load(self, session_id: str) -> Any:
            return await inner.load(session_id)

    with pytest.raises(Killed):
        asyncio.run(build(Dies(), calls, facts=0).undo_async("m4", node="b", by="ana"))
    assert EFFECTS == []  # no compensation ran
    fresh = build(inner, calls, facts=0)
    assert fresh.needs_recovery  # the graph's first save landed: b stands started again
    done = fresh.recover()  # b's session is as it was: its reply stands, nothing runs
    assert done.order == ["a", "b"] and str(done) == "Your trip is booked."
    assert EFFECTS == [] and calls.count == 6


def test_a_process_killed_in_a_node_undo_asks_about_the_compensation_in_doubt() -> None:
    inner = MemoryStore()
    calls = Calls()
    booked(inner, calls)

    class Dies(MemoryStore):
        """The process dies once the second compensation ran, before its result is saved."""

        async def save(self, session_id: str, update: Any) -> int:
            if session_id == "g:node:b" and len(EFFECTS) == 2:
                raise Killed("killed")
            return await inner.save(session_id, update)

        async def load(self, session_id: str) -> Any:
            return await inner.load(session_id)

    dying = build(Dies(), calls, facts=0, lease=0.3)
    with pytest.raises(Killed):
        asyncio.run(dying.undo_async("m4", node="b", by="ana"))
    assert EFFECTS == ["retract mail to ana@example.com", "return car 2 days"]
    time.sleep(0.4)  # the killed process's claim on b's session runs out
    fresh = build(inner, calls, facts=0)
    assert fresh.needs_recovery
    # the car's return is in doubt: the graph asks about it (never runs it twice blindly)
    (doubt,) = fresh.recover().interrupts
    assert doubt.name == "in_doubt" and doubt.id.startswith("v1:node:b:")
    assert fresh.is_paused and len(EFFECTS) == 2
    done = fresh.resume({doubt.id: {"result": "car returned"}}, by="bo")
    # the rest of the undo, then b from m4, then the end of the run
    assert done.order == ["a", "b"] and str(done) == "Your trip is booked."
    assert EFFECTS == [
        "retract mail to ana@example.com",
        "return car 2 days",
        "cancel hotel 3 nights",
        "hotel 3",
        "car 2",
        "mail ana@example.com",
    ]
    assert [c for c, _ in node_undo_entries(fresh, "b")] == ["c5", "c4", "c3"]
