"""Batch approval: ``BeforeToolsEvent`` shows a whole tool batch once, before its calls run.

Also: a question that expired unanswered (``InterruptExpiredError``) in a before-tool callback
cancels the tool (or the batch) instead of failing the run.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from interlude import Agent, Interrupt, ToolResult, ToolUse, tool
from interlude.errors import ConfigurationError, HookEventWriteError, InterruptExpiredError
from interlude.hooks import (
    AfterToolCallEvent,
    BeforeModelCallEvent,
    BeforeToolCallEvent,
    BeforeToolsEvent,
    HookEvent,
)
from interlude.sessions import MemoryStore, SQLiteStore
from interlude.testing import ScriptedModel

from .helpers_agent import assert_valid_conversation, iid, tool_results, tu

BATCH = [
    tu("t1", "lookup", query="a"),
    tu("t2", "delete", path="/x"),
    tu("t3", "lookup", query="c"),
]
TURNS: list[Any] = [BATCH, "done"]


class Bench:
    """Agents with counting tools and recording hooks; several agents (one after another, as
    after a restart) share the counts, so "ran exactly once" holds across them."""

    def __init__(
        self,
        executor: str,
        batch_hook: Callable[[BeforeToolsEvent], None] | None = None,
        call_hook: Callable[[BeforeToolCallEvent], None] | None = None,
    ) -> None:
        self.executor = executor
        self.batch_hook = batch_hook
        self.call_hook = call_hook
        self.ran: Counter[str] = Counter()
        self.log: list[str] = []
        self.batches: list[tuple[bool, tuple[ToolUse, ...]]] = []  # (is_replay, tool uses)
        self.after: dict[str, str | None] = {}  # tool use id -> cancel message the hook saw
        self.models: list[ScriptedModel] = []

    def agent(self, turns: list[Any], **kw: Any) -> Agent:
        bench = self

        @tool
        def lookup(query: str) -> str:
            """Look something up.

            Args:
                query: What.
            """
            bench.ran[query] += 1
            return f"found {query}"

        @tool
        def delete(path: str) -> str:
            """Delete a file.

            Args:
                path: The file.
            """
            bench.ran[path] += 1
            return f"deleted {path}"

        def on_batch(event: BeforeToolsEvent) -> None:
            self.log.append("batch")
            self.batches.append((event.is_replay, event.tool_uses))
            assert self.batch_hook is not None
            self.batch_hook(event)

        def on_call(event: BeforeToolCallEvent) -> None:
            self.log.append(f"call {event.tool_use.id}")
            if self.call_hook is not None:
                self.call_hook(event)

        def on_after(event: AfterToolCallEvent) -> None:
            self.after[event.tool_use.id] = event.cancel_message

        model = ScriptedModel(turns)
        self.models.append(model)
        agent = Agent(model, tools=[lookup, delete], tool_executor=self.executor, **kw)
        if self.batch_hook is not None:
            agent.hooks.add_callback(BeforeToolsEvent, on_batch)
        agent.hooks.add_callback(BeforeToolCallEvent, on_call)
        agent.hooks.add_callback(AfterToolCallEvent, on_after)
        return agent


def approve_batch(event: BeforeToolsEvent) -> None:
    reason = [f"{u.name} {u.input}" for u in event.tool_uses]
    if event.interrupt("approve_batch", reason=reason) is not True:
        event.cancel("the user declined the batch")


def ask_for_deletes(event: BeforeToolCallEvent) -> None:
    if event.tool_use.name == "delete" and event.interrupt("approve") is not True:
        event.cancel("not approved")


def results(agent: Agent) -> list[tuple[str, str, str]]:
    return [(r.tool_use_id, r.status, r.text) for r in tool_results(agent.messages)]


def roundtrip(agent: Agent, bench: Bench, turns: list[Any]) -> Agent:
    """A fresh agent holding ``agent``'s state, through JSON text (as another process would)."""
    fresh = bench.agent(turns)
    fresh.import_state(json.loads(json.dumps(agent.export_state())))
    return fresh


