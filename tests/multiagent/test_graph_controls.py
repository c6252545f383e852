"""``resume_expired`` and ``cancel`` on graphs and swarms, as an agent has them."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from interlude import Agent, ToolContext, ToolUse, tool
from interlude.errors import (
    NestedNodeError,
    NotPausedError,
    ResumeInputError,
    UnknownInterruptError,
)
from interlude.multiagent import (
    AfterNodeCallEvent,
    BeforeNodeCallEvent,
    Graph,
    MultiAgentFinished,
    NodeEvent,
    NodeFinished,
    Swarm,
)
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel


@tool
def soon(context: ToolContext) -> str:
    """Ask with a deadline already past, defaulting to "late"."""
    return str(context.interrupt("soon", expires_in=0.0, default="late"))


@tool
def later(context: ToolContext) -> str:
    """Ask with a deadline an hour away."""
    return str(context.interrupt("later", expires_in=3600))


def _asker(name: str, tool_: object, reply: str, *, asked: bool = False) -> Agent:
    """An agent whose tool asks; ``asked``: a later process's, with only the reply to come."""
    script: list[object] = [reply] if asked else [[ToolUse("t1", tool_.name, {})], reply]  # type: ignore[attr-defined]
    return Agent(ScriptedModel(script), tools=[tool_], name=name)  # type: ignore[arg-type, list-item]


def test_resume_expired_settles_only_the_overdue_questions(tmp_path: Path) -> None:
    def build(asked: bool = True) -> Graph:
        graph = Graph(
            {
                "fast": _asker("fast", soon, "fast done", asked=asked),
                "slow": _asker("slow", later, "slow done", asked=asked),
                "gated": Agent(ScriptedModel(["gated ran"]), name="gated"),
            },
            entry=["fast", "slow", "gated"],
            session=SQLiteStore(str(tmp_path / "s.db")),
            session_id="g-1",
        )

        def gate(event: BeforeNodeCallEvent) -> None:
            if event.node == "gated":
                event.interrupt("go", expires_in=0.0, default="yes")

        graph.hooks.add_callback(BeforeNodeCallEvent, gate)
        return graph

    graph = build(asked=False)
    paused = graph("go")
    assert sorted(q.name for q in paused.interrupts) == ["go", "later", "soon"]
    done = build().resume_expired()  # a fresh process settles them, from the session
    assert done.stop_reason == "interrupt"
    assert [q.name for q in done.interrupts] == ["later"]  # not overdue: still pending
    assert sorted(done.order) == ["fast", "gated"]
    assert str(done.nodes["fast"]) == "fast done" and str(done.nodes["gated"]) == "gated ran"
    fresh = build()
    expiries = [e for e in fresh.audit if e["by"] == "expiry"]
    assert sorted(str(e["node"]) for e in expiries) == ["['fast']", "['gated']"]
    with pytest.raises(ResumeInputError, match="no pending interrupt has expired"):
        fresh.resume_expired()
    assert fresh.is_paused and [q.name for q in fresh.interrupts] == ["later"]  # unchanged


def test_an_expired_node_approval_without_default_cancels_the_node() -> None:
    graph = Graph(
        {"a": Agent(ScriptedModel(["a ran"]), name="a"), "b": Agent(ScriptedModel([]))},
        [("a", "b")],
        entry="a",
    )

    def gate(event: BeforeNodeCallEvent) -> None:
        event.interrupt("approve", expires_in=0.0)

    graph.hooks.add_callback(BeforeNodeCallEvent, gate)
    assert graph("go").stop_reason == "interrupt"
    done = graph.resume_expired()
    assert done.stop_reason == "end_turn" and done.order == ["a"]
    assert done.nodes["a"].stop_reason == "cancelled"  # fail closed: a did not run, b neither
    assert "expired without an answer" in str(done.nodes["a"])
    with pytest.raises(NotPausedError):
        graph.resume_expired()


def test_a_swarm_settles_its_expired_questions() -> None:
    swarm = Swarm([_asker("only", soon, "done late")])
    assert swarm("go").stop_reason == "interrupt"
    assert str(swarm.resume_expired()) == "done late"


def test_node_hook_question_ids_differ_per_run_of_the_node() -> None:
    """A node in a cycle asks afresh each run: the first run's answer is not the second's."""
    graph = Graph(
        {"a": Agent(ScriptedModel(["a1", "a2"]), name="a"), "b": Agent(ScriptedModel(["b1"]))},
        [("a", "b"), ("b", "a", lambda state: state.runs.get("a", 0) < 2)],
        entry="a",
    )

    def gate(event: BeforeNodeCallEvent) -> None:
        event.interrupt("approve")

    graph.hooks.add_callback(BeforeNodeCallEvent, gate)
    (first,) = graph("go").interrupts
    (second,) = graph.resume({first.id: True}).interrupts  # a ran, b asks
    (third,) = graph.resume({second.id: True}).interrupts  # b ran, a asks again
    assert len({first.id, second.id, third.id}) == 3
    with pytest.raises(UnknownInterruptError):
        graph.resume({first.id: True})  # a stale answer to a's first run answers nothing
    assert graph.resume({third.id: True}).order == ["a", "b", "a"]


