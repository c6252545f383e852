"""Undo on Temporal (issue 40), against a real dev server: the compensations of an undo and of
a decline's rollback run as tool activities, once each, newest first; the ``undo`` Update
takes a waiting run back to a checkpoint (a dry run changes nothing, a refused one names the
call), and the ``recover`` Update carries on the run it left stopped there.

The trip is tests/undo/undo_agent.py's (five calls, each with a compensation), here followed
by a sixth call, ``confirm``, that waits on a person's approval: the workflow of a finished run
has completed, so a run is undone in its workflow while it waits on people. Every effect and
compensation is appended to ``$INTERLUDE_TEST_EFFECTS``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from interlude import Agent, AgentSession, App, ToolResult, ToolUse, tool
from interlude.testing import FunctionModel, ModelRequest
from tests.undo import undo_agent

from .conftest import Env, serving
from .history import calls_of
from .polling import pending, until

BOOKED = ["pay 120", "flight Lisbon", "hotel 3", "car 2", "mail ana@example.com"]
PLAN = [*undo_agent.PLAN, ("confirm", {})]


@tool(needs_approval=True)
def confirm() -> str:
    """Confirm the trip with the traveller."""
    undo_agent.effect("confirm")
    return "confirmed"


@tool(needs_approval=True)
def unbook_hotel(input: dict[str, Any], result: Any) -> str:
    """Cancel the hotel (costs a fee)."""
    undo_agent.effect(f"unbook hotel {result}")
    return "unbooked"


def _reply(request: ModelRequest) -> str | list[ToolUse]:
    """One call per turn, in PLAN's order (the trip, then ``confirm``), then a final reply."""
    done = sum(1 for m in request.messages for b in m.content if isinstance(b, ToolResult))
    if done < len(PLAN):
        name, args = PLAN[done]
        return [ToolUse(f"c{done + 1}", name, args)]
    return "Your trip is booked."


def _trip(session: AgentSession, name: str, tools: list[Any], **kw: Any) -> Agent:
    reply = _reply if confirm in tools else undo_agent.reply  # a trip with confirm, or without
    return Agent(
        FunctionModel(reply),
        tools=tools,
        name=name,
        session=session.store,
        session_id=session.id,
        **kw,
    )


u = undo_agent
gated_mail = tool(compensate=u.retract, name="mail", needs_approval=True)(u._mail)
gated_hotel = tool(compensate=unbook_hotel, name="hotel")(u.hotel.fn)

app = App()


@app.agent("trip")
def build_trip(session: AgentSession) -> Agent:
    """The trip, then ``confirm``: it waits on an approval once the five calls are done."""
    return _trip(session, "trip", [u.pay, u.flight, u.hotel, u.car, u.mail, confirm])


@app.agent("trip_plain")
def build_trip_plain(session: AgentSession) -> Agent:
    """As "trip", its ``mail`` with no compensation."""
    return _trip(session, "trip_plain", [u.pay, u.flight, u.hotel, u.car, u.plain_mail, confirm])


@app.agent("trip_gated_undo")
def build_trip_gated_undo(session: AgentSession) -> Agent:
    """As "trip", the hotel's compensation needing an approval."""
    tools = [u.pay, u.flight, gated_hotel, u.car, u.mail, confirm]
    return _trip(session, "trip_gated_undo", tools)


@app.agent("trip_decline")
def build_trip_decline(session: AgentSession) -> Agent:
    """The trip whose ``mail`` needs an approval; a decline compensates the run's calls."""
    tools = [u.pay, u.flight, u.hotel, u.car, gated_mail]
    return _trip(session, "trip_decline", tools, on_decline="compensate")


@pytest.fixture
def effects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "effects"
    monkeypatch.setenv("INTERLUDE_TEST_EFFECTS", str(path))
    return path


