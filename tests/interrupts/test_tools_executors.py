"""Contract items 11-13: the concurrent and sequential executors across pauses."""

from __future__ import annotations

import asyncio

from interlude import ToolCallStarted, tool
from interlude.hooks import AfterToolCallEvent, BeforeToolCallEvent

from .helpers_agent import (
    Harness,
    Policy,
    Tally,
    assert_valid_conversation,
    by_tool,
    iid,
    make_tools,
    tool_results,
    tu,
)

MIXED = [
    [
        tu("t1", "lookup", query="a"),  # finishes
        tu("t2", "confirm", item="b"),  # interrupts from its body
        tu("t3", "lookup", query="c"),  # before-hook asks "approve"
        tu("t4", "fail_with", kind="custom"),  # after-hook asks "on_error"
        tu("t5", "lookup", query="e"),  # finishes
    ],
    "done",
]


def _mixed(executor: str, fresh: bool) -> tuple[Harness, Tally, Policy]:
    tally = Tally()
    policy = Policy({"approve": ["t3"], "after_tool_on_error": True})
    callbacks = [(BeforeToolCallEvent, policy.before_tool), (AfterToolCallEvent, policy.after_tool)]
    h = Harness(MIXED, tools=make_tools(tally), callbacks=callbacks, executor=executor, fresh=fresh)
    return h, tally, policy


# --- 11: concurrent ------------------------------------------------------------------------------


def test_concurrent_collects_every_interrupt_and_keeps_finished_results(fresh):
    h, tally, _policy = _mixed("concurrent", fresh)
    r1 = h.run()
    assert r1.stop_reason == "interrupt"
    pending = by_tool(r1.interrupts)
    assert list(pending) == ["t2", "t3", "t4"]  # every tool's question, in tool-use order
    assert pending["t2"].id == iid("tool_call", "t2", "confirm")
    assert pending["t3"].id == iid("before_tool_call", "t3", "approve")
    assert pending["t4"].id == iid("after_tool_call", "t4", "on_error")
    assert tally.inputs("lookup") == ["a", "e"]
    assert tally.counts["fail_with"] == 1 and tally.counts["confirm"] == 1
    assert tool_results(h.agent.messages) == []

    # round 2: answer only the before-tool question
    r2 = h.resume({pending["t3"].id: "yes"})
    assert [i.id for i in r2.interrupts] == [pending["t2"].id, pending["t4"].id]
    assert tally.inputs("lookup") == ["a", "e", "c"]
    assert tally.counts["fail_with"] == 1  # the kept exception is replayed, not re-raised
    assert tally.counts["confirm_after"] == 0

    # round 3: the rest
    r3 = h.resume({pending["t2"].id: "sure", pending["t4"].id: "rewrite:handled"})
    assert r3.stop_reason == "end_turn"
    assert tally.inputs("lookup") == ["a", "e", "c"]
    assert tally.counts["fail_with"] == 1 and tally.counts["confirm_after"] == 1
    assert h.model_calls == 2
    texts = [(r.tool_use_id, r.status, r.text) for r in tool_results(h.agent.messages)]
    assert texts == [
        ("t1", "success", "found a"),
        ("t2", "success", "b: sure"),
        ("t3", "success", "found c"),
        ("t4", "success", "handled"),
        ("t5", "success", "found e"),
    ]
    assert_valid_conversation(h.agent.messages)
    assert len([m for m in h.agent.messages if m.role == "user" and tool_results([m])]) == 1


# --- 12: sequential ------------------------------------------------------------------------------