def _blocking_tool(started: threading.Event) -> object:
    @tool
    async def wait_forever(context: ToolContext) -> str:
        """Wait until cancelled."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    return wait_forever


def test_cancel_from_another_thread_stops_the_graph(tmp_path: Path) -> None:
    started = threading.Event()
    waiter = _blocking_tool(started)

    def build(first: list[object]) -> Graph:
        return Graph(
            {
                "slow": Agent(ScriptedModel(first), tools=[waiter], name="slow"),  # type: ignore[list-item]
                "after": Agent(ScriptedModel(["after ran"]), name="after"),
            },
            [("slow", "after")],
            entry="slow",
            session=SQLiteStore(str(tmp_path / "s.db")),
            session_id="c-1",
        )

    graph = build([[ToolUse("w1", "wait_forever", {})], "slow ran"])
    graph.cancel()  # no run: nothing happens
    canceller = threading.Thread(target=lambda: (started.wait(10), graph.cancel()))
    canceller.start()
    result = graph("go")
    canceller.join()
    assert result.stop_reason == "cancelled" and result.order == ["slow"]
    assert result.nodes["slow"].stop_reason == "cancelled" and "after" not in result.nodes
    fresh = build([])
    assert not fresh.needs_recovery and not fresh.is_paused  # consistent, takes a new task
    assert fresh.record.status == "idle"


def test_cancel_leaves_waiting_nodes_paused() -> None:
    started = threading.Event()
    waiter = _blocking_tool(started)
    graph = Graph(
        {
            "asks": _asker("asks", later, "asks done"),
            "slow": Agent(
                ScriptedModel([[ToolUse("w1", "wait_forever", {})]]),
                tools=[waiter],  # type: ignore[list-item]
                name="slow",
            ),
        },
        entry=["asks", "slow"],
    )

    async def main() -> object:
        run = asyncio.ensure_future(graph.invoke_async("go"))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
        graph.cancel()
        return await run

    result = asyncio.run(main())
    assert result.stop_reason == "cancelled"  # type: ignore[attr-defined]
    assert graph.is_paused and [q.name for q in graph.interrupts] == ["later"]
    (question,) = graph.interrupts
    assert str(graph.resume({question.id: "ok"})) == "asks done"


def test_copies_keep_a_name_set_after_construction() -> None:
    graph = Graph({"a": Agent(ScriptedModel([]))}, entry="a")
    swarm = Swarm([Agent(ScriptedModel([]), name="x")])
    graph.name, swarm.name = "planner", "crew"  # as an App does when a factory leaves it out
    assert graph.copy().name == "planner" and swarm.copy().name == "crew"
    assert graph.as_tool().name == "planner"
    outer = Graph({"inner": graph}, entry="inner")
    assert outer.nodes["inner"].view.name == "planner"  # type: ignore[union-attr]


def test_node_hooks_see_a_typed_view_of_a_nested_node() -> None:
    inner = Graph({"x": Agent(ScriptedModel(["x done"]), name="x")}, entry="x", name="inner")
    outer = Graph(
        {"sub": inner, "plain": Agent(ScriptedModel(["plain done"]), name="plain")},
        [("sub", "plain")],
        entry="sub",
    )
    seen: dict[str, object] = {}

    def look(event: AfterNodeCallEvent) -> None:
        seen[event.node] = (event.agent.name, event.nested)
        if event.nested is None:
            assert event.agent.messages[-1].text == "plain done"
        else:
            assert event.nested.record.order == ("x",)
            with pytest.raises(NestedNodeError, match="runs a graph"):
                _ = event.agent.messages

    outer.hooks.add_callback(AfterNodeCallEvent, look)
    assert str(outer("go")) == "plain done"
    assert seen["plain"] == ("plain", None)
    name, nested = seen["sub"]  # type: ignore[misc]
    assert name == "inner" and isinstance(nested, Graph) and nested is not inner


def test_a_streamed_resume_passes_on_the_nested_copys_events() -> None:
    inner = Graph({"asks": _asker("asks", later, "asked and done")}, entry="asks")
    outer = Graph({"sub": inner}, entry="sub")

    async def collect(task: object) -> list[object]:
        return [e async for e in outer.stream_async(task)]  # type: ignore[arg-type]

    first = asyncio.run(collect("go"))
    assert any(isinstance(e, NodeEvent) and e.node == "sub" for e in first)
    (question,) = outer.interrupts
    answer = [{"interruptResponse": {"interruptId": question.id, "response": "ok"}}]
    resumed = asyncio.run(collect(answer))
    inner_events = [e.event for e in resumed if isinstance(e, NodeEvent) and e.node == "sub"]
    assert any(isinstance(e, NodeFinished) and e.node == "asks" for e in inner_events)
    assert isinstance(resumed[-1], MultiAgentFinished)
    assert str(resumed[-1].result) == "asked and done"
