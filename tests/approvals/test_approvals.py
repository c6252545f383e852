"""Per-tool approval: the flag, answers with edits and notes, remembered decisions, checking
arguments before anyone is asked, an in-process approver, and a message sent with answers."""

from __future__ import annotations

import json
from typing import Annotated, Any

import pytest
from pydantic import AfterValidator

from interlude import Agent, Interrupt, Message, Text, ToolResult, ToolUse, tool
from interlude.errors import AnswerValidationError, ConfigurationError, ResumeInputError
from interlude.hooks import BeforeModelCallEvent, BeforeToolCallEvent
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel

EXECUTORS = ["concurrent", "sequential"]


class Payments:
    """A payment tool that needs approval, and a lookup that does not; both count runs."""

    def __init__(self, needs: Any = True) -> None:
        self.paid: list[tuple[int, str]] = []
        self.looked: list[str] = []

        @tool(needs_approval=needs)
        def pay(amount: int, to: str) -> str:
            """Pay someone.

            Args:
                amount: In euros.
                to: Who is paid.
            """
            self.paid.append((amount, to))
            return f"paid {amount} to {to}"

        @tool
        def lookup(name: str) -> str:
            """Look someone up."""
            self.looked.append(name)
            return f"{name} is known"

        self.tools = [pay, lookup]

    def agent(self, turns: list[Any], **kw: Any) -> Agent:
        return Agent(ScriptedModel(turns), tools=self.tools, **kw)


def pay(id: str, amount: int, to: str = "bob") -> ToolUse:
    return ToolUse(id, "pay", {"amount": amount, "to": to})


def results(agent: Agent, index: int) -> list[ToolResult]:
    return [b for b in agent.messages[index].content if isinstance(b, ToolResult)]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_flagged_tool_pauses_without_any_hook(executor: str) -> None:
    p = Payments()
    agent = p.agent(
        [[pay("t1", 10), ToolUse("t2", "lookup", {"name": "bob"})], "done"], tool_executor=executor
    )
    paused = agent("pay bob")
    [question] = paused.interrupts
    assert (question.name, question.source) == ("approval", "before_tool_call")
    assert question.tool_use == pay("t1", 10)
    assert question.reason == {"message": "May the agent run pay with this input?", "tool": "pay"}
    schema = question.response_schema
    assert schema is not None
    assert schema["anyOf"][1]["properties"]["input"]["properties"]["amount"]["type"] == "integer"
    # The lookup needs no approval: it ran, unless calls run one by one (it comes after pay).
    assert p.paid == [] and p.looked == (["bob"] if executor == "concurrent" else [])

    done = agent.resume({question.id: True}, by="ana")
    assert str(done) == "done" and p.paid == [(10, "bob")]
    assert [r.text for r in results(agent, 2)] == ["paid 10 to bob", "bob is known"]
    [entry] = agent.audit
    assert (entry.by, entry.answer, entry.tool, entry.shown) == (
        "ana",
        True,
        "pay",
        question.digest,
    )


@pytest.mark.parametrize("answer", [False, {"approve": False, "note": "too much"}])
def test_a_declined_call_never_runs_and_the_model_is_told(answer: Any) -> None:
    p = Payments()
    agent = p.agent([[pay("t1", 10)], "ok"])
    [question] = agent("pay bob").interrupts
    agent.resume({question.id: answer})
    assert p.paid == []
    [declined] = results(agent, 2)
    assert declined.status == "error"
    expected = "not approved: a person declined this tool call"
    if isinstance(answer, dict):
        expected += " (note: too much)"
    assert declined.text == expected


def test_a_rule_asks_only_about_the_calls_it_picks() -> None:
    p = Payments(needs=lambda call: call["amount"] > 100)
    agent = p.agent([[pay("t1", 5), pay("t2", 500, "eve")], "ok"])
    [question] = agent("pay").interrupts
    assert question.tool_use == pay("t2", 500, "eve") and p.paid == [(5, "bob")]
    agent.resume({question.id: True})
    assert p.paid == [(5, "bob"), (500, "eve")]