BATCH_ID = iid("before_tools", "b1", "approve_batch")  # the batch is message 1


# --- approving and declining ---------------------------------------------------------------------


def test_approving_the_batch_runs_each_tool_once(executor):
    bench = Bench(executor, approve_batch)
    agent = bench.agent(TURNS)

    paused = agent("tidy up")
    assert paused.stop_reason == "interrupt"
    [question] = paused.interrupts
    assert question.id == BATCH_ID and question.source == "before_tools"
    assert question.reason == [
        "lookup {'query': 'a'}",
        "delete {'path': '/x'}",
        "lookup {'query': 'c'}",
    ]
    assert question.tool_use is None  # the batch, not one call
    assert bench.ran == Counter() and bench.log == ["batch"]  # no call has started
    assert tool_results(agent.messages) == []
    assert_valid_conversation(agent.messages, open_tail=True)

    done = agent.resume({BATCH_ID: True})
    assert done.stop_reason == "end_turn"
    assert bench.ran == Counter({"a": 1, "/x": 1, "c": 1})
    assert bench.log[:2] == ["batch", "batch"]  # asked again on resume, before any call
    assert sorted(bench.log[2:]) == ["call t1", "call t2", "call t3"]
    assert results(agent) == [
        ("t1", "success", "found a"),
        ("t2", "success", "deleted /x"),
        ("t3", "success", "found c"),
    ]
    # The resumed question showed the same batch, and knew it was a replay.
    assert [r for r, _ in bench.batches] == [False, True]
    assert bench.batches[0][1] == bench.batches[1][1] == tuple(BATCH)
    assert_valid_conversation(agent.messages)


def test_declining_the_batch_runs_nothing(executor):
    bench = Bench(executor, approve_batch)
    agent = bench.agent(TURNS)
    agent("tidy up")

    done = agent.resume({BATCH_ID: False})  # a falsy answer is an answer
    assert done.stop_reason == "end_turn"
    assert bench.ran == Counter()
    assert bench.log == ["batch", "batch"]  # per-call before-hooks do not run
    declined = "the user declined the batch"
    assert results(agent) == [(t, "error", declined) for t in ("t1", "t2", "t3")]
    # The model was told, and the after-hooks saw the cancellation.
    sent = bench.models[0].requests[-1].messages[-1].content
    assert [(r.tool_use_id, r.text) for r in sent if isinstance(r, ToolResult)] == [
        (t, declined) for t in ("t1", "t2", "t3")
    ]
    assert bench.after == {t: declined for t in ("t1", "t2", "t3")}
    assert_valid_conversation(agent.messages)


def test_cancel_tool_skips_one_call_and_the_others_go_on(executor):
    def no_deletes(event: BeforeToolsEvent) -> None:
        for use in event.tool_uses:
            if use.name == "delete":
                event.cancel_tool(use.id, f"{use.input['path']} is protected")
        assert event.cancelled == {"t2": "/x is protected"} and event.cancel_message is None

    bench = Bench(executor, no_deletes)
    agent = bench.agent(TURNS)
    assert agent("tidy up").stop_reason == "end_turn"
    assert bench.ran == Counter({"a": 1, "c": 1})
    assert sorted(bench.log) == ["batch", "call t1", "call t3"]  # t2's before-hooks skipped
    assert results(agent) == [
        ("t1", "success", "found a"),
        ("t2", "error", "/x is protected"),
        ("t3", "success", "found c"),
    ]


def test_cancel_tool_with_an_unknown_id_is_an_error():
    def wrong(event: BeforeToolsEvent) -> None:
        event.cancel_tool("t9")

    agent = Bench("concurrent", wrong).agent(TURNS)
    with pytest.raises(ConfigurationError, match=r"'t9'.*'t1', 't2', 't3'"):
        agent("tidy up")


