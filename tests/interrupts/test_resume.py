"""Contract items 7-10: resuming, answers, bad input, replay; discard, stream, cancel, direct."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from interlude import InterruptRaised, RunFinished, Text, ToolContext, tool
from interlude.errors import (
    AgentPausedError,
    AlreadyAnsweredError,
    DirectToolInterruptError,
    NotPausedError,
    ResumeError,
    ResumeInputError,
    UnknownInterruptError,
)
from interlude.hooks import AfterToolCallEvent, BeforeModelCallEvent, BeforeToolCallEvent

from .helpers_agent import (
    Harness,
    Tally,
    assert_valid_conversation,
    iid,
    make_tools,
    tool_results,
    tu,
)

BATCH3 = [
    [tu("t1", "lookup", query="a"), tu("t2", "lookup", query="b"), tu("t3", "lookup", query="c")],
    "done",
]


def approve_all(log: list[tuple[str, bool, Any]]):
    def before(event):
        answer = event.interrupt("approve", reason=event.tool_use.input)
        log.append((event.tool_use.id, event.is_replay, answer))

    return before


# --- 7: the ways to resume -----------------------------------------------------------------------


async def _resume(agent, how: str, answers: dict[str, Any]):
    items = [{"interruptResponse": {"interruptId": k, "response": v}} for k, v in answers.items()]
    if how == "resume":
        return await asyncio.to_thread(agent.resume, answers)
    if how == "resume_async":
        return await agent.resume_async(answers)
    if how == "call_list":
        return await asyncio.to_thread(agent, items)
    if how == "invoke_list":
        return await agent.invoke_async(items)
    if how == "resume_stream":
        events = [e async for e in agent.resume_stream_async(answers, by="ana")]
        assert isinstance(events[-1], RunFinished)
        assert agent.audit[-1].by == "ana"
        return events[-1].result
    assert how == "stream_list"
    events = [e async for e in agent.stream_async(items)]
    assert isinstance(events[-1], RunFinished)
    return events[-1].result


@pytest.mark.parametrize(
    "how", ["resume", "resume_async", "call_list", "invoke_list", "stream_list", "resume_stream"]
)
async def test_every_resume_form_continues_the_run(how):
    tally, log = Tally(), []
    h = Harness(
        BATCH3, tools=make_tools(tally), callbacks=[(BeforeToolCallEvent, approve_all(log))]
    )
    result = await h.agent.invoke_async("hi")
    assert result.stop_reason == "interrupt" and len(result.interrupts) == 3
    final = await _resume(h.agent, how, {i.id: f"ok-{i.tool_use.id}" for i in result.interrupts})
    assert final.stop_reason == "end_turn" and str(final) == "done"
    assert sorted(e for e in log if e[1]) == [
        ("t1", True, "ok-t1"),
        ("t2", True, "ok-t2"),
        ("t3", True, "ok-t3"),
    ]
    assert tally.inputs("lookup") == ["a", "b", "c"]
    assert h.model_calls == 2


# --- 8: falsy answers; partial answers over several rounds ---------------------------------------


@pytest.mark.parametrize("answer", [False, 0, "", None, [], {}], ids=repr)
@pytest.mark.parametrize("form", ["map", "list"])
def test_falsy_answers_are_answers(answer, form, fresh):
    tally, got = Tally(), []

    def before(event):
        got.append((event.is_replay, event.interrupt("approve")))

    h = Harness(
        [[tu("t1", "lookup", query="a")], "done"],
        tools=make_tools(tally),
        callbacks=[(BeforeToolCallEvent, before)],
        fresh=fresh,
    )
    [pending] = h.run().interrupts
    if form == "map":
        final = h.resume({pending.id: answer})
    else:
        final = h.hop()([{"interruptResponse": {"interruptId": pending.id, "response": answer}}])
    assert final.stop_reason == "end_turn", final.interrupts
    assert got == [(True, answer)]  # the first pass stopped at interrupt(); the replay got it
    assert type(got[0][1]) is type(answer)
    assert tally.counts["lookup"] == 1


def test_partial_answers_concurrent_rounds(fresh):
    tally, log = Tally(), []
    h = Harness(
        BATCH3,
        tools=make_tools(tally),
        callbacks=[(BeforeToolCallEvent, approve_all(log))],
        fresh=fresh,
    )
    r1 = h.run()
    ids = {i.tool_use.id: i.id for i in r1.interrupts}
    assert list(ids) == ["t1", "t2", "t3"] and tally.inputs("lookup") == []

    r2 = h.resume({ids["t2"]: "yes"})
    assert r2.stop_reason == "interrupt"
    assert [i.id for i in r2.interrupts] == [ids["t1"], ids["t3"]]  # asked again, same ids
    assert tally.inputs("lookup") == ["b"]
    assert len(h.agent.messages) == 2  # still no (partial) tool-result message

    r3 = h.resume({ids["t3"]: 0})
    assert [i.id for i in r3.interrupts] == [ids["t1"]]
    assert tally.inputs("lookup") == ["b", "c"]

    r4 = h.resume({ids["t1"]: False})
    assert r4.stop_reason == "end_turn"
    assert tally.inputs("lookup") == ["b", "c", "a"]  # each ran exactly once
    assert h.model_calls == 2
    assert [r.text for r in tool_results(h.agent.messages)] == ["found a", "found b", "found c"]
    answers = {(tid, ans) for tid, replay, ans in log}
    assert answers == {("t1", False), ("t2", "yes"), ("t3", 0)}


def test_one_callback_asks_several_questions_over_rounds(fresh):
    tally, got = Tally(), []

    def before(event):
        first = event.interrupt("first")
        second = event.interrupt("second")
        got.append((first, second))

    h = Harness(
        [[tu("t1", "lookup", query="a")], "done"],
        tools=make_tools(tally),
        callbacks=[(BeforeToolCallEvent, before)],
        fresh=fresh,
    )
    r = h.run()
    assert [i.name for i in r.interrupts] == ["first"]
    r = h.resume({r.interrupts[0].id: 1})
    assert [i.name for i in r.interrupts] == ["second"]
    assert tally.counts["lookup"] == 0
    r = h.resume({r.interrupts[0].id: 2})
    assert r.stop_reason == "end_turn"
    assert got == [(1, 2)] and tally.counts["lookup"] == 1


# --- 9: bad input changes nothing ----------------------------------------------------------------


def _paused():
    tally, log = Tally(), []
    h = Harness(
        BATCH3, tools=make_tools(tally), callbacks=[(BeforeToolCallEvent, approve_all(log))]
    )
    result = h.run()
    return h, tally, result


BAD = {
    "unknown-id": (
        lambda ids: {"v1:before_tool_call:t9:nope": 1},
        UnknownInterruptError,
        "t9:nope",
    ),
    "known-and-unknown": (lambda ids: {ids[0]: 1, "bogus": 2}, UnknownInterruptError, "bogus"),
    "empty-map": (lambda ids: {}, ResumeInputError, "no answers"),
    "list-of-pairs": (lambda ids: [(ids[0], 1)], ResumeInputError, "list"),
    "a-string": (lambda ids: "yes", ResumeInputError, "str"),
    "none": (lambda ids: None, ResumeInputError, "NoneType"),
    "non-json-answer": (lambda ids: {ids[0]: object()}, ResumeInputError, "JSON"),
    "set-answer": (lambda ids: {ids[1]: {1, 2}}, ResumeInputError, "JSON"),
    "non-str-key": (lambda ids: {1: "x"}, ResumeInputError, "1"),
}


@pytest.mark.parametrize("case", list(BAD))
@pytest.mark.parametrize("api", ["sync", "async"])
async def test_bad_resume_input_raises_and_changes_nothing(case, api):
    make, error, words = BAD[case]
    h, tally, result = await asyncio.to_thread(_paused)
    ids = [i.id for i in result.interrupts]
    before = copy.deepcopy(h.agent.export_state())
    with pytest.raises(error, match=words) as info:
        if api == "sync":
            await asyncio.to_thread(h.agent.resume, make(ids))
        else:
            await h.agent.resume_async(make(ids))
    assert isinstance(info.value, ResumeError)
    assert h.agent.export_state() == before
    assert h.agent.is_paused and h.agent.interrupts == result.interrupts
    # still resumable, and nothing had run
    final = await h.agent.resume_async({i: "yes" for i in ids})
    assert final.stop_reason == "end_turn" and tally.inputs("lookup") == ["a", "b", "c"]


@pytest.mark.parametrize(
    "items,error",
    [
        ([{"interruptResponse": {"interruptId": "ID"}}], ResumeInputError),  # no response
        ([{"interruptResponse": "ID"}], ResumeInputError),
        ([{"interruptResponse": {"interruptId": "nope", "response": 1}}], UnknownInterruptError),
        ([{"interruptResponse": {"interruptId": ["ID"], "response": 1}}], ResumeInputError),
        ([{"interruptResponse": {"interruptId": {"id": "ID"}, "response": 1}}], ResumeInputError),
        ([{"interruptResponse": {"interruptId": "ID", "response": object()}}], ResumeInputError),
    ],
    ids=["no-response", "body-not-map", "unknown-id", "list-id", "dict-id", "non-json"],
)
def test_bad_list_form_raises_resume_error_and_changes_nothing(items, error):
    h, tally, result = _paused()
    real = result.interrupts[0].id

    def fill(x):
        if x == "ID":
            return real
        if isinstance(x, list):
            return [fill(v) for v in x]
        if isinstance(x, dict):
            return {k: fill(v) for k, v in x.items()}
        return x

    before = copy.deepcopy(h.agent.export_state())
    with pytest.raises(error):
        h.agent(fill(items))
    assert h.agent.export_state() == before and h.agent.is_paused
    assert tally.counts["lookup"] == 0


@pytest.mark.parametrize("prompt", ["a new question", [Text("blocks")]], ids=["text", "blocks"])
async def test_new_prompt_to_a_paused_agent_is_refused(prompt):
    h, _tally, _result = await asyncio.to_thread(_paused)
    before = copy.deepcopy(h.agent.export_state())
    with pytest.raises(AgentPausedError, match="approve"):
        await h.agent.invoke_async(prompt)
    with pytest.raises(AgentPausedError):
        async for _ in h.agent.stream_async(prompt):
            pass
    with pytest.raises(AgentPausedError):
        await asyncio.to_thread(h.agent, prompt)
    assert h.agent.export_state() == before and h.agent.is_paused
    assert h.model_calls == 1


def test_resume_when_not_paused_raises_and_changes_nothing():
    tally = Tally()
    h = Harness(["done"], tools=make_tools(tally))
    with pytest.raises(NotPausedError):
        h.agent.resume({"x": 1})
    assert h.agent.export_state()["messages"] == []
    assert h.run().stop_reason == "end_turn"
    before = copy.deepcopy(h.agent.export_state())
    with pytest.raises(NotPausedError):
        h.agent.resume({"x": 1})
    with pytest.raises(NotPausedError):
        h.agent([{"interruptResponse": {"interruptId": "x", "response": 1}}])
    assert h.agent.export_state() == before


async def test_a_refused_streamed_resume_raises_before_any_event_and_changes_nothing():
    h, _tally, result = await asyncio.to_thread(_paused)
    before = copy.deepcopy(h.agent.export_state())
    events = []
    with pytest.raises(UnknownInterruptError):
        async for event in h.agent.resume_stream_async({"v1:nope": True}):
            events.append(event)
    assert events == [] and h.agent.export_state() == before and h.agent.is_paused
    answers = {i.id: True for i in result.interrupts}
    events = [e async for e in h.agent.resume_stream_async(answers)]
    assert isinstance(events[-1], RunFinished) and events[-1].result.stop_reason != "interrupt"


def test_an_answered_interrupt_cannot_be_answered_again():
    h, tally, result = _paused()
    ids = [i.id for i in result.interrupts]
    h.agent.resume({ids[0]: "yes"})
    before = copy.deepcopy(h.agent.export_state())
    with pytest.raises(AlreadyAnsweredError) as refused:  # the first answer wins
        h.agent.resume({ids[0]: "yes"})
    assert (refused.value.code, refused.value.interrupt_id) == ("already_answered", ids[0])
    assert h.agent.export_state() == before
    assert tally.inputs("lookup") == ["a"]


# --- discard_pause -------------------------------------------------------------------------------


def test_discard_pause_records_pending_calls_as_cancelled(executor, fresh):
    tally = Tally()

    def before(event):
        if event.tool_use.id == "t2":
            event.interrupt("approve")

    turns = [
        [
            tu("t1", "lookup", query="a"),
            tu("t2", "lookup", query="b"),
            tu("t3", "lookup", query="c"),
        ],
        "fresh start",
    ]
    h = Harness(
        turns,
        tools=make_tools(tally),
        callbacks=[(BeforeToolCallEvent, before)],
        executor=executor,
        fresh=fresh,
    )
    assert h.run().stop_reason == "interrupt"
    agent = h.hop()
    agent.discard_pause()
    assert not agent.is_paused and agent.interrupts == []
    results = tool_results(agent.messages)
    assert [r.tool_use_id for r in results] == ["t1", "t2", "t3"]
    assert results[0].status == "success" and results[0].text == "found a"  # finished: kept
    assert results[1].status == "error" and "cancelled" in results[1].text
    if executor == "concurrent":
        assert results[2].text == "found c"
    else:
        assert results[2].status == "error" and "cancelled" in results[2].text
    assert_valid_conversation(agent.messages)
    ran = list(tally.inputs("lookup"))
    final = agent("new question")
    assert final.stop_reason == "end_turn" and str(final) == "fresh start"
    assert tally.inputs("lookup") == ran  # nothing ran because of the discard
    with pytest.raises(NotPausedError):
        agent.discard_pause()


def test_discard_pause_before_the_prompt_was_added():
    def before_model(event):
        event.interrupt("go")

    h = Harness(["one", "two"], callbacks=[(BeforeModelCallEvent, before_model)])
    assert h.run("q1").stop_reason == "interrupt"
    h.agent.discard_pause()
    assert [m.text for m in h.agent.messages] == ["q1"]
    assert not h.agent.is_paused and h.model_calls == 0
    second = h.agent("q2")  # a new invocation asks again, at its own boundary
    assert [i.id for i in second.interrupts] == [iid("before_model_call", "m2", "go")]
    assert h.agent.resume({second.interrupts[0].id: True}).stop_reason == "end_turn"
    assert h.model_calls == 1 and str(h.agent.messages[-1].text) == "one"


# --- 10: replayed callbacks can tell -------------------------------------------------------------


def test_only_the_interrupted_events_callbacks_run_again_and_know_it(fresh):
    tally = Tally()
    calls: list[tuple[str, str, bool]] = []

    def before_quiet(event):
        calls.append(("before-quiet", event.tool_use.id, event.is_replay))

    def before_ask(event):
        calls.append(("before-ask", event.tool_use.id, event.is_replay))
        if event.tool_use.id == "t2":
            event.interrupt("approve")

    def after(event):
        calls.append(("after", event.tool_use.id, event.is_replay))

    def before_model(event):
        calls.append(("model", str(len(event.agent.messages)), event.is_replay))

    h = Harness(
        [[tu("t1", "lookup", query="a"), tu("t2", "lookup", query="b")], "done"],
        tools=make_tools(tally),
        callbacks=[
            (BeforeToolCallEvent, before_quiet),
            (BeforeToolCallEvent, before_ask),
            (AfterToolCallEvent, after),
            (BeforeModelCallEvent, before_model),
        ],
        fresh=fresh,
    )
    h.run()
    assert sorted(calls) == sorted(
        [
            ("model", "1", False),
            ("before-quiet", "t1", False),
            ("before-ask", "t1", False),
            ("after", "t1", False),
            ("before-quiet", "t2", False),
            ("before-ask", "t2", False),
        ]
    )
    calls.clear()
    h.resume({h.agent.interrupts[0].id: "yes"})
    assert calls == [
        ("before-quiet", "t2", True),
        ("before-ask", "t2", True),  # replayed
        ("after", "t2", False),
        ("model", "3", False),  # new events: not replays
    ]
    assert tally.inputs("lookup") == ["a", "b"]


# --- streaming -----------------------------------------------------------------------------------


async def test_stream_yields_interrupt_raised_before_run_finished(executor):
    tally, log = Tally(), []
    h = Harness(
        BATCH3,
        tools=make_tools(tally),
        callbacks=[(BeforeToolCallEvent, approve_all(log))],
        executor=executor,
    )
    events = [e async for e in h.agent.stream_async("hi")]
    assert isinstance(events[-1], RunFinished)
    raised = [e.interrupt for e in events if isinstance(e, InterruptRaised)]
    assert raised == events[-1].result.interrupts == h.agent.interrupts
    assert len(raised) == (3 if executor == "concurrent" else 1)
    assert all(not isinstance(e, RunFinished) for e in events[:-1])

    while h.agent.is_paused:
        items = [
            {"interruptResponse": {"interruptId": i.id, "response": "y"}}
            for i in h.agent.interrupts
        ]
        events = [e async for e in h.agent.stream_async(items)]
        last = events[-1]
        assert isinstance(last, RunFinished)
        assert [
            e.interrupt for e in events if isinstance(e, InterruptRaised)
        ] == last.result.interrupts
    assert last.result.stop_reason == "end_turn"
    assert tally.inputs("lookup") == ["a", "b", "c"] and h.model_calls == 2


# --- cancel during a resumed run -----------------------------------------------------------------


async def test_cancel_during_a_resumed_run_leaves_a_consistent_agent(executor):
    tally = Tally()
    started = asyncio.Event()
    never = asyncio.Event()

    @tool
    async def slow(item: str) -> str:
        """Waits for ever."""
        tally.hit("slow", item)
        started.set()
        await never.wait()
        return "unreachable"

    def before(event):
        if event.tool_use.name == "slow":
            event.interrupt("approve")

    h = Harness(
        [
            [
                tu("t1", "lookup", query="a"),
                tu("t2", "slow", item="x"),
                tu("t3", "lookup", query="c"),
            ],
            "after cancel",
        ],
        tools=[slow, *make_tools(tally)],
        callbacks=[(BeforeToolCallEvent, before)],
        executor=executor,
    )
    first = await h.agent.invoke_async("hi")
    assert first.stop_reason == "interrupt"
    task = asyncio.ensure_future(h.agent.resume_async({first.interrupts[0].id: "yes"}))
    await started.wait()
    h.agent.cancel()
    result = await task
    assert result.stop_reason == "cancelled"
    assert not h.agent.is_paused and h.agent.interrupts == []
    assert_valid_conversation(h.agent.messages)
    results = tool_results(h.agent.messages)
    assert [r.tool_use_id for r in results] == ["t1", "t2", "t3"]
    assert results[0].text == "found a" and results[1].status == "error"
    final = await h.agent.invoke_async("again")
    assert final.stop_reason == "end_turn" and str(final) == "after cancel"
    assert_valid_conversation(h.agent.messages)
    assert tally.counts["slow"] == 1


# --- direct tool calls ---------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["body", "before_hook", "after_hook"])
@pytest.mark.parametrize("paused", [False, True])
def test_direct_tool_call_that_interrupts_raises_and_changes_nothing(where, paused):
    tally = Tally()

    def before(event):
        if where == "before_hook" or event.tool_use.id == "t1":
            event.interrupt("approve")

    def after(event):
        if where == "after_hook" and event.tool_use.id != "t1":
            event.interrupt("approve")

    h = Harness(
        [[tu("t1", "lookup", query="a")], "done"],
        tools=make_tools(tally),
        callbacks=[(BeforeToolCallEvent, before), (AfterToolCallEvent, after)],
    )
    if paused:
        assert h.run().stop_reason == "interrupt"
    before_state = copy.deepcopy(h.agent.export_state())
    with pytest.raises(DirectToolInterruptError) as info:
        if where == "body":
            h.agent.tool.confirm(item="x")
        else:
            h.agent.tool.lookup(query="direct")
    assert [i.name for i in info.value.interrupts] == (
        ["confirm"] if where == "body" else ["approve"]
    )
    assert h.agent.export_state() == before_state
    assert h.agent.is_paused is paused
    assert tally.counts["confirm_after"] == 0
    assert tally.inputs("lookup").count("direct") == (1 if where == "after_hook" else 0)
    assert tool_results(h.agent.messages) == []
    if paused:
        assert h.resume({h.agent.interrupts[0].id: 1}).stop_reason == "end_turn"


def test_direct_tool_call_with_answer_known_up_front_works():
    @tool
    def polite(context: ToolContext) -> str:
        """Asks with a default."""
        return f"got {context.interrupt('q', response='default')}"

    h = Harness(["done"], tools=[polite])
    result = h.agent.tool.polite()
    assert result.text == "got default"
    assert h.agent.messages == []


@pytest.mark.parametrize("where", ["message_added", "after_model", "tool_body"])
def test_discard_pause_anywhere_leaves_a_valid_conversation(where, fresh):
    from interlude.hooks import AfterModelCallEvent, MessageAddedEvent

    tally = Tally()

    def added(event):
        if event.message.tool_uses:
            event.interrupt("seen")

    def after_model(event):
        if len(event.agent.messages) == 1:
            event.interrupt("review")

    callbacks = {
        "message_added": [(MessageAddedEvent, added)],
        "after_model": [(AfterModelCallEvent, after_model)],
        "tool_body": [],
    }[where]
    first = [tu("t1", "lookup", query="a"), tu("t2", "confirm", item="b")]
    h = Harness([first, "after discard"], tools=make_tools(tally), callbacks=callbacks, fresh=fresh)
    assert h.run().stop_reason == "interrupt"
    agent = h.hop()
    agent.discard_pause()
    assert not agent.is_paused
    assert_valid_conversation(agent.messages)
    if where == "after_model":
        assert [m.role for m in agent.messages] == ["user"]  # the held-back reply is dropped
    else:
        results = tool_results(agent.messages)
        assert [r.tool_use_id for r in results] == ["t1", "t2"]
        assert all(
            r.status == "error" and "cancelled" in r.text for r in results[where == "tool_body" :]
        )
    ran = dict(tally.counts)
    assert agent("next").stop_reason == "end_turn"
    assert dict(tally.counts) == ran and tally.counts["confirm_after"] == 0
    assert_valid_conversation(agent.messages)
