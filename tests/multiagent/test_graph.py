"""Graph in memory: order, joins, concurrency, conditions, cycles, pauses from any node, resume."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import pytest

from interlude import Agent, ToolContext, ToolUse, tool
from interlude.errors import (
    AgentPausedError,
    ConfigurationError,
    NodeRunLimitError,
    NotPausedError,
    ResumeInputError,
    UnknownInterruptError,
)
from interlude.hooks import BeforeToolCallEvent
from interlude.multiagent import (
    AfterNodeCallEvent,
    BeforeNodeCallEvent,
    Graph,
    GraphState,
    MultiAgentFinished,
    NodeEvent,
    NodeFinished,
    node_path,
)
from interlude.testing import FunctionModel, ModelRequest, ScriptedModel


def agent(name: str, *turns: object, tools: list[object] | None = None) -> Agent:
    return Agent(ScriptedModel(list(turns)), tools=tools or [], name=name)


def last_prompt(model: object) -> str:
    assert isinstance(model, ScriptedModel | FunctionModel)
    return model.requests[-1].messages[-1].text


@tool
def ask(context: ToolContext, what: str) -> str:
    """Ask a person.

    Args:
        what: The question.
    """
    return f"{what}: {context.interrupt('ask', reason=what)}"


def asker(name: str, final: str) -> Agent:
    """An agent that asks a person (tool use id t1, question 'ask') and then answers."""
    return agent(name, [ToolUse("t1", "ask", {"what": name})], final, tools=[ask])


def test_nodes_run_after_all_their_sources_and_get_their_replies() -> None:
    a, b, c = agent("a", "A says hi"), agent("b", "B done"), agent("c", "C done")
    d = agent("d", "D joined")
    graph = Graph(
        {"a": a, "b": b, "c": c, "d": d},
        [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")],
        entry="a",
    )
    result = graph("plan the trip")
    assert result.stop_reason == "end_turn" and not result.interrupts
    assert result.order[0] == "a" and result.order[-1] == "d"
    assert sorted(result.order[1:3]) == ["b", "c"]
    assert str(result) == "D joined" and str(result.nodes["b"]) == "B done"
    assert last_prompt(a.model) == "plan the trip"  # the template's model: the copy shares it
    assert "From a:\nA says hi" in last_prompt(b.model)
    joined = last_prompt(d.model)
    assert joined.startswith("plan the trip") and "From b:\nB done" in joined
    assert "From c:\nC done" in joined
    assert len(d.model.requests) == 1  # d ran once, when both of its sources had finished
    assert a.messages == []  # the agent given as a node is never run itself


async def test_independent_nodes_run_at_the_same_time() -> None:
    both_started = asyncio.Event()
    in_flight: list[str] = []

    def meeting(name: str) -> FunctionModel:
        async def reply(request: ModelRequest) -> str:
            in_flight.append(name)
            if len(in_flight) == 2:
                both_started.set()
            await asyncio.wait_for(both_started.wait(), 5)  # only if the other one runs too
            return f"{name} done"

        return FunctionModel(reply)

    graph = Graph(
        {"x": Agent(meeting("x"), name="x"), "y": Agent(meeting("y"), name="y")},
        entry=["x", "y"],
    )
    result = await graph.invoke_async("go")
    assert sorted(result.order) == ["x", "y"] and sorted(in_flight) == ["x", "y"]


def test_conditions_see_the_results_and_pick_the_branch() -> None:
    def says(word: str) -> Callable[[GraphState], bool]:
        return lambda state: word in str(state.results["triage"])

    seen: list[GraphState] = []

    def spy(state: GraphState) -> bool:
        seen.append(state)
        return False

    graph = Graph(
        {
            "triage": agent("triage", "this is a bug"),
            "fix": agent("fix", "fixed"),
            "answer": agent("answer", "answered"),
            "never": agent("never", "never"),
        },
        [
            ("triage", "fix", says("bug")),
            ("triage", "answer", says("question")),
            ("triage", "never", spy),
        ],
        entry="triage",
    )
    result = graph("my app crashes")
    assert result.order == ["triage", "fix"]
    (state,) = seen
    assert state.task == "my app crashes" and state.runs == {"triage": 1}
    with pytest.raises(TypeError):
        state.results["x"] = state.results["triage"]  # type: ignore[index]


def test_a_cycle_runs_until_its_condition_stops_it_and_is_bounded() -> None:
    drafts = iter(["draft 1", "draft 2", "draft 3"])
    verdicts = iter(["redo", "ok"])
    writer = Agent(FunctionModel(lambda r: next(drafts)), name="writer")
    reviewer = Agent(FunctionModel(lambda r: next(verdicts)), name="reviewer")

    def redo(state: GraphState) -> bool:
        return str(state.results["reviewer"]) == "redo"

    graph = Graph(
        {"writer": writer, "reviewer": reviewer},
        [("writer", "reviewer"), ("reviewer", "writer", redo)],
        entry="writer",
        max_node_runs=3,
    )
    result = graph("write a poem")
    assert result.order == ["writer", "reviewer", "writer", "reviewer"]
    assert str(result) == "ok" and str(result.nodes["writer"]) == "draft 2"
    assert "From reviewer:\nredo" in last_prompt(writer.model)

    forever = Graph(
        {"writer": agent("writer", *["again"] * 5), "reviewer": agent("reviewer", *["no"] * 5)},
        [("writer", "reviewer"), ("reviewer", "writer")],
        entry="writer",
        max_node_runs=2,
    )
    with pytest.raises(NodeRunLimitError, match="'writer' would run a 3th time"):
        forever("loop")
    assert not forever.is_paused and not forever.needs_recovery  # it takes a new task
    assert forever.interrupts == []


def test_questions_from_two_nodes_get_distinct_ids_and_answers_in_any_order() -> None:
    first, second = asker("first", "first done"), asker("second", "second done")
    graph = Graph({"first": first, "second": second}, entry=["first", "second"])
    paused = graph("go")
    assert paused.stop_reason == "interrupt" and graph.is_paused and paused.order == []
    q1, q2 = paused.interrupts
    own = f"v1:tool_call:t1:{uuid.uuid5(uuid.NAMESPACE_OID, 'ask')}"  # the same in both nodes
    assert q1.id == f"v1:node:first:{uuid.uuid5(uuid.NAMESPACE_OID, own)}"
    assert q1.id != q2.id and (q1.name, q2.name) == ("ask", "ask")
    assert (node_path(q1), node_path(q2)) == (("first",), ("second",))
    assert q1.tool_use is not None and q1.tool_use.input == {"what": "first"}

    again = graph.resume({q2.id: "yes"})  # the second one first
    assert [q.id for q in again.interrupts] == [q1.id] and again.order == ["second"]
    done = graph.resume({q1.id: "no"})
    assert done.stop_reason == "end_turn" and done.order == ["second", "first"]
    assert (len(first.model.requests), len(second.model.requests)) == (2, 2)  # nothing twice
    assert first.model.requests[-1].messages[-1].content[0].text == "first: no"


def test_a_paused_node_holds_new_nodes_unless_partial() -> None:
    def build() -> tuple[Graph, Agent]:
        after_b = agent("after_b", "after b")
        graph = Graph(
            {
                "a": agent("a", "a"),
                "b": asker("b", "b done"),
                "c": asker("c", "c done"),
                "after_b": after_b,
            },
            [("a", "b"), ("a", "c"), ("b", "after_b")],
            entry="a",
        )
        return graph, after_b

    graph, after_b = build()
    qb, qc = graph("go").interrupts
    held = graph.resume({qb.id: 1})  # b finishes; after_b waits while c waits on a person
    assert held.stop_reason == "interrupt" and held.order == ["a", "b"]
    assert [q.id for q in held.interrupts] == [qc.id] and after_b.model.requests == []
    done = graph.resume({qc.id: 2})  # nothing waits now: after_b starts beside c
    assert done.order[:2] == ["a", "b"] and sorted(done.order[2:]) == ["after_b", "c"]
    assert len(after_b.model.requests) == 1

    graph, after_b = build()
    qb, qc = graph("go").interrupts
    partial = graph.resume({qb.id: 1}, partial=True)  # b's branch goes on to its end
    assert partial.stop_reason == "interrupt" and partial.order == ["a", "b", "after_b"]
    assert [q.id for q in partial.interrupts] == [qc.id]
    assert str(graph.resume({qc.id: 2})) == "c done"


def test_bad_resume_input_changes_nothing() -> None:
    graph = Graph({"n": asker("n", "done")}, entry="n")
    with pytest.raises(NotPausedError):
        graph.resume({"v1:x": 1})
    (question,) = graph("go").interrupts
    before = graph.export_state()
    for bad, error in [
        ({"v1:nope": True}, UnknownInterruptError),
        ({}, ResumeInputError),
        ({question.id: object()}, ResumeInputError),
    ]:
        with pytest.raises(error):
            graph.resume(bad)  # type: ignore[arg-type]
    with pytest.raises(AgentPausedError):
        graph("another task")
    assert graph.export_state() == before
    # the list form of answers, as an agent takes it
    done = graph([{"interruptResponse": {"interruptId": question.id, "response": "ok"}}])
    assert str(done) == "done"


def test_before_node_hook_approves_or_cancels_a_node() -> None:
    asked: list[tuple[str, bool]] = []

    def approve(event: BeforeNodeCallEvent) -> None:
        if event.node == "entry":
            return
        asked.append((event.node, event.is_replay))
        if event.interrupt("approve", reason=f"run {event.node}?") != "yes":
            event.cancel("not approved")

    after_count: list[str] = []

    def build() -> tuple[Graph, dict[str, Agent]]:
        agents = {n: agent(n, f"{n} done") for n in ("entry", "left", "right", "end")}
        graph = Graph(
            agents, [("entry", "left"), ("entry", "right"), ("left", "end")], entry="entry"
        )
        graph.hooks.add_callback(BeforeNodeCallEvent, approve)
        graph.hooks.add_callback(AfterNodeCallEvent, lambda e: after_count.append(e.node))
        return graph, agents

    graph, agents = build()
    left, right = graph("go").interrupts
    assert left.source == "before_node_call" and left.reason == "run left?"
    assert left.id == f"v1:before_node_call:left.1:{uuid.uuid5(uuid.NAMESPACE_OID, 'approve')}"
    assert node_path(left) == ("left",) and left.tool_use is None
    assert agents["left"].model.requests == [] and after_count == ["entry"]  # not run yet

    result = graph.resume({left.id: "no", right.id: "yes"})
    assert result.stop_reason == "end_turn" and result.order == ["entry", "left", "right"]
    assert result.nodes["left"].stop_reason == "cancelled"
    assert str(result.nodes["left"]) == "not approved"
    assert agents["left"].model.requests == [] and agents["end"].model.requests == []
    assert str(result.nodes["right"]) == "right done" and after_count == ["entry", "right"]
    assert ("left", True) in asked and ("right", True) in asked


def test_after_node_hook_reviews_a_result_without_running_the_node_again() -> None:
    def review(event: AfterNodeCallEvent) -> None:
        event.interrupt("review", reason=str(event.result))

    writer = agent("writer", "the draft")
    graph = Graph(
        {"writer": writer, "editor": agent("editor", "edited")},
        [("writer", "editor")],
        entry="writer",
    )
    graph.hooks.add_callback(AfterNodeCallEvent, review)
    (question,) = graph("write").interrupts
    assert question.source == "after_node_call" and question.reason == "the draft"
    (second,) = graph.resume({question.id: "fine"}).interrupts  # now the editor's review
    assert node_path(second) == ("editor",) and second.reason == "edited"
    assert str(graph.resume({second.id: "fine"})) == "edited"
    assert len(writer.model.requests) == 1


def test_a_question_from_a_sub_agent_inside_a_node() -> None:
    deleted: list[str] = []

    @tool
    def delete(path: str) -> str:
        """Delete a file.

        Args:
            path: The file.
        """
        deleted.append(path)
        return f"deleted {path}"

    def approve(event: BeforeToolCallEvent) -> None:
        if event.interrupt("approve") is not True:
            event.cancel("no")

    ops = agent("ops", [ToolUse("s1", "delete", {"path": "/tmp/x"})], "ops deleted", tools=[delete])
    ops.hooks.add_callback(BeforeToolCallEvent, approve)
    lead = agent(
        "lead", [ToolUse("t1", "ops", {"prompt": "delete x"})], "lead done", tools=[ops.as_tool()]
    )
    graph = Graph({"lead": lead}, entry="lead")
    (question,) = graph("clean up").interrupts
    assert node_path(question) == ("lead",)
    assert [u.name for u in question.via] == ["lead", "ops"]
    assert str(graph.resume({question.id: True})) == "lead done" and deleted == ["/tmp/x"]


async def test_stream_tags_every_event_with_its_node() -> None:
    graph = Graph({"a": agent("a", "hello"), "b": agent("b", "bye")}, [("a", "b")], entry="a")
    events = [e async for e in graph.stream_async("go")]
    assert isinstance(events[-1], MultiAgentFinished) and str(events[-1].result) == "bye"
    tagged = [e for e in events if isinstance(e, NodeEvent)]
    assert {e.node for e in tagged} == {"a", "b"}
    assert [e.node for e in events if isinstance(e, NodeFinished)] == ["a", "b"]
    first_b = next(i for i, e in enumerate(events) if getattr(e, "node", None) == "b")
    assert all(getattr(e, "node", "a") == "a" for e in events[:first_b])


def test_configuration_errors() -> None:
    a = agent("a", "x")
    for kwargs in [
        {"nodes": {}, "entry": "a"},
        {"nodes": {"a": a}, "entry": "b"},
        {"nodes": {"a": a}, "edges": [("a", "zzz")], "entry": "a"},
        {"nodes": {"bad name": a}, "entry": "bad name"},
        {"nodes": {"a": a}, "entry": "a", "max_node_runs": 0},
        {"nodes": {"a": "not an agent"}, "entry": "a"},
        {"nodes": {"a": a}, "entry": "a", "session_id": "x"},
    ]:
        with pytest.raises(ConfigurationError):
            Graph(**kwargs)  # type: ignore[arg-type]


def test_a_failing_node_or_condition_ends_the_run_and_the_graph_takes_a_new_task() -> None:
    from interlude.errors import ScriptError

    ok = agent("ok", "fine", "fine again")
    graph = Graph({"ok": ok, "broken": agent("broken")}, entry=["ok", "broken"])
    with pytest.raises(ScriptError):
        graph("go")
    assert len(ok.model.requests) == 1  # the other node went to its end
    assert not graph.is_paused and not graph.needs_recovery

    def boom(state: GraphState) -> bool:
        raise ValueError("bad condition")

    graph = Graph({"a": agent("a", "x"), "b": agent("b", "y")}, [("a", "b", boom)], entry="a")
    with pytest.raises(ValueError, match="bad condition"):
        graph("go")
    assert not graph.is_paused and not graph.needs_recovery


async def test_a_streamed_resume_tags_the_resumed_node() -> None:
    graph = Graph({"n": asker("n", "n done")}, entry="n")
    (question,) = (await graph.invoke_async("go")).interrupts
    answer = [{"interruptResponse": {"interruptId": question.id, "response": "yes"}}]
    events = [e async for e in graph.stream_async(answer)]
    assert isinstance(events[-1], MultiAgentFinished) and str(events[-1].result) == "n done"
    assert {e.node for e in events if isinstance(e, NodeEvent)} == {"n"}