def test_the_flag_must_be_a_bool_or_a_rule() -> None:
    with pytest.raises(ConfigurationError, match="needs_approval"):

        @tool(needs_approval="yes")  # type: ignore[arg-type]
        def nope() -> None:
            """Nothing."""


@pytest.mark.parametrize("executor", EXECUTORS)
def test_approved_with_an_edit_runs_exactly_the_edited_call(executor: str) -> None:
    p = Payments()
    agent = p.agent([[pay("t1", 10)], "ok"], tool_executor=executor)
    [question] = agent("pay bob").interrupts
    edit = {"approve": True, "input": {"amount": 8, "to": "bob"}, "note": "capped"}
    agent.resume({question.id: edit}, by="ana")
    assert p.paid == [(8, "bob")]  # the edit, once; never the model's 10
    assert agent.messages[1].content == [pay("t1", 10)]  # the model's call, as it asked
    [result] = results(agent, 2)
    assert [b.text for b in result.content if isinstance(b, Text)] == [
        '[approved with edited input: the tool ran with {"amount": 8, "to": "bob"}, not the '
        "input asked]",
        "paid 8 to bob",
    ]
    [entry] = agent.audit  # both: the call shown (its digest) and the edit given
    assert entry.shown == question.digest and entry.answer["input"] == {"amount": 8, "to": "bob"}


@pytest.mark.parametrize(
    "edit, where",
    [
        ({"amount": "lots", "to": "bob"}, "input.amount"),
        ({"amount": 8}, "input"),  # 'to' is required
        ({"amount": 8, "to": "bob", "iban": "x"}, "input"),  # no such argument
    ],
)
def test_an_edit_the_tool_refuses_is_refused_and_nothing_changes(
    edit: dict[str, Any], where: str
) -> None:
    p = Payments()
    agent = p.agent([[pay("t1", 10)], "ok"])
    [question] = agent("pay bob").interrupts
    before = agent.export_state()
    with pytest.raises(AnswerValidationError, match=f"at {where}") as caught:
        agent.resume({question.id: {"approve": True, "input": edit}})
    assert caught.value.interrupt_id == question.id
    assert agent.export_state() == before and p.paid == []
    agent.resume({question.id: True})  # still answerable as it was
    assert p.paid == [(10, "bob")]


def positive(value: int) -> int:
    if value <= 0:
        raise ValueError("must be positive")
    return value


@tool(needs_approval=True)
def refund(amount: Annotated[int, AfterValidator(positive)]) -> str:
    """Refund."""
    return "ok"


def test_an_edit_the_schema_allows_but_the_tool_refuses_is_refused() -> None:
    agent = Agent(ScriptedModel([[ToolUse("t1", "refund", {"amount": 3})], "ok"]), tools=[refund])
    [question] = agent("refund").interrupts
    before = agent.export_state()
    with pytest.raises(AnswerValidationError, match="must be positive"):
        agent.resume({question.id: {"approve": True, "input": {"amount": -3}}})
    assert agent.export_state() == before


def test_a_decision_remembered_for_the_run_answers_later_calls_of_that_run_only() -> None:
    p = Payments()
    agent = p.agent([[pay("t1", 1)], [pay("t2", 2)], "ok", [pay("t3", 3)], "ok"])
    [question] = agent("pay twice").interrupts
    assert (
        agent.resume({question.id: {"approve": True, "remember": "run"}}, by="ana").stop_reason
        == "end_turn"
    )
    assert p.paid == [(1, "bob"), (2, "bob")]  # the second call was not asked about
    assert [(e.by, e.answer) for e in agent.audit] == [
        ("ana", {"approve": True, "remember": "run"}),
        ("decision:run", {"approve": True, "remembered": "run"}),
    ]
    assert agent.decisions == {}  # the run ended: its decisions with it
    [again] = agent("pay once more").interrupts  # a new invocation asks again
    assert again.tool_use == pay("t3", 3)


