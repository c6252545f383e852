"""Contract items 1-6: raising interrupts from every hook event and from tools."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

from interlude import ToolContext, ToolUse, tool
from interlude.errors import InterruptError, InterruptSignal
from interlude.hooks import (
    AfterInvocationEvent,
    AfterModelCallEvent,
    AfterToolCallEvent,
    BeforeInvocationEvent,
    BeforeModelCallEvent,
    BeforeToolCallEvent,
    MessageAddedEvent,
)

from .helpers_agent import (
    Harness,
    Tally,
    assert_valid_conversation,
    iid,
    make_tools,
    tool_results,
    tu,
)

TWO_STEP = [[tu("t1", "lookup", query="a")], "done"]

# (event type, source, scope, which event of the run asks)
EVENTS = [
    (BeforeInvocationEvent, "before_invocation", "m0", lambda e: True),
    (
        MessageAddedEvent,
        "message_added",
        "m0",
        lambda e: e.message.role == "user" and e.message.text == "hi",
    ),
    (BeforeModelCallEvent, "before_model_call", "m1", lambda e: len(e.agent.messages) == 1),
    (AfterModelCallEvent, "after_model_call", "m1", lambda e: len(e.agent.messages) == 1),
    (BeforeToolCallEvent, "before_tool_call", "t1", lambda e: True),
    (AfterToolCallEvent, "after_tool_call", "t1", lambda e: True),
    (AfterInvocationEvent, "after_invocation", "m3", lambda e: True),
]


# --- 1, 4, 5, 8, 10 at every boundary ------------------------------------------------------------


@pytest.mark.parametrize("is_async", [False, True], ids=["sync-callback", "async-callback"])
@pytest.mark.parametrize("event_type,source,scope,asks", EVENTS, ids=[e[1] for e in EVENTS])
def test_every_hook_event_can_interrupt_and_resume(
    event_type, source, scope, asks, is_async, fresh
):
    """interrupt() exists on every event, cannot be swallowed by `except Exception`, has the
    documented id, and the resume completes the run without redoing anything."""
    tally = Tally()
    seen: list[tuple[bool, Any]] = []
    swallowed: list[Exception] = []

    def sync_callback(event):
        if not asks(event):
            return
        try:
            answer = event.interrupt("q", reason="why?")
        except Exception as exc:  # a careless user: must not eat the signal
            swallowed.append(exc)
            return
        seen.append((event.is_replay, answer))

    async def async_callback(event):
        await asyncio.sleep(0)
        sync_callback(event)

    callback = async_callback if is_async else sync_callback
    h = Harness(TWO_STEP, tools=make_tools(tally), callbacks=[(event_type, callback)], fresh=fresh)
    result = h.run("hi")

    assert swallowed == []
    assert result.stop_reason == "interrupt"
    assert h.agent.is_paused
    [pending] = result.interrupts
    assert pending.id == iid(source, scope, "q")
    assert pending.id == f"v1:{source}:{scope}:{uuid.uuid5(uuid.NAMESPACE_OID, 'q')}"
    assert (pending.name, pending.reason, pending.response, pending.source) == (
        "q",
        "why?",
        None,
        source,
    )
    assert h.agent.interrupts == result.interrupts
    if source in ("before_tool_call", "after_tool_call"):
        assert pending.tool_use == ToolUse("t1", "lookup", {"query": "a"})
    else:
        assert pending.tool_use is None
    calls_at_pause, runs_at_pause = h.model_calls, tally.counts["lookup"]

    final = h.resume({pending.id: "A"})

    assert final.stop_reason == "end_turn", final
    assert str(final) == "done"
    assert not h.agent.is_paused and h.agent.interrupts == [] and final.interrupts == []
    assert seen == [(True, "A")]
    assert tally.counts["lookup"] == 1
    assert h.model_calls == 2
    # nothing that had completed before the pause was done again
    expected_before = {
        "before_invocation": (0, 0),
        "message_added": (0, 0),
        "before_model_call": (0, 0),
        "after_model_call": (1, 0),
        "before_tool_call": (1, 0),
        "after_tool_call": (1, 1),
        "after_invocation": (2, 1),
    }[source]
    assert (calls_at_pause, runs_at_pause) == expected_before
    texts = [(m.role, m.text) for m in h.agent.messages]
    assert texts == [("user", "hi"), ("assistant", ""), ("user", ""), ("assistant", "done")]
    assert_valid_conversation(h.agent.messages)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync-tool", "async-tool"])
def test_tool_body_interrupt_cannot_be_swallowed(is_async, executor, fresh):
    ran: list[str] = []

    def body(item: str, context: ToolContext) -> str:
        ran.append(item)
        try:
            answer = context.interrupt("confirm", reason=item)
        except Exception:
            return "swallowed"
        return f"{item}={answer}"

    if is_async:

        @tool
        async def careless(item: str, context: ToolContext) -> str:
            """Catches everything."""
            await asyncio.sleep(0)
            return body(item, context)

    else:

        @tool
        def careless(item: str, context: ToolContext) -> str:
            """Catches everything."""
            return body(item, context)

    h = Harness(
        [[tu("t1", "careless", item="x")], "done"], tools=[careless], executor=executor, fresh=fresh
    )
    result = h.run()
    assert result.stop_reason == "interrupt"
    [pending] = result.interrupts
    assert pending.id == iid("tool_call", "t1", "confirm")
    assert (pending.source, pending.tool_use) == (
        "tool_call",
        ToolUse("t1", "careless", {"item": "x"}),
    )
    assert len(h.agent.messages) == 2  # no tool-result message yet
    final = h.resume({pending.id: 7})
    assert final.stop_reason == "end_turn"
    assert [r.text for r in tool_results(h.agent.messages)] == ["x=7"]
    assert ran == ["x", "x"]  # the documented exception: the body runs again from the top


def test_signal_is_a_control_flow_base_exception():
    assert issubclass(InterruptSignal, BaseException)
    assert not issubclass(InterruptSignal, Exception)


# --- 2: every callback runs; duplicate names are an error ----------------------------------------


@pytest.mark.parametrize("event_type", [BeforeToolCallEvent, AfterToolCallEvent])
def test_all_callbacks_of_an_event_run_and_questions_are_collected(event_type, fresh):
    tally = Tally()
    ran: list[tuple[str, bool]] = []

    def ask(name):
        def callback(event):
            ran.append((name, event.is_replay))
            if name != "quiet":
                event.interrupt(name)

        return callback

    callbacks = [(event_type, ask("a")), (event_type, ask("quiet")), (event_type, ask("b"))]
    h = Harness(TWO_STEP, tools=make_tools(tally), callbacks=callbacks, fresh=fresh)
    result = h.run()

    assert result.stop_reason == "interrupt"
    assert sorted(i.name for i in result.interrupts) == ["a", "b"]  # one round, both questions
    assert sorted(ran) == [("a", False), ("b", False), ("quiet", False)]
    source = "before_tool_call" if event_type is BeforeToolCallEvent else "after_tool_call"
    assert {i.id for i in result.interrupts} == {iid(source, "t1", "a"), iid(source, "t1", "b")}

    ran.clear()
    final = h.resume({i.id: i.name.upper() for i in result.interrupts})
    assert final.stop_reason == "end_turn"
    assert sorted(ran) == [("a", True), ("b", True), ("quiet", True)]  # all replayed once
    assert tally.counts["lookup"] == 1 and h.model_calls == 2


@pytest.mark.parametrize(
    "event_type", [BeforeToolCallEvent, AfterToolCallEvent, BeforeModelCallEvent]
)
def test_two_callbacks_using_one_name_is_a_clear_error(event_type, executor):
    tally = Tally()

    def callback(event):
        event.interrupt("approve")

    h = Harness(
        TWO_STEP, tools=make_tools(tally), callbacks=[(event_type, callback)] * 2, executor=executor
    )
    with pytest.raises(InterruptError, match="'approve'"):
        h.run()
    assert not h.agent.is_paused
    assert_valid_conversation(h.agent.messages)


# --- 3: an answer given up front -----------------------------------------------------------------


@pytest.mark.parametrize("up_front", ["pre", False, 0, ""])
def test_response_given_up_front_is_returned_and_the_run_goes_on(up_front):
    tally = Tally()
    got: list[Any] = []

    @tool
    def asks(context: ToolContext) -> str:
        """Asks with a known answer."""
        got.append(("tool", context.interrupt("inner", response=up_front)))
        return "ok"

    def before(event):
        got.append(("hook", event.interrupt("approve", reason="r", response=up_front)))

    h = Harness(
        [[tu("t1", "asks")], "done"],
        tools=[asks, *make_tools(tally)],
        callbacks=[(BeforeToolCallEvent, before)],
    )
    result = h.run()
    assert result.stop_reason == "end_turn"
    assert result.interrupts == [] and not h.agent.is_paused
    assert got == [("hook", up_front), ("tool", up_front)]


# --- 4: the run stops at the end of the step; no half-written message ----------------------------


def test_no_tool_result_message_with_holes(executor, fresh):
    tally = Tally()
    turns = [
        [
            tu("t1", "lookup", query="a"),
            tu("t2", "confirm", item="b"),
            tu("t3", "lookup", query="c"),
        ],
        "done",
    ]
    h = Harness(turns, tools=make_tools(tally), executor=executor, fresh=fresh)
    result = h.run()
    assert result.stop_reason == "interrupt"
    assert [i.id for i in result.interrupts] == [iid("tool_call", "t2", "confirm")]
    assert len(h.agent.messages) == 2 and h.agent.messages[-1].role == "assistant"
    assert tool_results(h.agent.messages) == []
    assert_valid_conversation(h.agent.messages, open_tail=True)
    expected = ["a", "c"] if executor == "concurrent" else ["a"]
    assert tally.inputs("lookup") == expected  # concurrent: the whole step ran; sequential: stopped

    final = h.resume({result.interrupts[0].id: "yes"})
    assert final.stop_reason == "end_turn"
    assert [r.text for r in tool_results(h.agent.messages)] == ["found a", "b: yes", "found c"]
    assert tally.inputs("lookup") == ["a", "c"]
    assert tally.counts["confirm_after"] == 1
    assert_valid_conversation(h.agent.messages)


# --- 5: deterministic ids ------------------------------------------------------------------------


def test_documented_after_tool_id_and_determinism_across_agents():
    def after(event):
        event.interrupt("approve")

    ids = []
    for _ in range(2):
        h = Harness(TWO_STEP, tools=make_tools(Tally()), callbacks=[(AfterToolCallEvent, after)])
        ids.append([i.id for i in h.run().interrupts])
    expected = "v1:after_tool_call:t1:" + str(uuid.uuid5(uuid.NAMESPACE_OID, "approve"))
    assert ids == [[expected], [expected]]


def test_message_scopes_follow_message_index():
    """Non-tool scopes are m<message index>: a second model call has a new scope and asks anew."""
    asked: list[str] = []

    def before_model(event):
        event.interrupt("go")

    h = Harness(
        TWO_STEP, tools=make_tools(Tally()), callbacks=[(BeforeModelCallEvent, before_model)]
    )
    r = h.run()
    asked += [i.id for i in r.interrupts]
    r = h.resume({r.interrupts[0].id: 1})
    asked += [i.id for i in r.interrupts]
    r = h.resume({r.interrupts[0].id: 2})
    assert r.stop_reason == "end_turn"
    assert asked == [iid("before_model_call", "m1", "go"), iid("before_model_call", "m3", "go")]
    assert h.model_calls == 2


# --- 6: a before-tool interrupt records exactly what was shown -----------------------------------


def test_before_tool_interrupt_shows_the_rewritten_tool_use(executor, fresh):
    tally = Tally()
    after_uses: list[ToolUse] = []

    def redact(event):
        event.tool_use = ToolUse(event.tool_use.id, event.tool_use.name, {"query": "REDACTED"})

    def approve(event):
        event.interrupt("approve", reason="ok?")

    def after(event):
        after_uses.append(event.tool_use)

    h = Harness(
        TWO_STEP,
        tools=make_tools(tally),
        callbacks=[
            (BeforeToolCallEvent, redact),
            (BeforeToolCallEvent, approve),
            (AfterToolCallEvent, after),
        ],
        executor=executor,
        fresh=fresh,
    )
    result = h.run()
    [pending] = result.interrupts
    shown = ToolUse("t1", "lookup", {"query": "REDACTED"})
    assert pending.tool_use == shown
    exported = json.loads(json.dumps(h.agent.export_state()))
    assert exported["pause"]["interrupts"][0]["tool_use"]["input"] == {"query": "REDACTED"}
    assert tally.counts["lookup"] == 0

    final = h.resume({pending.id: "yes"})
    assert final.stop_reason == "end_turn"
    assert tally.inputs("lookup") == ["REDACTED"]
    assert after_uses == [shown]
    assert [r.text for r in tool_results(h.agent.messages)] == ["found REDACTED"]


def test_approval_covers_only_the_tool_use_that_was_shown(executor):
    """A before-hook that changes the input between the question and the resume must not get
    the old approval applied to the new input: every input the tool ran with was shown."""
    tally = Tally()
    passes: list[int] = []

    def rewrite(event):  # not deterministic: a different input on every pass
        passes.append(1)
        event.tool_use = ToolUse(
            event.tool_use.id, event.tool_use.name, {"query": f"v{len(passes)}"}
        )

    def approve(event):
        event.interrupt("approve")

    h = Harness(
        TWO_STEP,
        tools=make_tools(tally),
        callbacks=[(BeforeToolCallEvent, rewrite), (BeforeToolCallEvent, approve)],
        executor=executor,
    )
    shown = [i.tool_use.input["query"] for i in h.run().interrupts]
    result = h.resume({h.agent.interrupts[0].id: "yes"})
    if result.stop_reason == "interrupt":  # asked again about the new input: also correct
        shown += [i.tool_use.input["query"] for i in result.interrupts]
    assert set(tally.inputs("lookup")) <= set(shown), (
        f"tool ran with {tally.inputs('lookup')} but the person approved {shown}"
    )