def test_the_batch_fields_are_read_only():
    def write(event: BeforeToolsEvent) -> None:
        with pytest.raises(HookEventWriteError, match="tool_uses is read-only"):
            event.tool_uses = ()
        assert [t.name if t else None for t in event.tools] == ["lookup", "delete", "lookup"]

    bench = Bench("sequential", write)
    assert bench.agent(TURNS)("go").stop_reason == "end_turn"
    assert bench.log[0] == "batch"


def test_no_batch_callbacks_no_batch_event(executor):
    bench = Bench(executor)
    assert bench.agent(TURNS)("go").stop_reason == "end_turn"
    assert "batch" not in bench.log and sum(bench.ran.values()) == 3


# --- per-call hooks after the batch ------------------------------------------------------------


def test_per_call_hooks_still_run_and_can_interrupt_without_asking_the_batch_again(executor):
    bench = Bench(executor, approve_batch, ask_for_deletes)
    agent = bench.agent(TURNS)

    first = agent("tidy up")
    assert [q.id for q in first.interrupts] == [BATCH_ID]

    second = agent.resume({BATCH_ID: True})
    [question] = second.interrupts
    assert question.id == iid("before_tool_call", "t2", "approve")
    assert question.tool_use == BATCH[1]
    expected_ran = {"concurrent": {"a": 1, "c": 1}, "sequential": {"a": 1}}[executor]
    assert bench.ran == Counter(expected_ran)

    done = agent.resume({question.id: True})
    assert done.stop_reason == "end_turn"
    assert bench.log.count("batch") == 2  # first ask and its replay; not after the per-call pause
    assert bench.log.count("call t2") == 2  # its own replay
    assert bench.ran == Counter({"a": 1, "/x": 1, "c": 1})
    assert [r for r, _ in bench.batches] == [False, True]
    assert_valid_conversation(agent.messages)


def test_a_tool_body_interrupt_does_not_ask_the_batch_again(executor):
    from interlude import ToolContext

    asked: list[str] = []

    @tool
    def confirm(item: str, context: ToolContext) -> str:
        """Confirm an item.

        Args:
            item: Which.
        """
        asked.append(item)
        return f"{item}: {context.interrupt('sure')}"

    model = ScriptedModel([[tu("t1", "confirm", item="x")], "ok"])
    agent = Agent(model, tools=[confirm], tool_executor=executor)
    seen: list[bool] = []

    def approve(event: BeforeToolsEvent) -> None:
        seen.append(event.is_replay)
        assert event.interrupt("approve_batch") is True

    agent.hooks.add_callback(BeforeToolsEvent, approve)
    q1 = agent("go").interrupts[0]
    q2 = agent.resume({q1.id: True}).interrupts[0]
    assert q2.source == "tool_call" and asked == ["x"]
    assert agent.resume({q2.id: "yes"}).stop_reason == "end_turn"
    assert seen == [False, True] and asked == ["x", "x"]
    assert results(agent) == [("t1", "success", "x: yes")]


def test_answers_to_the_batch_are_kept_across_rounds_and_not_across_batches(executor):
    """Two questions on one batch answered one at a time; a later batch asks afresh."""

    def two_questions(event: BeforeToolsEvent) -> None:
        if event.interrupt("first") is not True:
            event.cancel("no")

    def second(event: BeforeToolsEvent) -> None:
        if event.interrupt("second") is not True:
            event.cancel("no")

    bench = Bench(executor, two_questions)
    turns: list[Any] = [BATCH[:1], [tu("t4", "lookup", query="d")], "done"]
    agent = bench.agent(turns)
    agent.hooks.add_callback(BeforeToolsEvent, second)

    both = agent("go").interrupts
    ids = [iid("before_tools", "b1", n) for n in ("first", "second")]
    assert [q.id for q in both] == ids
    again = agent.resume({ids[0]: True})  # only one answered: the other is asked again
    assert [q.id for q in again.interrupts] == ids[1:] and bench.ran == Counter()
    next_batch = agent.resume({ids[1]: True})  # "first" was remembered
    assert bench.ran == Counter({"a": 1})
    # The next batch is message 3: its questions have new ids and no answers yet.
    assert [q.id for q in next_batch.interrupts] == [
        iid("before_tools", "b3", n) for n in ("first", "second")
    ]
    assert bench.batches[-1] == (False, (tu("t4", "lookup", query="d"),))
    done = agent.resume({q.id: True for q in next_batch.interrupts})
    assert done.stop_reason == "end_turn" and bench.ran == Counter({"a": 1, "d": 1})