def test_run_decisions_are_kept_with_the_pause() -> None:
    p = Payments()
    agent = p.agent([[pay("t1", 1)], [pay("t2", 2), ToolUse("t3", "lookup", {"name": "x"})], "ok"])
    agent.tools["lookup"].needs_approval = True  # type: ignore[attr-defined]
    [question] = agent("pay").interrupts
    paused = agent.resume({question.id: {"approve": True, "remember": "run"}})
    [lookup_question] = paused.interrupts  # pay t2 ran by the decision; lookup waits
    assert p.paid == [(1, "bob"), (2, "bob")]
    assert agent.decisions == {"pay": {"approve": True, "scope": "run"}}
    state = json.loads(json.dumps(agent.export_state()))
    assert state["pause"]["progress"]["decisions"] == {"pay": {"approve": True}}
    copy = p.agent(["ok"])
    copy.tools["lookup"].needs_approval = True  # type: ignore[attr-defined]
    copy.import_state(state)
    assert copy.decisions == {"pay": {"approve": True, "scope": "run"}}
    copy.resume({lookup_question.id: True})
    assert p.looked == ["x"]


def test_a_session_decision_holds_in_a_fresh_agent_until_it_is_forgotten(tmp_path) -> None:
    path = tmp_path / "s.db"
    p = Payments()

    def agent(turns: list[Any]) -> Agent:
        return p.agent(turns, session=SQLiteStore(path), session_id="acct")

    first = agent([[pay("t1", 10)], "ok"])
    [question] = first("pay").interrupts
    first.resume({question.id: {"approve": False, "remember": "session", "note": "never"}})
    first.close()

    second = agent([[pay("t2", 20)], "ok"])
    assert second.decisions == {"pay": {"approve": False, "scope": "session", "note": "never"}}
    result = second("pay again")
    assert result.stop_reason == "end_turn" and p.paid == []  # declined without asking
    [declined] = results(second, len(second.messages) - 2)
    assert declined.text == (
        "not approved: a decision remembered for this session declines this tool (note: never)"
    )
    assert second.audit[-1].by == "decision:session"
    second.forget_decisions(by="ana")
    assert second.decisions == {}
    second.close()

    third = agent([[pay("t3", 30)], "ok"])
    assert third.decisions == {}
    [asked] = third("pay once more").interrupts  # asked again
    assert asked.name == "approval"
    assert [(e.name, e.by) for e in third.audit][-1] == ("forget_decisions", "ana")
    third.close()


def test_forgetting_one_tool_keeps_the_others() -> None:
    p = Payments()
    p.tools[1].needs_approval = True  # type: ignore[attr-defined]
    agent = p.agent([[pay("t1", 1), ToolUse("t2", "lookup", {"name": "x"})], "ok"])
    paused = agent("go")
    agent.resume({q.id: {"approve": True, "remember": "session"} for q in paused.interrupts})
    assert set(agent.decisions) == {"pay", "lookup"}
    agent.forget_decisions("pay")
    assert agent.decisions == {"lookup": {"approve": True, "scope": "session"}}


def test_a_signed_agent_counts_only_signed_decisions(tmp_path) -> None:
    path = tmp_path / "s.db"
    p = Payments()
    unsigned = p.agent([[pay("t1", 1)], "ok"], session=SQLiteStore(path), session_id="s")
    [question] = unsigned("pay").interrupts
    unsigned.resume({question.id: {"approve": True, "remember": "session"}})
    unsigned.close()
    key = b"k" * 32
    signed = p.agent(
        [[pay("t2", 2)], "ok"], session=SQLiteStore(path), session_id="s", signing_key=key
    )
    assert signed.decisions == {}  # written without the key: it does not count
    [asked] = signed("pay").interrupts
    signed.resume({asked.id: {"approve": True, "remember": "session"}})
    assert signed.decisions == {"pay": {"approve": True, "scope": "session"}}
    signed.close()


