"""Contract items 20-22: interrupts around model calls, invocations and appended messages."""

from __future__ import annotations

import json
from typing import Any

import pytest

from interlude import Agent, AgentResult, Message, Text
from interlude.hooks import (
    AfterInvocationEvent,
    AfterModelCallEvent,
    BeforeInvocationEvent,
    BeforeModelCallEvent,
    MessageAddedEvent,
)
from interlude.testing import FunctionModel

from .helpers_agent import (
    CustomToolError,
    Harness,
    Tally,
    assert_valid_conversation,
    iid,
    make_tools,
    tu,
)

TOOL_THEN_TEXT = [[tu("t1", "lookup", query="a")], "done"]


def _roles(agent: Agent) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in agent.messages]


# --- 20: before the model call -------------------------------------------------------------------


def test_before_model_call_the_model_is_not_called_until_resume(fresh):
    tally = Tally()
    seen: list[tuple[int, bool]] = []

    def before(event):
        seen.append((len(event.agent.messages), event.is_replay))
        event.interrupt("go")

    h = Harness(
        TOOL_THEN_TEXT,
        tools=make_tools(tally),
        callbacks=[(BeforeModelCallEvent, before)],
        fresh=fresh,
    )
    r1 = h.run()
    assert [i.id for i in r1.interrupts] == [iid("before_model_call", "m1", "go")]
    assert h.model_calls == 0 and _roles(h.agent) == [("user", "hi")]

    r2 = h.resume({r1.interrupts[0].id: "yes"})  # first call happens, tools run, asks again
    assert [i.id for i in r2.interrupts] == [iid("before_model_call", "m3", "go")]
    assert h.model_calls == 1 and tally.inputs("lookup") == ["a"]

    r3 = h.resume({r2.interrupts[0].id: "yes"})
    assert r3.stop_reason == "end_turn" and str(r3) == "done"
    assert h.model_calls == 2 and tally.inputs("lookup") == ["a"]
    assert seen == [(1, False), (1, True), (3, False), (3, True)]
    assert len(h.agent.messages) == 4
    assert_valid_conversation(h.agent.messages)


# --- 21: after the model call --------------------------------------------------------------------


def test_after_model_call_response_is_kept_and_the_model_not_called_again(fresh):
    tally = Tally()
    seen: list[tuple[str, bool, Any]] = []

    def after(event):
        text = event.response.message.text
        uses = [u.id for u in event.response.message.tool_uses]
        seen.append((text or ",".join(uses), event.is_replay, None))
        seen[-1] = (seen[-1][0], seen[-1][1], event.interrupt("review"))

    h = Harness(
        TOOL_THEN_TEXT,
        tools=make_tools(tally),
        callbacks=[(AfterModelCallEvent, after)],
        fresh=fresh,
    )
    r1 = h.run()
    assert [i.id for i in r1.interrupts] == [iid("after_model_call", "m1", "review")]
    assert h.model_calls == 1 and _roles(h.agent) == [("user", "hi")]  # response not yet appended
    assert tally.counts["lookup"] == 0

    r2 = h.resume({r1.interrupts[0].id: "ok"})
    assert [i.id for i in r2.interrupts] == [iid("after_model_call", "m3", "review")]
    assert h.model_calls == 2 and tally.inputs("lookup") == ["a"]
    assert [m.tool_uses for m in h.agent.messages].count([tu("t1", "lookup", query="a")]) == 1

    r3 = h.resume({r2.interrupts[0].id: "ok"})
    assert r3.stop_reason == "end_turn" and str(r3) == "done"
    assert h.model_calls == 2 and tally.inputs("lookup") == ["a"]
    assert seen == [
        ("t1", False, None),
        ("t1", True, "ok"),
        ("done", False, None),
        ("done", True, "ok"),
    ]
    assert len(h.agent.messages) == 4
    assert_valid_conversation(h.agent.messages)


def test_after_model_call_replayed_hook_may_still_retry(fresh):
    seen: list[tuple[str, bool]] = []

    def after(event):
        seen.append((event.response.message.text, event.is_replay))
        if event.interrupt("review") == "again" and event.is_replay:
            event.retry = True

    h = Harness(
        ["first draft", "second draft"], callbacks=[(AfterModelCallEvent, after)], fresh=fresh
    )
    r = h.run()
    assert h.model_calls == 1
    again = h.resume({r.interrupts[0].id: "again"})
    assert h.model_calls == 2  # exactly one more call
    # The retried call's after-hook asks afresh (answers do not carry over a retry).
    assert again.stop_reason == "interrupt"
    assert [i.id for i in again.interrupts] == [r.interrupts[0].id]
    final = h.resume({again.interrupts[0].id: "ok"})
    assert final.stop_reason == "end_turn" and str(final) == "second draft"
    assert h.model_calls == 2
    assert seen == [
        ("first draft", False),
        ("first draft", True),
        ("second draft", False),
        ("second draft", True),
    ]
    assert _roles(h.agent) == [("user", "hi"), ("assistant", "second draft")]