# --- persistence ---------------------------------------------------------------------------------


def test_state_round_trip_at_the_batch_question(executor):
    bench = Bench(executor, approve_batch, ask_for_deletes)
    agent = bench.agent(TURNS)
    agent("tidy up")
    state = agent.export_state()
    step = state["pause"]["step"]
    assert step["kind"] == "tool_batch" and "opened" not in step  # as older versions wrote it

    fresh = roundtrip(agent, bench, TURNS[1:])
    second = fresh.resume({BATCH_ID: True})
    [question] = second.interrupts
    assert question.id == iid("before_tool_call", "t2", "approve")
    assert [r for r, _ in bench.batches] == [False, True]
    assert bench.batches[1][1] == tuple(BATCH)  # the same batch, shown again after the restart

    third = roundtrip(fresh, bench, TURNS[1:])  # paused inside the opened batch
    assert third.resume({question.id: True}).stop_reason == "end_turn"
    assert bench.log.count("batch") == 2  # the third agent did not ask the batch again
    assert bench.ran == Counter({"a": 1, "/x": 1, "c": 1})
    assert_valid_conversation(third.messages)


def test_state_round_trip_keeps_the_calls_the_batch_cancelled(executor):
    def no_lookup_c(event: BeforeToolsEvent) -> None:
        if event.interrupt("approve_batch") is True:
            event.cancel_tool("t3", "c is off limits")

    bench = Bench(executor, no_lookup_c, ask_for_deletes)
    agent = bench.agent(TURNS)
    agent("go")
    question = agent.resume({BATCH_ID: True}).interrupts[0]
    state = agent.export_state()
    step = state["pause"]["step"]
    assert step["opened"] is True and step["cancelled"] == {"t3": "c is off limits"}

    fresh = roundtrip(agent, bench, TURNS[1:])
    assert fresh.resume({question.id: True}).stop_reason == "end_turn"
    assert bench.log.count("batch") == 2
    assert "call t3" not in bench.log
    assert bench.ran == Counter({"a": 1, "/x": 1})
    assert results(fresh)[2] == ("t3", "error", "c is off limits")


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
def test_session_store_round_trip(executor, store_kind, tmp_path):
    store = MemoryStore() if store_kind == "memory" else SQLiteStore(tmp_path / "s.db")

    def open_agent(bench: Bench, turns: list[Any]) -> Agent:
        reopened = store if store_kind == "memory" else SQLiteStore(tmp_path / "s.db")
        return bench.agent(turns, session=reopened, session_id="batch")

    bench = Bench(executor, approve_batch, ask_for_deletes)
    first = open_agent(bench, TURNS)
    assert [q.id for q in first("tidy up").interrupts] == [BATCH_ID]

    second = open_agent(bench, TURNS[1:])  # as a new process would
    assert second.is_paused
    [question] = second.resume({BATCH_ID: True}).interrupts
    assert question.source == "before_tool_call"

    third = open_agent(bench, TURNS[1:])
    assert third.resume({question.id: True}).stop_reason == "end_turn"
    assert [r for r, _ in bench.batches] == [False, True]  # not asked by the third agent
    assert bench.ran == Counter({"a": 1, "/x": 1, "c": 1})
    assert str(third.messages[-1].content[0].text) == "done"