@pytest.mark.parametrize("executor", EXECUTORS)
def test_arguments_are_checked_before_anyone_is_asked(executor: str) -> None:
    p = Payments()
    seen: list[str] = []

    class Watch:
        def register_hooks(self, registry: Any) -> None:
            registry.add_callback(BeforeToolCallEvent, lambda e: seen.append(e.tool_use.id))

    agent = p.agent(
        [[ToolUse("t1", "pay", {"amount": "ten", "to": "bob"}), ToolUse("t2", "lookup", {})], "ok"],
        hooks=[Watch()],
        tool_executor=executor,
    )
    result = agent("pay")
    assert result.stop_reason == "end_turn"  # no question: the call could not run anyway
    assert seen == [] and p.paid == [] and p.looked == []
    bad_pay, bad_lookup = results(agent, 2)
    assert bad_pay.status == "error" and "invalid arguments for tool 'pay'" in bad_pay.text
    assert "amount" in bad_pay.text
    assert bad_lookup.status == "error" and "name: Field required" in bad_lookup.text


def test_an_approver_answers_what_it_can_and_leaves_the_rest_to_a_person() -> None:
    p = Payments()
    seen: list[str] = []

    def small_payments(question: Interrupt) -> Any:
        seen.append(question.id)
        assert question.tool_use is not None
        return True if question.tool_use.input["amount"] < 100 else None

    agent = p.agent([[pay("t1", 5), pay("t2", 500)], "ok"], approver=small_payments)
    paused = agent("pay")
    [left] = paused.interrupts
    assert left.tool_use == pay("t2", 500)
    assert p.paid == [(5, "bob")]
    assert [(e.by, e.answer) for e in agent.audit] == [("approver:small_payments", True)]
    assert len(seen) == 2  # asked once about each: the one it left is not put to it again
    agent.resume({left.id: True}, by="ana")
    assert p.paid == [(5, "bob"), (500, "bob")]
    assert [e.by for e in agent.audit] == ["approver:small_payments", "ana"]


async def test_an_async_approver_answers_any_question() -> None:
    class Ask:
        def register_hooks(self, registry: Any) -> None:
            registry.add_callback(BeforeModelCallEvent, lambda e: e.interrupt("go", "start?"))

    async def approve_all(question: Interrupt) -> Any:
        return "yes" if question.name == "go" else True

    p = Payments()
    agent = p.agent([[pay("t1", 5)], "ok"], hooks=[Ask()], approver=approve_all)
    result = await agent.invoke_async("pay")
    assert result.stop_reason == "end_turn" and p.paid == [(5, "bob")]
    assert {e.name for e in agent.audit} == {"go", "approval"}
    assert {e.by for e in agent.audit} == {"approver:approve_all"}


def test_an_approver_answer_is_checked_like_any_and_the_pause_is_kept() -> None:
    p = Payments()
    agent = p.agent([[pay("t1", 5)], "ok"], approver=lambda q: {"approve": "sure"})
    with pytest.raises(AnswerValidationError):
        agent("pay")
    assert agent.is_paused and p.paid == []
    [question] = agent.interrupts
    agent.approver = None
    agent.resume({question.id: True})
    assert p.paid == [(5, "bob")]


def test_the_approver_must_be_callable() -> None:
    with pytest.raises(ConfigurationError, match="approver"):
        Agent(ScriptedModel(["x"]), approver="ops")  # type: ignore[arg-type]


def test_a_message_with_the_answers_joins_the_tool_results() -> None:
    p = Payments()
    model = ScriptedModel([[pay("t1", 10)], "done"])
    agent = Agent(model, tools=p.tools)
    [question] = agent("pay").interrupts
    agent.resume({question.id: False}, message="Pay alice instead, 8 euros.")
    sent = model.requests[-1].messages[-1]
    assert sent.role == "user"
    assert isinstance(sent.content[0], ToolResult)
    assert sent.content[-1] == Text("Pay alice instead, 8 euros.")
    assert agent.messages[2] == sent


def test_a_message_at_a_pause_before_the_model_call_comes_first() -> None:
    class Gate:
        def register_hooks(self, registry: Any) -> None:
            registry.add_callback(
                BeforeModelCallEvent,
                lambda e: e.interrupt("go") if len(e.agent.messages) == 1 else None,
            )

    model = ScriptedModel(["hello"])
    agent = Agent(model, hooks=[Gate()])
    [question] = agent("hi").interrupts
    agent.resume({question.id: True}, message="Be brief.")
    assert [m.content for m in model.requests[0].messages] == [[Text("hi")], [Text("Be brief.")]]


