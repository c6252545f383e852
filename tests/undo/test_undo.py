"""``agent.undo``: the compensations of the calls after a checkpoint run newest first, once
each, and the session is cut back to the checkpoint, on every kind of store."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from interlude import Agent, UndoPlan, tool
from interlude.errors import UndoError, UnknownCheckpointError
from interlude.sessions import MemoryStore, open_store
from tests.sessions.stores import KINDS, store_url

from .undo_agent import EFFECTS, Calls, build


@pytest.fixture(autouse=True)
def _no_effects() -> None:
    EFFECTS.clear()


def booked(store: Any = None, session_id: str | None = None, **kw: Any) -> Agent:
    agent = build(None, store, session_id, **kw)
    result = agent("Book me a trip")
    assert str(result) == "Your trip is booked."
    assert EFFECTS == ["pay 120", "flight Lisbon", "hotel 3", "car 2", "mail ana@example.com"]
    EFFECTS.clear()
    return agent


def dump(store: Any, session_id: str) -> Any:
    return asyncio.run(store.load(session_id))


def undo_entries(agent: Agent) -> list[dict[str, Any]]:
    return [dict(e.answer, by=e.by) for e in agent.audit if e.name == "undo"]  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["memory", *KINDS])
def test_a_five_call_run_undone_to_after_its_second_call(
    kind: str, request: Any, tmp_path: Any
) -> None:
    store = (
        MemoryStore()
        if kind == "memory"
        else open_store(store_url(kind, tmp_path, request.addfinalizer))
    )
    agent = booked(store, "trip-1")
    result = agent.undo(to="m4", by="ana")
    assert result.stop_reason == "undone" and result.interrupts == []
    # 5, 4, 3, newest first, once each; the first two calls stand
    assert EFFECTS == [
        "retract mail to ana@example.com",
        "return car 2 days",
        "cancel hotel 3 nights",
    ]
    entries = undo_entries(agent)
    assert [(e["call"], e["compensation"], e["status"], e["by"]) for e in entries] == [
        ("c5", "mail.undo", "success", "ana"),
        ("c4", "car.undo", "success", "ana"),
        ("c3", "cancel_hotel", "success", "ana"),
    ]
    assert entries[1]["result"] == "car returned" and entries[0]["checkpoint"] == "m4"
    # the session stands at the checkpoint: the conversation as it was there
    assert len(agent.messages) == 5 and agent.needs_recovery and not agent.is_paused
    assert agent.state == {"car": "returned"}  # put back by the compensation itself
    stored = dump(store, "trip-1")
    assert len(stored.messages) == 5 and stored.pause is not None and stored.claim is None
    # a fresh agent reads the same session, and carries the run on from the checkpoint
    again = build(None, store, "trip-1")
    assert [p.id for p in again.checkpoints()][-1] == "m4"
    assert undo_entries(again) == entries
    finished = again.recover()
    assert str(finished) == "Your trip is booked."
    assert EFFECTS[3:] == ["hotel 3", "car 2", "mail ana@example.com"]
    if hasattr(store, "close"):
        store.close()


def test_a_dry_run_returns_the_plan_and_changes_nothing() -> None:
    store = MemoryStore()
    agent = booked(store, "s")
    before, exported = dump(store, "s"), agent.export_state()
    plan = agent.undo(to="m4", dry_run=True)
    assert isinstance(plan, UndoPlan)
    assert [(s.call_id, s.tool, s.compensation) for s in plan.steps] == [
        ("c5", "mail", "mail.undo"),
        ("c4", "car", "car.undo"),
        ("c3", "hotel", "cancel_hotel"),
    ]
    assert plan.steps[2].input == {"nights": 3} and plan.steps[2].result == "H-3"
    assert (plan.keep, plan.stands, plan.skipped) == (5, "stopped", ())
    assert plan.lines()[0] == "c5  mail  -> mail.undo"
    assert EFFECTS == [] and dump(store, "s") == before and agent.export_state() == exported
    assert plan.to_dict()["steps"][0]["call_id"] == "c5"


def test_a_call_without_a_compensation_stops_the_undo_before_anything_runs() -> None:
    store = MemoryStore()
    agent = booked(store, "s", plain=True)
    before = dump(store, "s")
    with pytest.raises(UndoError, match=r"c5 \(mail\) has no compensation") as caught:
        agent.undo(to="m4", by="ana")
    assert caught.value.calls == ("c5",)
    assert EFFECTS == [] and dump(store, "s") == before
    # skipped, it is left as it is and recorded so
    assert agent.undo(to="m4", by="ana", skip=["c5"]).stop_reason == "undone"
    assert EFFECTS == ["return car 2 days", "cancel hotel 3 nights"]
    skipped = [e for e in undo_entries(agent) if e.get("skipped")]
    assert [(e["call"], e["tool"], e["by"]) for e in skipped] == [("c5", "mail", "ana")]


def test_bad_undo_requests_name_the_problem_and_change_nothing() -> None:
    store = MemoryStore()
    agent = booked(store, "s")
    before = dump(store, "s")
    with pytest.raises(UnknownCheckpointError, match="no checkpoint 'm99'"):
        agent.undo(to="m99")
    with pytest.raises(UndoError, match="skip= names calls that are not among") as caught:
        agent.undo(to="m8", skip=["c1"])
    assert caught.value.calls == ("c1",)
    assert EFFECTS == [] and dump(store, "s") == before


def test_an_undo_to_the_last_reply_changes_nothing_and_one_to_the_prompt_undoes_all() -> None:
    agent = booked()
    assert agent.undo(to="m11").stop_reason == "undone"
    assert EFFECTS == [] and len(agent.messages) == 12 and not agent.needs_recovery
    agent.undo(to="m0", by="bo")
    assert EFFECTS == [
        "retract mail to ana@example.com",
        "return car 2 days",
        "cancel hotel 3 nights",
        "cancel flight F-Lisbon",
        "refund 120 (r-120)",
    ]
    assert len(agent.messages) == 1 and agent.needs_recovery


def test_an_undo_to_a_final_reply_leaves_the_agent_between_runs() -> None:
    calls = Calls()
    agent = build(calls.model)
    agent("Book me a trip")
    agent("And again")  # the model's script sees five results: it replies at once
    EFFECTS.clear()
    agent.undo(to="m11")
    assert EFFECTS == [] and len(agent.messages) == 12
    assert not agent.needs_recovery and not agent.is_paused


def test_a_compensation_that_needs_approval_pauses_the_undo_until_it_is_answered() -> None:
    @tool(needs_approval=True)
    def unbook_hotel(input: dict[str, Any], result: Any) -> str:
        """Cancel the hotel (costs a fee)."""
        EFFECTS.append(f"unbook hotel {result}")
        return "unbooked"

    from . import undo_agent

    gated = tool(compensate=unbook_hotel, name="hotel")(undo_agent.hotel.fn)
    store = MemoryStore()
    agent = Agent(
        Calls().model,
        tools=[undo_agent.pay, undo_agent.flight, gated, undo_agent.car, undo_agent.mail],
        session=store,
        session_id="s",
    )
    agent("Book me a trip")
    EFFECTS.clear()
    paused = agent.undo(to="m4", by="ana")
    assert paused.stop_reason == "interrupt"
    (question,) = paused.interrupts
    assert question.name == "approval" and question.tool_use is not None
    assert question.tool_use.name == "unbook_hotel" and question.tool_use.id == "undo.c3"
    assert EFFECTS == ["retract mail to ana@example.com", "return car 2 days"]
    assert len(agent.messages) == 12 and agent.is_paused  # not cut until every one is done
    # a fresh process answers it, and the undo carries on
    again = Agent(
        Calls().model,
        tools=[undo_agent.pay, undo_agent.flight, gated, undo_agent.car, undo_agent.mail],
        session=store,
        session_id="s",
    )
    done = again.resume({question.id: True}, by="bo")
    assert done.stop_reason == "undone"
    assert EFFECTS == ["retract mail to ana@example.com", "return car 2 days", "unbook hotel H-3"]
    assert len(again.messages) == 5 and again.needs_recovery
    assert [e["call"] for e in undo_entries(again)] == ["c5", "c4", "c3"]


def test_a_declined_compensation_is_recorded_and_the_undo_still_ends() -> None:
    @tool(needs_approval=True)
    def unbook_hotel(input: dict[str, Any], result: Any) -> str:
        """Cancel the hotel (costs a fee)."""
        EFFECTS.append("unbook hotel")
        return "unbooked"

    from . import undo_agent

    gated = tool(compensate=unbook_hotel, name="hotel")(undo_agent.hotel.fn)
    agent = Agent(
        Calls().model,
        tools=[undo_agent.pay, undo_agent.flight, gated, undo_agent.car, undo_agent.mail],
    )
    agent("Book me a trip")
    EFFECTS.clear()
    (question,) = agent.undo(to="m4").interrupts
    assert agent.resume({question.id: False}, by="bo").stop_reason == "undone"
    assert "unbook hotel" not in EFFECTS
    hotel = [e for e in undo_entries(agent) if e["call"] == "c3"]
    assert hotel[0]["status"] == "error" and "declined" in str(hotel[0]["result"])


def test_a_signed_session_is_undone_and_reads_back() -> None:
    store = MemoryStore()
    agent = booked(store, "s", signing_key="k" * 32)
    agent.undo(to="m6", by="ana")
    assert len(agent.messages) == 7
    again = build(None, store, "s", signing_key="k" * 32)
    assert again.needs_recovery and len(again.messages) == 7
    assert str(again.recover()) == "Your trip is booked."


def test_an_undo_while_paused_in_a_batch_undoes_its_finished_calls_and_drops_the_pause() -> None:
    from . import undo_agent

    gated_mail = tool(compensate=undo_agent.retract, name="mail", needs_approval=True)(
        undo_agent._mail
    )
    store = MemoryStore()
    agent = Agent(
        Calls().model,
        tools=[undo_agent.pay, undo_agent.flight, undo_agent.hotel, undo_agent.car, gated_mail],
        session=store,
        session_id="s",
    )
    paused = agent("Book me a trip")
    assert paused.stop_reason == "interrupt" and paused.interrupts[0].name == "approval"
    EFFECTS.clear()
    assert agent.undo(to="m2", by="ana").stop_reason == "undone"
    assert EFFECTS == ["return car 2 days", "cancel hotel 3 nights", "cancel flight F-Lisbon"]
    assert not agent.is_paused and agent.interrupts == [] and len(agent.messages) == 3
    assert asyncio.run(store.pending_interrupts()) == []


def test_on_decline_compensate_undoes_the_runs_calls_before_the_model_is_told() -> None:
    from . import undo_agent

    gated_mail = tool(compensate=undo_agent.retract, name="mail", needs_approval=True)(
        undo_agent._mail
    )
    seen: list[str] = []
    calls = Calls()

    def model_sees(request: Any) -> Any:
        last = request.messages[-1]
        seen.append(" ".join(b.text for b in last.content if hasattr(b, "text") and b.text))
        return calls._reply(request)

    from interlude.testing import FunctionModel

    agent = Agent(
        FunctionModel(model_sees),
        tools=[undo_agent.pay, undo_agent.flight, undo_agent.hotel, undo_agent.car, gated_mail],
        on_decline="compensate",
    )
    (question,) = agent("Book me a trip").interrupts
    EFFECTS.clear()
    result = agent.resume({question.id: False}, by="ana")
    assert str(result) == "Your trip is booked."
    assert EFFECTS == [
        "return car 2 days",
        "cancel hotel 3 nights",
        "cancel flight F-Lisbon",
        "refund 120 (r-120)",
    ]
    assert "the calls made since the prompt were undone" in seen[-1]
    assert "car (c4) by car.undo, success" in seen[-1]
    entries = undo_entries(agent)
    assert [(e["call"], e["by"], e["checkpoint"]) for e in entries] == [
        ("c4", "ana", None),
        ("c3", "ana", None),
        ("c2", "ana", None),
        ("c1", "ana", None),
    ]
    assert len(agent.messages) == 12  # nothing cut: the model was told


def test_on_decline_tell_is_the_default_and_undoes_nothing() -> None:
    from . import undo_agent

    gated_mail = tool(compensate=undo_agent.retract, name="mail", needs_approval=True)(
        undo_agent._mail
    )
    agent = Agent(
        Calls().model,
        tools=[undo_agent.pay, undo_agent.flight, undo_agent.hotel, undo_agent.car, gated_mail],
    )
    (question,) = agent("Book me a trip").interrupts
    EFFECTS.clear()
    agent.resume({question.id: False})
    assert EFFECTS == [] and undo_entries(agent) == []


def test_compensate_takes_a_function_of_input_and_result_or_a_tool() -> None:
    from interlude.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="compensate= takes a function of"):

        @tool(compensate=lambda only: None)
        def broken(x: int) -> int:
            """Broken."""
            return x

    with pytest.raises(ConfigurationError, match="compensate= takes a function"):

        @tool(compensate=42)  # type: ignore[arg-type]
        def broken_too(x: int) -> int:
            """Broken."""
            return x

    with pytest.raises(ConfigurationError, match="on_decline must be"):
        Agent(Calls().model, on_decline="undo")  # type: ignore[arg-type]


def test_a_cancelled_undo_stops_where_it_is_and_recover_never_runs_a_compensation_twice() -> None:
    import threading

    from . import undo_agent

    started, release = threading.Event(), threading.Event()

    def slow_unbook(input: dict[str, Any], result: Any) -> str:
        EFFECTS.append("unbook hotel")
        started.set()
        release.wait(5)
        return "unbooked"

    slow = tool(compensate=slow_unbook, name="hotel")(undo_agent.hotel.fn)
    tools = [undo_agent.pay, undo_agent.flight, slow, undo_agent.car, undo_agent.mail]
    store = MemoryStore()
    agent = Agent(Calls().model, tools=tools, session=store, session_id="s")
    agent("Book me a trip")
    EFFECTS.clear()

    async def cancel_midway() -> Any:
        task = asyncio.ensure_future(agent.undo_async(to="m4", by="ana"))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
        agent.cancel()
        try:
            return await task
        finally:
            release.set()

    result = asyncio.run(cancel_midway())
    assert result.stop_reason == "cancelled"
    assert EFFECTS == ["retract mail to ana@example.com", "return car 2 days", "unbook hotel"]
    # the trail names the two that finished; the third is in doubt, not forgotten
    assert [e["call"] for e in undo_entries(agent)] == ["c5", "c4"]
    assert agent.needs_recovery and len(agent.messages) == 12
    again = Agent(Calls().model, tools=tools, session=store, session_id="s")
    (doubt,) = again.recover().interrupts
    assert doubt.source == "in_doubt" and doubt.tool_use.id == "undo.c3"  # type: ignore[union-attr]
    assert again.resume({doubt.id: {"result": "unbooked"}}, by="bo").stop_reason == "undone"
    assert EFFECTS == ["retract mail to ana@example.com", "return car 2 days", "unbook hotel"]
    assert [e["call"] for e in undo_entries(again)] == ["c5", "c4", "c3"]
    assert len(again.messages) == 5


def test_a_process_without_a_compensation_cannot_carry_the_undo_on_and_changes_nothing() -> None:
    @tool(needs_approval=True)
    def unbook_hotel(input: dict[str, Any], result: Any) -> str:
        """Cancel the hotel (costs a fee)."""
        EFFECTS.append("unbook hotel")
        return "unbooked"

    from interlude.errors import ConfigurationError

    from . import undo_agent

    def trip(hotel: Any) -> list[Any]:
        return [undo_agent.pay, undo_agent.flight, hotel, undo_agent.car, undo_agent.mail]

    gated = tool(compensate=unbook_hotel, name="hotel")(undo_agent.hotel.fn)
    store = MemoryStore()
    agent = Agent(Calls().model, tools=trip(gated), session=store, session_id="s")
    agent("Book me a trip")
    EFFECTS.clear()
    (question,) = agent.undo(to="m4", by="ana").interrupts
    before = asyncio.run(store.load("s"))
    # a process whose hotel tool has no compensation any more (a deploy dropped it)
    bare = tool(name="hotel")(undo_agent.hotel.fn)
    lacking = Agent(Calls().model, tools=trip(bare), session=store, session_id="s")
    with pytest.raises(ConfigurationError, match="needs tool 'unbook_hotel'"):
        lacking.resume({question.id: True}, by="bo")
    assert lacking.is_paused and asyncio.run(store.load("s")).pause == before.pause
    assert "unbook hotel" not in EFFECTS  # nothing counted as failed, nothing cut
    again = Agent(Calls().model, tools=trip(gated), session=store, session_id="s")
    assert again.resume({question.id: True}, by="bo").stop_reason == "undone"
    assert EFFECTS.count("unbook hotel") == 1 and len(again.messages) == 5
