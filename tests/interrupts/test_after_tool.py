"""Contract items 14-19: interrupts from AfterToolCallEvent (the seed's feature), hardened."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from interlude import Text, ToolResult, tool
from interlude.errors import InterludeError, ReplayedException, RetryLimitError
from interlude.hooks import AfterToolCallEvent, BeforeToolCallEvent

from .helpers_agent import (
    CustomToolError,
    Harness,
    Tally,
    assert_valid_conversation,
    iid,
    make_tools,
    tool_results,
    tu,
)


def _tools(tally: Tally) -> list[Any]:
    @tool
    def shout(query: str) -> str:
        """Upper-cases."""
        tally.hit("shout", query)
        return query.upper()

    return [*make_tools(tally), shout]


PATHS = {
    # path: (tool use, expected body runs by tool name, status, text contains)
    "returned": (tu("t1", "lookup", query="a"), {"lookup": 1}, "success", "found a"),
    "raised": (
        tu("t1", "fail_with", kind="custom", message="bad input"),
        {"fail_with": 1},
        "error",
        "bad input",
    ),
    "cancelled": (tu("t1", "lookup", query="a"), {}, "error", "not allowed"),
    "unknown": (tu("t1", "nope", x=1), {}, "error", "nope"),
    "swapped": (tu("t1", "lookup", query="a"), {"shout": 1}, "success", "A"),
}


@pytest.mark.parametrize("path", list(PATHS))
def test_after_tool_interrupt_on_every_path_replays_the_kept_data(path, executor, fresh):
    use, runs, status, text = PATHS[path]
    tally = Tally()
    tools = _tools(tally)
    seen: list[dict[str, Any]] = []

    def before(event):
        if event.tool_use.id != "t1":
            return
        if path == "cancelled":
            event.cancel("not allowed")
        if path == "swapped":
            event.tool = next(t for t in tools if t.name == "shout")

    def after(event):
        if event.tool_use.id != "t1":
            return
        seen.append(
            {
                "replay": event.is_replay,
                "tool_use": event.tool_use,
                "result": event.result,
                "exception": event.exception,
                "cancel_message": event.cancel_message,
                "tool": event.tool,
            }
        )
        seen[-1]["answer"] = event.interrupt("review", reason=event.result.text)

    h = Harness(
        [[use, tu("t2", "lookup", query="z")], "done"],
        tools=tools,
        callbacks=[(BeforeToolCallEvent, before), (AfterToolCallEvent, after)],
        executor=executor,
        fresh=fresh,
    )
    r = h.run()
    assert r.stop_reason == "interrupt"
    assert [i.id for i in r.interrupts] == [iid("after_tool_call", "t1", "review")]
    assert r.interrupts[0].tool_use == use
    assert tool_results(h.agent.messages) == []  # 15: the result is held back
    original = seen[0]
    assert original["result"].status == status and text in original["result"].text
    assert (original["cancel_message"] is not None) == (path == "cancelled")
    assert (original["exception"] is not None) == (path == "raised")
    if path == "unknown":
        assert original["tool"] is None
    else:
        expected_tool = "shout" if path == "swapped" else use.name
        assert original["tool"].name == expected_tool
    sibling = ("lookup", "z")
    body_runs = [x for x in tally.log if x != sibling]

    final = h.resume({i.id: "ok" for i in r.interrupts})
    assert final.stop_reason == "end_turn"
    replayed = next(s for s in seen[1:] if s["tool_use"].id == "t1")
    assert replayed["replay"] is True and replayed["answer"] == "ok"
    for key in ("tool_use", "result", "cancel_message"):
        assert replayed[key] == original[key], key
    assert replayed["tool"] is original["tool"]  # the same selected tool (None if none)
    if path == "raised":
        assert type(replayed["exception"]) is CustomToolError
        assert replayed["exception"].args == original["exception"].args == ("bad input",)
    else:
        assert replayed["exception"] is None
    assert [x for x in tally.log if x != sibling] == body_runs  # nothing ran again
    assert tally.log.count(sibling) == 1
    assert {k: v for k, v in tally.counts.items() if k != "lookup"} == {
        k: v for k, v in runs.items() if k != "lookup"
    }
    assert tally.inputs("lookup").count("a") == runs.get("lookup", 0)
    result = tool_results(h.agent.messages)[0]
    assert result == original["result"]  # 17: doing nothing keeps the kept result
    assert h.model_calls == 2
    assert_valid_conversation(h.agent.messages)


# --- 16: interrupt wins over retry in the same pass ----------------------------------------------


def test_interrupt_wins_over_retry_in_the_same_pass(executor, fresh):
    tally = Tally()
    passes: list[tuple[bool, Any]] = []

    def after(event):
        if event.tool_use.id != "t1":
            return
        if not event.is_replay:
            event.retry = True
        passes.append((event.is_replay, event.interrupt("check")))

    h = Harness(
        [[tu("t1", "lookup", query="a"), tu("t2", "lookup", query="b")], "done"],
        tools=make_tools(tally),
        callbacks=[(AfterToolCallEvent, after)],
        executor=executor,
        fresh=fresh,
    )
    r = h.run()
    assert r.stop_reason == "interrupt"
    assert tally.inputs("lookup").count("a") == 1  # the retry did not happen before the resume
    final = h.resume({r.interrupts[0].id: "fine"})
    assert final.stop_reason == "end_turn"
    assert passes == [(True, "fine")]
    assert tally.inputs("lookup") == ["a", "b"]  # replay did not retry: nothing ran again
    assert [x.text for x in tool_results(h.agent.messages)] == ["found a", "found b"]


# --- 17: what a replayed callback may do ---------------------------------------------------------


@pytest.mark.parametrize("action", ["keep", "rewrite", "retry"])
def test_replayed_after_hook_keeps_rewrites_or_retries(action, executor, fresh):
    tally = Tally()
    order: list[tuple[str, str, bool]] = []

    def before(event):
        order.append(("before", event.tool_use.id, event.is_replay))

    def after(event):
        order.append(("after", event.tool_use.id, event.is_replay))
        if event.result.status != "error":
            return
        answer = event.interrupt("decide", reason=event.result.text)
        if answer == "retry":
            event.retry = True
        elif answer == "rewrite":
            event.result = ToolResult(event.tool_use.id, "success", [Text("rewritten")])

    h = Harness(
        [[tu("t1", "flaky", key="k"), tu("t2", "lookup", query="b")], "done"],
        tools=make_tools(tally),
        callbacks=[(BeforeToolCallEvent, before), (AfterToolCallEvent, after)],
        executor=executor,
        fresh=fresh,
    )
    r = h.run()
    assert [i.id for i in r.interrupts] == [iid("after_tool_call", "t1", "decide")]
    order.clear()
    final = h.resume({r.interrupts[0].id: action})
    assert final.stop_reason == "end_turn"
    results = tool_results(h.agent.messages)
    assert [x.tool_use_id for x in results] == ["t1", "t2"]  # exactly one result per tool use
    t1 = results[0]
    if action == "keep":
        assert (t1.status, t1.text) == ("error", "CustomToolError: first attempt for k failed")
        assert tally.inputs("flaky") == ["k"]
    elif action == "rewrite":
        assert (t1.status, t1.text) == ("success", "rewritten")
        assert tally.inputs("flaky") == ["k"]
    else:
        assert (t1.status, t1.text) == ("success", "ok k")
        assert tally.inputs("flaky") == ["k", "k"]  # exactly once more
        t1_order = [o for o in order if o[1] == "t1"]
        assert t1_order == [("after", "t1", True), ("before", "t1", False), ("after", "t1", False)]
    assert tally.inputs("lookup") == ["b"]  # the sibling is never run again
    assert h.model_calls == 2
    assert_valid_conversation(h.agent.messages)


@pytest.mark.parametrize("finally_", ["keep", "retry"])
def test_re_interrupt_during_replay_keeps_the_kept_data(finally_, executor, fresh):
    """The seed's defect: a replayed after-hook that asks a new question must not lose the kept
    data; the next resume replays again with every answer so far."""
    tally = Tally()
    seen: list[dict[str, Any]] = []

    def after(event):
        if event.tool_use.id != "t1" or event.result.status != "error":
            return
        entry = {
            "replay": event.is_replay,
            "result": event.result,
            "exc": event.exception,
            "tool_use": event.tool_use,
            "tool": event.tool,
        }
        seen.append(entry)
        entry["first"] = event.interrupt("first")
        entry["second"] = event.interrupt("second")
        if entry["second"] == "retry" and event.is_replay:
            event.retry = True

    h = Harness(
        [
            [tu("t1", "fail_with", kind="value", message="v!"), tu("t2", "lookup", query="b")],
            "done",
        ],
        tools=make_tools(tally),
        callbacks=[(AfterToolCallEvent, after)],
        executor=executor,
        fresh=fresh,
    )
    r1 = h.run()
    assert [i.id for i in r1.interrupts] == [iid("after_tool_call", "t1", "first")]
    r2 = h.resume({r1.interrupts[0].id: "A"})
    assert r2.stop_reason == "interrupt"
    assert [i.id for i in r2.interrupts] == [iid("after_tool_call", "t1", "second")]
    assert tool_results(h.agent.messages) == []
    assert tally.counts["fail_with"] == 1
    r3 = h.resume({r2.interrupts[0].id: finally_})
    last_first = "A"
    if finally_ == "retry":  # the retried tool failed again: its after-hook asks afresh
        assert r3.stop_reason == "interrupt"
        assert [i.id for i in r3.interrupts] == [iid("after_tool_call", "t1", "first")]
        assert tally.counts["fail_with"] == 2
        r4 = h.resume({r3.interrupts[0].id: "B"})
        assert [i.id for i in r4.interrupts] == [iid("after_tool_call", "t1", "second")]
        r3 = h.resume({r4.interrupts[0].id: "keep"})
        last_first = "B"
    assert r3.stop_reason == "end_turn", r3.interrupts

    replays = [e for e in seen if e["replay"]]
    assert len(replays) == (2 if finally_ == "keep" else 4)
    for e in replays:  # the kept data, unchanged on both replays
        assert e["result"] == seen[0]["result"] and e["tool_use"] == seen[0]["tool_use"]
        assert type(e["exc"]) is ValueError and e["exc"].args == ("v!",)
        assert e["tool"].name == "fail_with"
    # every answer so far
    assert replays[-1]["first"] == last_first and replays[-1]["second"] == "keep"
    results = tool_results(h.agent.messages)
    assert [x.tool_use_id for x in results] == ["t1", "t2"]
    assert results[0].text == "ValueError: v!"
    if finally_ == "retry":  # ran exactly once more; it failed again and that result stands
        assert tally.counts["fail_with"] == 2
        assert [e["replay"] for e in seen] == [False, True, True, False, True, True]
    else:
        assert tally.counts["fail_with"] == 1
        assert [e["replay"] for e in seen] == [False, True, True]
    assert tally.inputs("lookup") == ["b"]


def test_replayed_retry_runs_the_tool_exactly_once_more_per_retry(executor, fresh):
    tally = Tally()

    def after(event):
        if event.tool_use.id != "t1" or event.result.status != "error":
            return
        if event.interrupt("decide") == "retry":
            event.retry = True

    h = Harness(
        [[tu("t1", "fail_with", kind="custom"), tu("t2", "lookup", query="b")], "done"],
        tools=make_tools(tally),
        callbacks=[(AfterToolCallEvent, after)],
        executor=executor,
        fresh=fresh,
        max_retries=5,
    )
    r = h.run()
    decide = r.interrupts[0].id
    for runs in (2, 3):  # each retry runs the tool exactly once more, then asks afresh
        r = h.resume({decide: "retry"})
        assert tally.counts["fail_with"] == runs
        assert [i.id for i in r.interrupts] == [decide]
    r = h.resume({decide: "give up"})
    assert r.stop_reason == "end_turn"
    assert tally.counts["fail_with"] == 3
    assert [x.tool_use_id for x in tool_results(h.agent.messages)] == ["t1", "t2"]


# --- 18: exceptions keep their type --------------------------------------------------------------


@pytest.mark.parametrize("kind,cls", [("custom", CustomToolError), ("value", ValueError)])
def test_replayed_exception_keeps_its_type_and_args(kind, cls, fresh):
    tally = Tally()
    got: list[BaseException] = []

    def after(event):
        if event.exception is not None:
            got.append(event.exception)
            event.interrupt("why")

    h = Harness(
        [[tu("t1", "fail_with", kind=kind, message="it broke")], "done"],
        tools=make_tools(tally),
        callbacks=[(AfterToolCallEvent, after)],
        fresh=fresh,
    )
    r = h.run()
    h.resume({r.interrupts[0].id: "ok"})
    original, replayed = got
    assert type(replayed) is cls and isinstance(replayed, cls)
    assert replayed.args == original.args == ("it broke",)
    assert str(replayed) == str(original)
    if fresh:
        assert replayed is not original
    else:
        assert replayed is original
    assert tally.counts["fail_with"] == 1


def test_exception_whose_class_cannot_be_rebuilt_becomes_replayed_exception():
    tally = Tally()
    got: list[BaseException] = []

    def after(event):
        if event.exception is not None:
            got.append(event.exception)
            event.interrupt("why")

    h = Harness(
        [[tu("t1", "fail_with", kind="local", message="lost class")], "done"],
        tools=make_tools(tally),
        callbacks=[(AfterToolCallEvent, after)],
        fresh=True,
    )
    r = h.run()
    assert h.resume({r.interrupts[0].id: "ok"}).stop_reason == "end_turn"
    original, replayed = got
    assert type(original).__name__ == "LocalError"
    assert isinstance(replayed, ReplayedException) and isinstance(replayed, InterludeError)
    assert replayed.type_name.endswith("fail_with.<locals>.LocalError")
    assert replayed.type_name.startswith(type(original).__module__)
    assert replayed.message == "lost class"
    assert "LocalError" in replayed.traceback_text and "lost class" in replayed.traceback_text
    assert "fail_with" in replayed.traceback_text
    assert tally.counts["fail_with"] == 1


# --- 19: a bound on retries ----------------------------------------------------------------------


@pytest.mark.parametrize("max_retries", [0, 1, 3])
def test_retry_is_bounded_with_a_clear_error(max_retries, executor):
    tally = Tally()

    def after(event):
        if event.tool_use.id == "t1":
            event.retry = True

    h = Harness(
        [[tu("t1", "fail_with", kind="custom"), tu("t2", "lookup", query="b")], "done"],
        tools=make_tools(tally),
        callbacks=[(AfterToolCallEvent, after)],
        executor=executor,
        max_retries=max_retries,
    )
    with pytest.raises(RetryLimitError, match=r"'fail_with'.*max_retries=" + str(max_retries)):
        h.run()
    assert tally.counts["fail_with"] == max_retries + 1
    assert not h.agent.is_paused
    assert_valid_conversation(h.agent.messages)


def test_retry_bound_error_is_not_masked_by_a_sibling_still_running():
    """Concurrent executor: a sibling earlier in the batch is still running when the retried
    tool hits the bound; the caller must get the RetryLimitError, not a CancelledError."""
    tally = Tally()

    @tool
    async def steady() -> str:
        """Takes a few loop turns."""
        for _ in range(50):
            await asyncio.sleep(0)
        tally.hit("steady")
        return "steady"

    @tool
    async def always_fails() -> str:
        """Raises at once."""
        tally.hit("always_fails")
        raise CustomToolError("no")

    def after(event):
        if event.tool_use.id == "t2":
            event.retry = True

    h = Harness(
        [[tu("t1", "steady"), tu("t2", "always_fails")], "done"],
        tools=[steady, always_fails],
        callbacks=[(AfterToolCallEvent, after)],
        executor="concurrent",
        max_retries=2,
    )
    with pytest.raises(RetryLimitError, match="'always_fails'"):
        h.run()
    assert tally.counts["always_fails"] == 3
    assert not h.agent.is_paused
    assert_valid_conversation(h.agent.messages)


def test_retry_count_survives_a_pause():
    """max_retries=2 bounds the retries of one tool use across pauses and processes."""
    tally = Tally()

    def after(event):
        event.retry = True
        if tally.counts["fail_with"] == 2:
            event.interrupt("mid")

    h = Harness(
        [[tu("t1", "fail_with", kind="custom")], "done"],
        tools=make_tools(tally),
        callbacks=[(AfterToolCallEvent, after)],
        fresh=True,
        max_retries=2,
    )
    r = h.run()
    assert r.stop_reason == "interrupt" and tally.counts["fail_with"] == 2
    with pytest.raises(RetryLimitError):
        h.resume({r.interrupts[0].id: "go on"})
    assert tally.counts["fail_with"] == 3  # one more run in the new agent, then the bound