def test_a_message_after_a_final_reply_is_answered() -> None:
    from interlude.hooks import AfterInvocationEvent

    class Review:
        def register_hooks(self, registry: Any) -> None:
            registry.add_callback(AfterInvocationEvent, lambda e: e.interrupt("review"))

    model = ScriptedModel(["draft", "better"])
    agent = Agent(model, hooks=[Review()])
    [question] = agent("write").interrupts
    done = agent.resume({question.id: "revise"}, message="Shorter, please.")
    assert model.requests[1].messages[-1] == Message("user", [Text("Shorter, please.")])
    assert done.stop_reason == "interrupt"  # the new reply is reviewed too
    [again] = done.interrupts
    assert str(agent.resume({again.id: "ok"})) == "better"


def test_a_message_must_be_text() -> None:
    p = Payments()
    agent = p.agent([[pay("t1", 10)], "ok"])
    [question] = agent("pay").interrupts
    for bad in ("", "   ", 3):
        with pytest.raises(ResumeInputError, match="message="):
            agent.resume({question.id: True}, message=bad)  # type: ignore[arg-type]
    assert agent.is_paused and p.paid == []


def test_a_session_decision_holds_in_a_fresh_process(tmp_path) -> None:
    import subprocess
    import sys
    from pathlib import Path

    key = "a-signing-key-of-32-characters!!"
    path = tmp_path / "s.db"
    p = Payments()
    agent = p.agent(
        [[pay("t1", 10)], "ok"], session=SQLiteStore(path), session_id="acct", signing_key=key
    )
    [question] = agent("pay").interrupts
    agent.resume({question.id: {"approve": True, "remember": "session"}}, by="ana")
    agent.close()
    child = Path(__file__).with_name("payments_child.py")
    run = subprocess.run(
        [sys.executable, str(child), str(path), "acct", key],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    out = json.loads(run.stdout)
    assert out == {
        "stop_reason": "end_turn",
        "questions": [],
        "paid": [[7, "eve"]],  # approved by the remembered decision, without a question
        "decisions": {"pay": {"approve": True, "scope": "session"}},
        "last_audit_by": "decision:session",
    }


def test_a_sub_agents_approval_travels_up_and_an_edit_travels_down() -> None:
    p = Payments()
    sub = Agent(ScriptedModel([[pay("s1", 10)], "Paid."]), tools=p.tools, name="billing")
    lead = Agent(
        ScriptedModel([[ToolUse("t1", "billing", {"prompt": "pay bob"})], "Billing paid."]),
        tools=[sub.as_tool(description="Pays people.")],
    )
    [question] = lead("settle up").interrupts
    assert question.name == "approval" and [u.name for u in question.via] == ["billing"]
    assert question.response_schema["anyOf"][1]["properties"]["input"]["required"] == [
        "amount",
        "to",
    ]
    with pytest.raises(AnswerValidationError):
        lead.resume({question.id: {"approve": True, "input": {"amount": "x", "to": "bob"}}})
    done = lead.resume({question.id: {"approve": True, "input": {"amount": 9, "to": "bob"}}})
    assert str(done) == "Billing paid." and p.paid == [(9, "bob")]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_ids_the_model_repeats_never_share_an_approval(executor: str) -> None:
    p = Payments()
    calls = [pay("a", 1), pay("a", 2), pay("a#2", 999)]  # the model itself sends "a#2"
    agent = p.agent([calls, [pay("a#3", 5)], "done"], tool_executor=executor)
    result = agent("go")
    asked: list[ToolUse] = []
    while result.stop_reason == "interrupt":
        asked += [q.tool_use for q in result.interrupts]
        result = agent.resume({q.id: True for q in result.interrupts}, by="ana")
    assert len({u.id for u in asked}) == 4  # one question per call, never one for two
    assert sorted(p.paid) == [(1, "bob"), (2, "bob"), (5, "bob"), (999, "bob")]  # each once
    first = results(agent, 2)
    assert [(r.tool_use_id, r.text) for r in first] == [
        ("a", "paid 1 to bob"),
        ("a", "paid 2 to bob"),
        ("a#2", "paid 999 to bob"),
    ]


def test_votes_for_a_question_that_changed_do_not_count() -> None:
    ran: list[str] = []
    shown_env = ["prod-eu"]

    @tool
    def deploy(env: str) -> str:
        """Deploy."""
        ran.append(env)
        return "ok"

    def two(event: BeforeToolCallEvent) -> None:
        event.tool_use = ToolUse(event.tool_use.id, "deploy", {"env": shown_env[0]})
        if event.interrupt("deploy", {"env": shown_env[0]}, quorum=2) is not True:
            event.cancel("no")

    agent = Agent(ScriptedModel([[ToolUse("t1", "deploy", {"env": "x"})], "done"]), tools=[deploy])
    agent.hooks.add_callback(BeforeToolCallEvent, two)
    [question] = agent("go").interrupts
    shown_env[0] = "prod-ALL"  # what the question shows changes before the second vote
    [again] = agent.resume({question.id: True}, by="ana").interrupts
    assert again.reason == {"env": "prod-ALL"} and again.id == question.id
    assert agent.export_state()["pause"]["progress"].get("votes") is None  # ana's vote is void
    still = agent.resume({again.id: True}, by="bo")
    assert still.stop_reason == "interrupt" and ran == []  # one vote for what runs: not enough
    agent.resume({again.id: True}, by="cy")
    assert ran == ["prod-ALL"]


def test_interlude_names_are_reserved() -> None:
    from interlude.errors import InterruptError

    def sneaky(event: BeforeToolCallEvent) -> None:
        event.interrupt("interlude.approval", "Is the customer verified?")

    p = Payments()
    agent = p.agent([[pay("t1", 10)], "ok"])
    agent.hooks.add_callback(BeforeToolCallEvent, sneaky)
    with pytest.raises(InterruptError, match="Interlude's own"):
        agent("pay")
    assert p.paid == []


def test_a_signed_decision_copied_from_another_session_does_not_count() -> None:
    key = b"k" * 32
    p = Payments()
    a = p.agent([[pay("t1", 5)], "ok"], signing_key=key)
    [question] = a("pay").interrupts
    a.resume({question.id: {"approve": True, "remember": "session"}}, by="ana")
    assert a.decisions == {"pay": {"approve": True, "scope": "session"}}
    other = p.agent([[pay("t9", 777)], "ok"], signing_key=key)
    state = other.export_state()
    state["audit"] = [a.export_state()["audit"][0]]  # a signed entry, from another session
    other.import_state(state)
    assert other.decisions == {}
    assert other("pay").stop_reason == "interrupt" and p.paid == [(5, "bob")]


def test_a_message_at_a_pause_on_the_final_reply_is_answered() -> None:
    from interlude.hooks import MessageAddedEvent

    def review(event: MessageAddedEvent) -> None:
        if event.message.role == "assistant" and not event.message.tool_uses:
            event.interrupt("review")

    model = ScriptedModel(["draft", "shorter"])
    agent = Agent(model)
    agent.hooks.add_callback(MessageAddedEvent, review)
    [question] = agent("write").interrupts
    paused = agent.resume({question.id: True}, message="Make it shorter.")
    assert model.requests[1].messages[-1] == Message("user", [Text("Make it shorter.")])
    [again] = paused.interrupts  # the new reply is reviewed too
    assert str(agent.resume({again.id: True})) == "shorter"


def test_a_message_at_a_before_model_pause_does_not_ask_again() -> None:
    asked: list[int] = []

    def gate(event: BeforeModelCallEvent) -> None:
        asked.append(len(event.agent.messages))
        event.interrupt("go")

    model = ScriptedModel(["hello"])
    agent = Agent(model)
    agent.hooks.add_callback(BeforeModelCallEvent, gate)
    [question] = agent("hi").interrupts
    done = agent.resume({question.id: True}, message="Be brief.")
    assert str(done) == "hello" and len(agent.audit) == 1  # answered once, not asked again
    assert [m.content for m in model.requests[0].messages] == [[Text("hi")], [Text("Be brief.")]]


def test_a_float_too_large_in_the_arguments_makes_them_unreadable() -> None:
    from interlude.models import ModelStop, TextDelta, ToolUseDelta, ToolUseStart

    p = Payments()

    class Raw:  # a provider adapter's events, as they stream
        async def stream(self, messages: Any, tool_specs: Any, system_prompt: Any, **kw: Any):
            if len(messages) > 1:
                yield TextDelta("ok")
                yield ModelStop("end_turn")
                return
            yield ToolUseStart("t1", "pay")
            yield ToolUseDelta("t1", '{"amount": 1e999, "to": "bob"}')
            yield ModelStop("tool_use")

    agent = Agent(Raw(), tools=p.tools)
    result = agent("pay")
    assert result.stop_reason == "end_turn" and p.paid == []  # no question, no run
    [bad] = results(agent, 2)
    assert bad.status == "error" and "not valid JSON" in bad.text


def test_a_sub_agents_quorum_is_counted_once_at_the_top() -> None:
    ran: list[str] = []

    @tool
    def deploy(env: str) -> str:
        """Deploy."""
        ran.append(env)
        return "deployed"

    def two(event: BeforeToolCallEvent) -> None:
        if event.interrupt("deploy", {"env": "prod"}, quorum=2) is not True:
            event.cancel("no")

    helper = Agent(
        ScriptedModel([[ToolUse("s1", "deploy", {"env": "prod"})], "Deployed."]),
        tools=[deploy],
        name="helper",
    )
    helper.hooks.add_callback(BeforeToolCallEvent, two)
    lead = Agent(
        ScriptedModel([[ToolUse("p1", "helper", {"prompt": "deploy"})], "Lead done."]),
        tools=[helper.as_tool()],
    )
    [question] = lead("go").interrupts
    assert lead.resume({question.id: True}, by="ana").stop_reason == "interrupt"
    done = lead.resume({question.id: True}, by="bo")  # two people: it runs, once
    assert str(done) == "Lead done." and ran == ["prod"]


def test_a_sub_agents_edit_the_tool_refuses_is_refused_at_the_top() -> None:
    sub = Agent(ScriptedModel([[ToolUse("s1", "refund", {"amount": 3})], "ok"]), tools=[refund])
    lead = Agent(
        ScriptedModel([[ToolUse("t1", "billing", {"prompt": "refund"})], "done"]),
        tools=[sub.as_tool(name="billing", description="Refunds.")],
    )
    [question] = lead("go").interrupts
    before = lead.export_state()
    with pytest.raises(AnswerValidationError, match="must be positive"):
        lead.resume({question.id: {"approve": True, "input": {"amount": -3}}})
    assert lead.export_state() == before


def test_an_in_process_approver_is_one_vote_of_a_quorum() -> None:
    """An approver answering a question that needs two people gives one vote; the run returns
    the pause (it did not raise: the approver was not asked to vote a second time), and one
    person's vote then settles it."""
    ran: list[str] = []

    @tool
    def deploy(env: str) -> str:
        """Deploy.

        Args:
            env: Where.
        """
        ran.append(env)
        return f"deployed to {env}"

    def two(event: BeforeToolCallEvent) -> None:
        if event.interrupt("deploy", {"env": "prod"}, quorum=2) is not True:
            event.cancel("not approved")

    agent = Agent(
        ScriptedModel([[ToolUse("t1", "deploy", {"env": "prod"})], "Deployed."]),
        tools=[deploy],
        approver=lambda question: True,
    )
    agent.hooks.add_callback(BeforeToolCallEvent, two)
    paused = agent("ship it")
    assert paused.stop_reason == "interrupt" and ran == []
    assert [(e.by, e.vote) for e in agent.audit] == [("approver:<lambda>", (1, 2))]
    done = agent.resume({paused.interrupts[0].id: True}, by="bo")
    assert str(done) == "Deployed." and ran == ["prod"]