# --- expired questions ---------------------------------------------------------------------------


def _expired(name: str, source: str, scope: str) -> InterruptExpiredError:
    question = Interrupt(id=iid(source, scope, name), name=name, source=source)
    return InterruptExpiredError(f"the question {name!r} expired", question)


def test_an_expired_question_cancels_its_tool_call_and_the_other_callbacks_run(executor):
    later: list[str] = []

    def expires(event: BeforeToolCallEvent) -> None:
        if event.tool_use.name == "delete":
            raise _expired("approve", "before_tool_call", event.tool_use.id)

    def also(event: BeforeToolCallEvent) -> None:
        later.append(event.tool_use.id)

    bench = Bench(executor, call_hook=expires)
    agent = bench.agent(TURNS)
    agent.hooks.add_callback(BeforeToolCallEvent, also)
    assert agent("go").stop_reason == "end_turn"
    assert sorted(later) == ["t1", "t2", "t3"]
    assert bench.ran == Counter({"a": 1, "c": 1})
    message = "not run: the question 'approve' expired without an answer"
    assert results(agent)[1] == ("t2", "error", message)
    assert bench.after["t2"] == message


def test_an_expired_question_without_its_interrupt_still_cancels():
    def expires(event: BeforeToolCallEvent) -> None:
        raise InterruptExpiredError("approval window closed")

    bench = Bench("sequential", call_hook=expires)
    agent = bench.agent([BATCH[:1], "done"])
    assert agent("go").stop_reason == "end_turn" and bench.ran == Counter()
    [(_, status, text)] = results(agent)
    assert status == "error" and "expired without an answer" in text
    assert "approval window closed" in text


def test_an_expired_batch_question_cancels_the_whole_batch(executor):
    def expires(event: BeforeToolsEvent) -> None:
        raise _expired("approve_batch", "before_tools", "b1")

    bench = Bench(executor, expires)
    agent = bench.agent(TURNS)
    assert agent("go").stop_reason == "end_turn"
    assert bench.ran == Counter() and bench.log == ["batch"]
    message = "not run: the question 'approve_batch' expired without an answer"
    assert results(agent) == [(t, "error", message) for t in ("t1", "t2", "t3")]


@pytest.mark.parametrize("event_type", [BeforeModelCallEvent, AfterToolCallEvent])
def test_an_expired_question_elsewhere_propagates(event_type: type[HookEvent]):
    def expires(event: HookEvent) -> None:
        raise InterruptExpiredError("too late")

    agent = Bench("sequential").agent([BATCH[:1], "done"])
    agent.hooks.add_callback(event_type, expires)
    with pytest.raises(InterruptExpiredError, match="too late"):
        agent("go")


# --- a call changed after the batch was approved -------------------------------------------------


def _changed(approved: str, changed: str) -> str:
    return (
        "not run: the call was changed after the batch was approved "
        f"(approved: {approved}; changed to: {changed})"
    )


def test_a_call_changed_after_the_batch_was_approved_does_not_run(executor):
    """The review's repro: the batch was approved showing amount 10; a per-call hook rewrote
    it to 1,000,000 and nobody approved that."""
    paid: list[tuple[str, int]] = []

    @tool
    def pay(to: str, amount: int) -> str:
        """Pay someone.

        Args:
            to: Whom.
            amount: How much.
        """
        paid.append((to, amount))
        return f"paid {to} {amount}"

    def fee(event: BeforeToolCallEvent) -> None:
        if event.tool_use.input["to"] == "ana":
            event.tool_use = ToolUse(
                event.tool_use.id, "pay", {**event.tool_use.input, "amount": 1_000_000}
            )

    uses = [tu("t1", "pay", to="ana", amount=10), tu("t2", "pay", to="bob", amount=5)]
    agent = Agent(ScriptedModel([uses, "done"]), tools=[pay], tool_executor=executor)
    agent.hooks.add_callback(BeforeToolsEvent, approve_batch)
    agent.hooks.add_callback(BeforeToolCallEvent, fee)

    [question] = agent("pay them").interrupts
    assert question.tool_use is None and question.reason == [
        "pay {'to': 'ana', 'amount': 10}",
        "pay {'to': 'bob', 'amount': 5}",
    ]
    done = agent.resume({question.id: True})
    assert done.stop_reason == "end_turn"
    assert paid == [("bob", 5)]  # the unchanged sibling ran, once; the changed call did not
    assert results(agent) == [
        (
            "t1",
            "error",
            _changed('pay {"amount": 10, "to": "ana"}', 'pay {"amount": 1000000, "to": "ana"}'),
        ),
        ("t2", "success", "paid bob 5"),
    ]
    assert_valid_conversation(agent.messages)