def said(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


@pytest.fixture
async def trips(temporal_address: str) -> AsyncIterator[Env]:
    """A client, and a worker serving the trip agents on a task queue of its own."""
    async with serving(temporal_address, app=app) as running:
        yield running


async def _booked(env: Env, agent: str, effects: Path) -> tuple[str, Any]:
    """A trip run in a workflow, waiting on the approval of ``confirm`` after its five calls."""
    wid = await env.agents.start(agent, "Book me a trip")
    [question] = await pending(env.agents, wid)
    assert question.name == "approval" and question.tool_use.name == "confirm"
    assert said(effects) == BOOKED
    return wid, question


async def _compensations(env: Env, wid: str) -> list[str]:
    """The tool activities of the workflow's compensations (ids ``undo.<call>``), in order."""
    return [c.tool for c in await calls_of(env.client, wid) if c.tool in TOOLS_UNDOING]


TOOLS_UNDOING = {"pay.undo", "flight.undo", "cancel_hotel", "unbook_hotel", "car.undo", "mail.undo"}


def _undo_entries(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(e["answer"], by=e["by"]) for e in state["audit"] if e["name"] == "undo"]


async def test_an_undo_update_runs_the_compensations_as_activities(
    trips: Env, effects: Path
) -> None:
    from interlude.temporal import undo

    wid, _ = await _booked(trips, "trip", effects)
    outcome = await undo(trips.client, wid, "m4", by="ana")
    assert outcome["stop_reason"] == "undone" and outcome["stands"] == "stopped"
    assert outcome["interrupts"] == []
    # 5, 4, 3, newest first, once each, each a tool activity of its own
    assert said(effects)[5:] == [
        "retract mail to ana@example.com",
        "return car 2 days",
        "cancel hotel 3 nights",
    ]
    assert await _compensations(trips, wid) == ["mail.undo", "car.undo", "cancel_hotel"]
    assert await trips.agents.pending(wid) == []  # the approval went with the undone run
    # the workflow waits, stopped at m4, until told to carry on
    again = await trips.agents.recover(wid)
    assert again["stop_reason"] == "interrupt"  # hotel, car and mail again, then confirm
    assert said(effects)[8:] == ["hotel 3", "car 2", "mail ana@example.com"]
    [confirming] = again["interrupts"]
    done = await trips.agents.answer(wid, {confirming["id"]: True}, by="ana")
    assert done["stop_reason"] == "end_turn"
    result = await trips.agents.result(wid)
    entries = _undo_entries(result["state"])
    assert [(e["call"], e["compensation"], e["status"], e["by"]) for e in entries] == [
        ("c5", "mail.undo", "success", "ana"),
        ("c4", "car.undo", "success", "ana"),
        ("c3", "cancel_hotel", "success", "ana"),
    ]
    assert entries[0]["checkpoint"] == "m4" and entries[1]["result"] == "car returned"
    assert result["state"]["state"] == {"car": "rented"}  # returned, then rented again
    assert said(effects)[-1] == "confirm"
    from interlude.temporal import replayer

    history = await trips.client.get_workflow_handle(wid).fetch_history()
    await replayer(app).replay_workflow(history)  # the undo replays deterministically


async def test_an_undo_in_a_run_continued_as_new(trips: Env, effects: Path) -> None:
    from interlude.temporal import Limits, replayer

    from .test_continue_as_new import _runs_of

    limits = Limits(continue_after_model_calls=1)
    wid = await trips.agents.start("trip", "Book me a trip", limits=limits)
    await pending(trips.agents, wid)
    await until_continued(trips, wid, 2)  # paused with model calls made: continued as new
    outcome = await trips.agents.undo(wid, "m6", by="ana")  # in the new run, from its state
    assert (outcome["stop_reason"], outcome["stands"]) == ("undone", "stopped")
    assert said(effects)[5:] == ["retract mail to ana@example.com", "return car 2 days"]
    again = await trips.agents.recover(wid)
    [confirming] = again["interrupts"]
    assert confirming["name"] == "approval"  # confirm's again, once car and mail ran again
    assert said(effects)[7:] == ["car 2", "mail ana@example.com"]
    await until_continued(trips, wid, 3)
    done = await trips.agents.answer(wid, {confirming["id"]: True}, by="ana")
    assert done["stop_reason"] == "end_turn"
    result = await trips.agents.result(wid)
    assert [e["call"] for e in _undo_entries(result["state"])] == ["c5", "c4"]
    for run_id in await _runs_of(trips, wid):  # every run of the chain replays
        history = await trips.client.get_workflow_handle(wid, run_id=run_id).fetch_history()
        await replayer(app).replay_workflow(history)


async def until_continued(env: Env, wid: str, runs: int) -> None:
    from .test_continue_as_new import _runs_of

    async def enough() -> bool:
        return len(await _runs_of(env, wid)) >= runs

    await until(enough, f"{runs} runs of {wid}")


async def test_a_dry_run_returns_the_plan_and_changes_nothing(trips: Env, effects: Path) -> None:
    wid, question = await _booked(trips, "trip", effects)
    plan = await trips.agents.undo(wid, "m4", dry_run=True)
    assert [(s["call_id"], s["tool"], s["compensation"]) for s in plan["steps"]] == [
        ("c5", "mail", "mail.undo"),
        ("c4", "car", "car.undo"),
        ("c3", "hotel", "cancel_hotel"),
    ]
    assert plan["to"] == "m4" and plan["keep"] == 5 and plan["stands"] == "stopped"
    assert said(effects) == BOOKED and await _compensations(trips, wid) == []
    assert [q.id for q in await trips.agents.pending(wid)] == [question.id]
    # the run goes on as if nothing was asked
    done = await trips.agents.answer(wid, {question.id: True}, by="ana")
    assert done["stop_reason"] == "end_turn" and said(effects) == [*BOOKED, "confirm"]


async def test_a_refused_undo_names_the_call_and_runs_nothing(trips: Env, effects: Path) -> None:
    from temporalio.client import WorkflowUpdateFailedError

    from interlude.errors import UndoError, UnknownCheckpointError

    wid, question = await _booked(trips, "trip_plain", effects)
    handle = trips.client.get_workflow_handle(wid)
    before = len([e async for e in handle.fetch_history_events()])
    with pytest.raises(UndoError, match=r"c5 \(mail\) has no compensation") as caught:
        await trips.agents.undo(wid, "m4", by="ana")
    assert caught.value.calls == ("c5",)
    with pytest.raises(UnknownCheckpointError, match="m99"):
        await trips.agents.undo(wid, "m99")
    with pytest.raises(WorkflowUpdateFailedError) as failed:
        await handle.execute_update("undo", {"to": "m4", "node": "x"})
    assert "undo takes the keys" in str(failed.value.cause)
    assert said(effects) == BOOKED
    assert [q.id for q in await trips.agents.pending(wid)] == [question.id]
    after = len([e async for e in handle.fetch_history_events()])
    assert after == before  # a refused Update is not even in the history
    # skipped, the call is left as it is
    outcome = await trips.agents.undo(wid, "m4", by="ana", skip=["c5"])
    assert outcome["stop_reason"] == "undone"
    assert said(effects)[5:] == ["return car 2 days", "cancel hotel 3 nights"]
    with pytest.raises(UndoError, match="recover Update first"):
        await trips.agents.undo(wid, "m2")
    await handle.terminate("test over")


async def test_a_compensation_needing_approval_pauses_the_undo_until_answered(
    trips: Env, effects: Path
) -> None:
    wid, _ = await _booked(trips, "trip_gated_undo", effects)
    paused = await trips.agents.undo(wid, "m4", by="ana")
    assert paused["stop_reason"] == "interrupt" and paused["stands"] == "paused"
    [question] = paused["interrupts"]
    assert question["name"] == "approval" and question["tool_use"]["id"] == "undo.c3"
    assert said(effects)[5:] == ["retract mail to ana@example.com", "return car 2 days"]
    [listed] = await pending(trips.agents, wid)
    assert listed.id == question["id"]
    done = await trips.agents.answer(wid, {question["id"]: True}, by="bo")
    assert done["stop_reason"] == "undone"
    assert said(effects)[7:] == ["unbook hotel H-3"]
    assert await _compensations(trips, wid) == ["mail.undo", "car.undo", "unbook_hotel"]
    await trips.client.get_workflow_handle(wid).terminate("test over")


async def test_a_decline_compensates_the_runs_calls_as_activities(
    trips: Env, effects: Path
) -> None:
    wid = await trips.agents.start("trip_decline", "Book me a trip")
    [question] = await pending(trips.agents, wid)
    assert question.name == "approval" and question.tool_use.name == "mail"
    assert said(effects) == BOOKED[:4]
    outcome = await trips.agents.answer(wid, {question.id: False}, by="ana")
    assert outcome["stop_reason"] == "end_turn" and outcome["text"] == "Your trip is booked."
    assert said(effects)[4:] == [
        "return car 2 days",
        "cancel hotel 3 nights",
        "cancel flight F-Lisbon",
        "refund 120 (r-120)",
    ]
    assert await _compensations(trips, wid) == [
        "car.undo",
        "cancel_hotel",
        "flight.undo",
        "pay.undo",
    ]
    result = await trips.agents.result(wid)
    assert result["stop_reason"] == "end_turn"
    entries = _undo_entries(result["state"])
    assert [(e["call"], e["by"], e["checkpoint"]) for e in entries] == [
        ("c4", "ana", None),
        ("c3", "ana", None),
        ("c2", "ana", None),
        ("c1", "ana", None),
    ]
    told = result["state"]["messages"][-2]["content"]
    assert any("the calls made since the prompt were undone" in str(b) for b in told)


async def test_the_cli_functions_undo_and_recover_a_workflow(
    trips: Env, effects: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``temporal_undo`` / ``temporal_recover``: what ``interlude --temporal ... undo`` and
    ``recover`` run once the command line routes them (``ON_TEMPORAL``)."""
    import argparse
    import asyncio

    from interlude.cli._render import Output
    from interlude.cli._temporal import temporal_recover, temporal_undo

    wid, _ = await _booked(trips, "trip", effects)
    common = {"session": wid, "temporal": trips.address, "namespace": "default", "node": None}
    undoing = argparse.Namespace(**common, to="m4", by="ana", skip=[], dry_run=True)
    out = Output(json_mode=False)
    assert await asyncio.to_thread(temporal_undo, undoing, out) == 0
    assert "c5  mail  -> mail.undo" in capsys.readouterr().out and said(effects) == BOOKED
    undoing.dry_run = False
    assert await asyncio.to_thread(temporal_undo, undoing, out) == 0
    printed = capsys.readouterr().out
    assert "undone to m4" in printed and f"recover {wid}" in printed
    assert said(effects)[5:] == [
        "retract mail to ana@example.com",
        "return car 2 days",
        "cancel hotel 3 nights",
    ]
    recovering = argparse.Namespace(**common)
    assert await asyncio.to_thread(temporal_recover, recovering, Output(json_mode=True)) == 0
    assert json.loads(capsys.readouterr().out)["stop_reason"] == "interrupt"
    await trips.client.get_workflow_handle(wid).terminate("test over")