class _FailingOnce:
    """A model function that raises on its first call and answers afterwards."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: Any) -> str:
        self.calls += 1
        if self.calls == 1:
            raise CustomToolError("model overloaded")
        return "recovered"


def _model_failure_agent(fn: _FailingOnce, seen: list[Any]) -> Agent:
    agent = Agent(FunctionModel(fn))

    def after(event):
        seen.append((event.exception, event.is_replay))
        if (
            event.exception is not None
            and event.interrupt("model_failed") == "retry"
            and event.is_replay
        ):
            event.retry = True

    agent.hooks.add_callback(AfterModelCallEvent, after)
    return agent


@pytest.mark.parametrize("answer", ["retry", "give up"])
def test_after_model_call_kept_exception_keeps_its_type(answer, fresh):
    fn, seen = _FailingOnce(), []
    agent = _model_failure_agent(fn, seen)
    r = agent("hi")
    assert r.stop_reason == "interrupt" and fn.calls == 1
    if fresh:
        data = json.loads(json.dumps(agent.export_state()))
        agent = _model_failure_agent(fn, seen)
        agent.import_state(data)
    answers = {r.interrupts[0].id: answer}
    if answer == "retry":
        final = agent.resume(answers)
        assert final.stop_reason == "end_turn" and str(final) == "recovered"
        assert fn.calls == 2
    else:
        with pytest.raises(CustomToolError, match="model overloaded"):
            agent.resume(answers)
        assert fn.calls == 1
        assert not agent.is_paused
        assert_valid_conversation(agent.messages)
    original, replayed = seen[0][0], seen[1][0]
    assert seen[1][1] is True
    assert type(replayed) is CustomToolError and replayed.args == original.args == (
        "model overloaded",
    )


# --- 22: invocation boundaries and appended messages ---------------------------------------------


def test_before_invocation_prompt_is_appended_once_after_resume(fresh):
    tally = Tally()
    asked: list[tuple[str, bool]] = []

    def ask(name):
        def callback(event):
            asked.append((name, event.is_replay))
            assert event.prompt.text == "hi"
            event.interrupt(name)

        return callback

    h = Harness(
        TOOL_THEN_TEXT,
        tools=make_tools(tally),
        callbacks=[(BeforeInvocationEvent, ask("policy")), (BeforeInvocationEvent, ask("budget"))],
        fresh=fresh,
    )
    r1 = h.run("hi")
    ids = {i.name: i.id for i in r1.interrupts}
    assert ids == {
        "policy": iid("before_invocation", "m0", "policy"),
        "budget": iid("before_invocation", "m0", "budget"),
    }
    assert h.agent.messages == [] and h.model_calls == 0

    r2 = h.resume({ids["policy"]: True})  # a subset
    assert [i.name for i in r2.interrupts] == ["budget"]
    assert h.agent.messages == [] and h.model_calls == 0

    r3 = h.resume({ids["budget"]: 10})
    assert r3.stop_reason == "end_turn"
    assert [m.text for m in h.agent.messages if m.role == "user" and m.text] == ["hi"]
    assert h.model_calls == 2 and tally.inputs("lookup") == ["a"]
    assert asked == [
        ("policy", False),
        ("budget", False),
        ("policy", True),
        ("budget", True),
        ("policy", True),
        ("budget", True),
    ]


@pytest.mark.parametrize("rewrite", [False, True])
def test_after_invocation_result_is_kept_and_may_be_rewritten(rewrite, fresh):
    tally = Tally()
    seen: list[tuple[str, str, bool]] = []

    def after(event):
        seen.append((event.result.stop_reason, str(event.result), event.is_replay))
        event.interrupt("publish")
        if rewrite:
            event.result = AgentResult(
                stop_reason="end_turn",
                message=Message("assistant", [Text("rewritten")]),
                usage=event.result.usage,
            )

    h = Harness(
        TOOL_THEN_TEXT,
        tools=make_tools(tally),
        callbacks=[(AfterInvocationEvent, after)],
        fresh=fresh,
    )
    r1 = h.run()
    assert [i.id for i in r1.interrupts] == [iid("after_invocation", "m3", "publish")]
    assert r1.message is None and h.model_calls == 2 and tally.inputs("lookup") == ["a"]
    snapshot = [m.to_dict() for m in h.agent.messages]

    final = h.resume({r1.interrupts[0].id: "yes"})
    assert final.stop_reason == "end_turn"
    assert str(final) == ("rewritten" if rewrite else "done")
    assert final.usage == r1.usage
    assert seen == [("end_turn", "done", False), ("end_turn", "done", True)]
    assert h.model_calls == 2 and tally.inputs("lookup") == ["a"]
    assert [m.to_dict() for m in h.agent.messages] == snapshot  # nothing appended twice
    assert not h.agent.is_paused


@pytest.mark.parametrize("role", ["user", "assistant"])
def test_message_added_message_is_kept_and_not_appended_twice(role, fresh):
    tally = Tally()
    seen: list[tuple[str, bool]] = []

    def added(event):
        m = event.message
        if m.role == role and (m.tool_uses or m.text == "hi"):
            seen.append((m.role, event.is_replay))
            event.interrupt("seen")

    h = Harness(
        TOOL_THEN_TEXT, tools=make_tools(tally), callbacks=[(MessageAddedEvent, added)], fresh=fresh
    )
    r1 = h.run()
    scope = "m0" if role == "user" else "m1"
    assert [i.id for i in r1.interrupts] == [iid("message_added", scope, "seen")]
    assert len(h.agent.messages) == (1 if role == "user" else 2)
    assert h.model_calls == (0 if role == "user" else 1)
    assert tally.counts["lookup"] == 0  # the batch has not started

    final = h.resume({r1.interrupts[0].id: "ok"})
    assert final.stop_reason == "end_turn" and str(final) == "done"
    assert h.model_calls == 2 and tally.inputs("lookup") == ["a"]
    assert _roles(h.agent) == [
        ("user", "hi"),
        ("assistant", ""),
        ("user", ""),
        ("assistant", "done"),
    ]
    assert seen == [(role, False), (role, True)]
    assert_valid_conversation(h.agent.messages)