def test_a_call_switched_to_another_tool_after_the_batch_was_approved_does_not_run(executor):
    @tool
    def wipe(path: str) -> str:
        """Wipe a path.

        Args:
            path: Which.
        """
        raise AssertionError("must not run")

    def switch(event: BeforeToolCallEvent) -> None:
        if event.tool_use.id == "t2":
            event.tool = wipe

    bench = Bench(executor, approve_batch, switch)
    agent = bench.agent(TURNS)
    agent("tidy up")
    assert agent.resume({BATCH_ID: True}).stop_reason == "end_turn"
    assert bench.ran == Counter({"a": 1, "c": 1})
    assert results(agent)[1] == (
        "t2",
        "error",
        _changed('delete {"path": "/x"}', 'wipe {"path": "/x"}'),
    )
    assert bench.after["t2"] == results(agent)[1][2]  # after-hooks see why it did not run


def test_a_changed_call_runs_when_its_own_question_was_answered_for_the_change(executor):
    def redirect_and_ask(event: BeforeToolCallEvent) -> None:
        if event.tool_use.id == "t2":
            event.tool_use = tu("t2", "delete", path="/tmp/x")
            if event.interrupt("approve") is not True:
                event.cancel("not approved")

    bench = Bench(executor, approve_batch, redirect_and_ask)
    agent = bench.agent(TURNS)
    agent("tidy up")
    [question] = agent.resume({BATCH_ID: True}).interrupts
    assert question.id == iid("before_tool_call", "t2", "approve")
    assert question.tool_use == tu("t2", "delete", path="/tmp/x")  # the person sees the change

    assert agent.resume({question.id: True}).stop_reason == "end_turn"
    assert bench.ran == Counter({"a": 1, "/tmp/x": 1, "c": 1})
    assert results(agent)[1] == ("t2", "success", "deleted /tmp/x")
    assert bench.log.count("batch") == 2


def test_a_question_answered_before_a_later_change_is_asked_again_for_the_final_call(executor):
    def ask(event: BeforeToolCallEvent) -> None:
        if event.tool_use.id == "t2" and event.interrupt("approve") is not True:
            event.cancel("not approved")

    def redirect(event: BeforeToolCallEvent) -> None:
        if event.tool_use.id == "t2":
            event.tool_use = tu("t2", "delete", path="/tmp/x")

    bench = Bench(executor, approve_batch, ask)
    agent = bench.agent(TURNS)
    agent.hooks.add_callback(BeforeToolCallEvent, redirect)
    agent("tidy up")
    [question] = agent.resume({BATCH_ID: True}).interrupts
    assert question.tool_use == BATCH[1]  # asked before the change
    [again] = agent.resume({question.id: True}).interrupts  # answered, then changed: ask again
    assert again.id == question.id and again.tool_use == tu("t2", "delete", path="/tmp/x")
    assert "/tmp/x" not in bench.ran and "/x" not in bench.ran
    assert agent.resume({again.id: True}).stop_reason == "end_turn"
    assert bench.ran == Counter({"a": 1, "/tmp/x": 1, "c": 1})