def test_sequential_stops_at_the_first_interrupt_and_continues_in_order(fresh):
    h, tally, _policy = _mixed("sequential", fresh)
    rounds = []
    result = h.run()
    while result.stop_reason == "interrupt":
        assert len(result.interrupts) == 1
        i = result.interrupts[0]
        rounds.append((i.tool_use.id, list(tally.log)))
        answer = {"confirm": "sure", "approve": "yes", "on_error": "keep"}[i.name]
        result = h.resume({i.id: answer})
    assert result.stop_reason == "end_turn"

    assert [r[0] for r in rounds] == ["t2", "t3", "t4"]
    # round 1: t1 ran, t2 asked; nothing after t2 had started
    assert rounds[0][1] == [("lookup", "a"), ("confirm", "b")]
    # round 2: t2 finished (body again from the top), then t3's before-hook asked
    assert rounds[1][1][2:] == [("confirm", "b"), ("confirm_after", "b")]
    # round 3: t3 ran, then t4 raised and its after-hook asked; t5 not started
    assert rounds[2][1][4:] == [("lookup", "c"), ("fail_with", "custom")]
    assert tally.log[6:] == [("lookup", "e")]
    assert tally.inputs("lookup") == ["a", "c", "e"] and tally.counts["fail_with"] == 1
    assert h.model_calls == 2
    assert [r.tool_use_id for r in tool_results(h.agent.messages)] == ["t1", "t2", "t3", "t4", "t5"]
    assert tool_results(h.agent.messages)[3].status == "error"  # "keep": the kept error result
    assert_valid_conversation(h.agent.messages)


async def test_sequential_later_tools_have_not_started():
    tally = Tally()
    started: list[str] = []
    h = Harness(
        MIXED,
        tools=make_tools(tally),
        executor="sequential",
        callbacks=[(BeforeToolCallEvent, lambda e: started.append(e.tool_use.id))],
    )
    events = [e async for e in h.agent.stream_async("hi")]
    assert [e.tool_use.id for e in events if isinstance(e, ToolCallStarted)] == ["t1", "t2"]
    assert started == ["t1", "t2"]


# --- 13: one result per tool use, in tool-use order, whatever the rounds -------------------------


async def test_results_follow_tool_use_order_not_completion_order(executor, fresh):
    """t3 finishes first, t1 last (and only after a resume): the message is still t1, t2, t3."""
    tally = Tally()
    gate = asyncio.Event()

    @tool
    async def late(item: str) -> str:
        """Finishes only once `early` has run."""
        tally.hit("late", item)
        if executor == "concurrent":
            await gate.wait()
        return f"late {item}"

    @tool
    async def early(item: str) -> str:
        """Opens the gate."""
        tally.hit("early", item)
        gate.set()
        return f"early {item}"

    def before(event):
        if event.tool_use.id == "t1":
            event.interrupt("approve")

    h = Harness(
        [
            [tu("t1", "late", item="1"), tu("t2", "late", item="2"), tu("t3", "early", item="3")],
            "done",
        ],
        tools=[late, early],
        callbacks=[(BeforeToolCallEvent, before)],
        executor=executor,
        fresh=fresh,
    )
    r = await h.agent.invoke_async("hi")
    assert r.stop_reason == "interrupt"
    done_first = list(tally.log)
    final = await h.resume_async({r.interrupts[0].id: "ok"})
    assert final.stop_reason == "end_turn"
    if executor == "concurrent":
        assert done_first == [("late", "2"), ("early", "3")]
    else:
        assert done_first == []
    assert sorted(tally.log) == [("early", "3"), ("late", "1"), ("late", "2")]  # each once
    results = tool_results(h.agent.messages)
    assert [(r.tool_use_id, r.text) for r in results] == [
        ("t1", "late 1"),
        ("t2", "late 2"),
        ("t3", "early 3"),
    ]
    assert_valid_conversation(h.agent.messages)


def test_many_rounds_still_one_result_per_tool_use(executor, fresh):
    """Each tool of a batch asks twice (two rounds each); the batch ends with one message."""
    tally = Tally()

    def before(event):
        event.interrupt("first")
        event.interrupt("second")

    uses = [tu(f"t{n}", "lookup", query=str(n)) for n in range(1, 5)]
    h = Harness(
        [uses, "done"],
        tools=make_tools(tally),
        callbacks=[(BeforeToolCallEvent, before)],
        executor=executor,
        fresh=fresh,
    )
    result = h.run()
    rounds = 0
    while result.stop_reason == "interrupt":
        rounds += 1
        assert len(h.agent.messages) == 2
        # answer only the first pending question each round
        result = h.resume({result.interrupts[0].id: rounds})
    assert rounds == 8
    assert sorted(tally.inputs("lookup")) == ["1", "2", "3", "4"]
    results = tool_results(h.agent.messages)
    assert [r.tool_use_id for r in results] == ["t1", "t2", "t3", "t4"]
    assert_valid_conversation(h.agent.messages)
    assert h.model_calls == 2
