"""A graph's resume checks every answer as Agent.resume does, before anything changes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from interlude import Agent, ToolContext, ToolUse, tool
from interlude.errors import (
    AnswerValidationError,
    InterruptExpiredError,
    ResumeInputError,
    UnknownInterruptError,
)
from interlude.multiagent import BeforeNodeCallEvent, Graph
from interlude.sessions import MemoryStore
from interlude.testing import ScriptedModel


@tool
def count(context: ToolContext) -> str:
    """Ask how many."""
    return f"{context.interrupt('how_many', response_type=int)} rooms"


@tool
def soon(context: ToolContext) -> str:
    """Ask with a deadline."""
    return str(context.interrupt("soon", expires_in=0.0))


def build(store: MemoryStore) -> Graph:
    graph = Graph(
        {
            "a": Agent(ScriptedModel([[ToolUse("t1", "count", {})], "a done"]), tools=[count]),
            "b": Agent(ScriptedModel(["b done"])),
            "c": Agent(ScriptedModel([[ToolUse("t2", "soon", {})], "c done"]), tools=[soon]),
        },
        entry=["a", "b", "c"],
        session=store,
        session_id="checks",
    )

    def approve(event: BeforeNodeCallEvent) -> None:
        if event.node == "b" and event.interrupt("go_b", response_type=bool) is not True:
            event.cancel("no")

    graph.hooks.add_callback(BeforeNodeCallEvent, approve)
    return graph


async def test_a_bad_answer_for_one_node_leaves_every_pause_untouched() -> None:
    store = MemoryStore()
    graph = build(store)
    paused = await graph.invoke_async("go")
    by_name = {q.name: q for q in paused.interrupts}
    assert set(by_name) == {"how_many", "go_b", "soon"}
    how_many, go_b, late = by_name["how_many"], by_name["go_b"], by_name["soon"]
    version = (await store.load("checks")).version  # type: ignore[union-attr]

    bad = [
        ({how_many.id: 3, go_b.id: "yes"}, {}, AnswerValidationError),  # b's answer: a bool
        ({how_many.id: "three"}, {}, AnswerValidationError),  # a node agent's own question
        ({how_many.id: 3, late.id: "x"}, {}, InterruptExpiredError),
        ({how_many.id: 3, "nope": 1}, {}, UnknownInterruptError),
        ({how_many.id: 3}, {"shown": {how_many.id: "sha256:0"}}, ResumeInputError),
        ({how_many.id: 3}, {"by": "expiry"}, ResumeInputError),
    ]
    for answers, options, error in bad:
        with pytest.raises(error):
            await graph.resume_async(answers, **options)  # type: ignore[arg-type]
        assert graph.is_paused and {q.id for q in graph.interrupts} == {
            q.id for q in by_name.values()
        }
    assert (await store.load("checks")).version == version  # type: ignore[union-attr]
    fresh = build(store)
    assert {q.id for q in fresh.interrupts} == {q.id for q in by_name.values()}

    shown = {how_many.id: how_many.digest, go_b.id: go_b.digest}
    done = await graph.resume_async({how_many.id: 3, go_b.id: True}, by="ana", shown=shown)
    assert [q.id for q in done.interrupts] == [late.id]  # c waits on its (expired) question
    assert sorted(done.order) == ["a", "b"] and str(done.nodes["a"]) == "a done"
    trail = await store.audit_trail("checks")
    assert sorted((e["by"], tuple(e["node"]), e["answer"]) for e in trail) == [
        ("ana", ("a",), 3),
        ("ana", ("b",), True),
    ]
    assert graph.audit == trail


def test_a_changed_question_is_refused_with_shown() -> None:
    graph = build(MemoryStore())
    (q, *_) = [q for q in graph("go").interrupts if q.name == "how_many"]
    other = replace(q, reason="something else")
    with pytest.raises(ResumeInputError, match="not the one that was shown"):
        graph.resume({q.id: 3}, shown={q.id: other.digest})
    assert graph.is_paused