def test_without_a_batch_answer_per_call_changes_are_not_restricted(executor):
    def look(event: BeforeToolsEvent) -> None:  # passes without asking anything
        assert len(event.tool_uses) == 3

    def redirect(event: BeforeToolCallEvent) -> None:
        if event.tool_use.id == "t2":
            event.tool_use = tu("t2", "delete", path="/tmp/x")

    bench = Bench(executor, look, redirect)
    agent = bench.agent(TURNS)
    assert agent("tidy up").stop_reason == "end_turn"
    assert bench.ran == Counter({"a": 1, "/tmp/x": 1, "c": 1})
    assert results(agent)[1] == ("t2", "success", "deleted /tmp/x")


def test_an_approved_call_replaced_by_an_equal_one_runs(executor):
    def same(event: BeforeToolCallEvent) -> None:
        use = event.tool_use
        event.tool_use = ToolUse("other-id", use.name, dict(use.input))  # equal name and input

    bench = Bench(executor, approve_batch, same)
    agent = bench.agent(TURNS)
    agent("tidy up")
    assert agent.resume({BATCH_ID: True}).stop_reason == "end_turn"
    assert bench.ran == Counter({"a": 1, "/x": 1, "c": 1})
    assert [s for _, s, _ in results(agent)] == ["success"] * 3


def test_state_round_trip_between_the_batch_answer_and_a_per_call_question(executor):
    def redirect_and_ask(event: BeforeToolCallEvent) -> None:
        if event.tool_use.id == "t2":
            event.tool_use = tu("t2", "delete", path="/tmp/x")
            if event.interrupt("approve") is not True:
                event.cancel("not approved")

    bench = Bench(executor, approve_batch, redirect_and_ask)
    agent = bench.agent(TURNS)
    agent("tidy up")
    [question] = agent.resume({BATCH_ID: True}).interrupts
    step = agent.export_state()["pause"]["step"]
    assert step["opened"] is True and step["approved"] is True

    fresh = roundtrip(agent, bench, TURNS[1:])
    assert fresh.resume({question.id: True}).stop_reason == "end_turn"
    assert bench.log.count("batch") == 2
    assert bench.ran == Counter({"a": 1, "/tmp/x": 1, "c": 1})
    assert_valid_conversation(fresh.messages)


def test_state_round_trip_keeps_the_batch_approval_binding(executor):
    """Paused at t1's own question; after a restart, t2 (changed, asking nothing) still does
    not run: the approval is kept with the batch."""

    def ask_t1_redirect_t2(event: BeforeToolCallEvent) -> None:
        if event.tool_use.id == "t1" and event.interrupt("approve") is not True:
            event.cancel("not approved")
        if event.tool_use.id == "t2":
            event.tool_use = tu("t2", "delete", path="/etc")

    bench = Bench(executor, approve_batch, ask_t1_redirect_t2)
    agent = bench.agent(TURNS)
    agent("tidy up")
    [question] = agent.resume({BATCH_ID: True}).interrupts
    assert question.id == iid("before_tool_call", "t1", "approve")
    assert agent.export_state()["pause"]["step"]["approved"] is True

    fresh = roundtrip(agent, bench, TURNS[1:])
    assert fresh.resume({question.id: True}).stop_reason == "end_turn"
    assert bench.ran == Counter({"a": 1, "c": 1})
    assert results(fresh)[1] == (
        "t2",
        "error",
        _changed('delete {"path": "/x"}', 'delete {"path": "/etc"}'),
    )


def test_a_batch_that_passed_without_an_answer_is_not_marked_approved():
    def look(event: BeforeToolsEvent) -> None:
        pass

    bench = Bench("sequential", look, ask_for_deletes)
    agent = bench.agent(TURNS)
    agent("tidy up")
    step = agent.export_state()["pause"]["step"]
    assert step["opened"] is True and "approved" not in step  # written only when set
