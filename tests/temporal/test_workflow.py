"""Agents as Temporal workflows, against a real dev server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import Env
from .polling import pending, until


def _prompt(*calls: tuple[str, dict[str, object]]) -> str:
    return json.dumps([list(c) for c in calls])


def _runs(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


async def _pending(env: Env, workflow_id: str, count: int = 1) -> list:
    return await pending(env.agents, workflow_id, count)


async def test_before_tool_approval_answered_by_update(env: Env, tmp_path: Path) -> None:
    log = tmp_path / "a"
    wid = await env.agents.start("approve", _prompt(("touch", {"path": str(log)})))
    [question] = await _pending(env, wid)
    assert question.name == "approve" and question.reason == {"path": str(log)}
    assert _runs(log) == 0
    outcome = await env.agents.answer(wid, {question.id: True}, by="alice")
    assert outcome["stop_reason"] == "end_turn" and outcome["text"] == "Done."
    assert outcome["interrupts"] == []
    result = await env.agents.result(wid)
    assert result["stop_reason"] == "end_turn"
    assert _runs(log) == 1
    [entry] = result["state"]["audit"]
    assert entry["by"] == "alice" and entry["answer"] is True
    assert entry["interrupt_id"] == question.id


async def test_declined_approval_does_not_run_the_tool(env: Env, tmp_path: Path) -> None:
    log = tmp_path / "a"
    wid = await env.agents.start("approve", _prompt(("touch", {"path": str(log)})))
    [question] = await _pending(env, wid)
    outcome = await env.agents.answer(wid, {question.id: False}, by="bob")
    assert outcome["stop_reason"] == "end_turn"
    result = await env.agents.result(wid)
    assert _runs(log) == 0
    [_, _, results, _] = result["state"]["messages"]
    [block] = results["content"]
    assert block["status"] == "error" and "not approved" in json.dumps(block)


async def test_bad_answers_are_refused_and_change_nothing(env: Env, tmp_path: Path) -> None:
    from interlude.errors import (
        AnswerValidationError,
        ResumeInputError,
        UnknownInterruptError,
    )

    log = tmp_path / "a"
    wid = await env.agents.start("typed", _prompt(("touch", {"path": str(log)})))
    [question] = await _pending(env, wid)
    assert question.response_schema is not None
    history = [e async for e in env.client.get_workflow_handle(wid).fetch_history_events()]

    with pytest.raises(UnknownInterruptError, match="no pending interrupt has id 'v1:nope'"):
        await env.agents.answer(wid, {"v1:nope": {"approved": True}}, by="alice")
    with pytest.raises(AnswerValidationError) as bad:
        await env.agents.answer(wid, {question.id: {"approved": "maybe"}}, by="alice")
    assert bad.value.interrupt_id == question.id and bad.value.path == ("approved",)
    with pytest.raises(ResumeInputError, match="got no answers"):
        await env.agents.answer(wid, {}, by="alice")
    with pytest.raises(ResumeInputError, match="kept for answers given by a deadline"):
        await env.agents.answer(wid, {question.id: {"approved": True}}, by="expiry")
    with pytest.raises(ResumeInputError, match="not the one that was shown"):
        shown = {question.id: "sha256:" + "0" * 64}
        await env.agents.answer(wid, {question.id: {"approved": True}}, by="a", shown=shown)

    after = [e async for e in env.client.get_workflow_handle(wid).fetch_history_events()]
    assert len(after) == len(history)  # a refused Update writes nothing
    assert [q.id for q in await env.agents.pending(wid)] == [question.id]
    assert _runs(log) == 0

    outcome = await env.agents.answer(
        wid, {question.id: {"approved": True}}, by="alice", shown={question.id: question.digest}
    )
    assert outcome["text"] == "Done."
    assert _runs(log) == 1


async def test_several_questions_answered_partly_then_fully(env: Env, tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    calls = [("touch", {"path": str(p)}) for p in (a, b, c)]
    wid = await env.agents.start("approve", _prompt(*calls))
    questions = await _pending(env, wid, 3)
    assert [q.reason for q in questions] == [{"path": str(p)} for p in (a, b, c)]

    outcome = await env.agents.answer(wid, {questions[0].id: True}, by="alice")
    assert outcome["stop_reason"] == "interrupt"
    assert [i["id"] for i in outcome["interrupts"]] == [q.id for q in questions[1:]]
    assert (_runs(a), _runs(b), _runs(c)) == (1, 0, 0)
    assert [q.id for q in await env.agents.pending(wid)] == [q.id for q in questions[1:]]

    outcome = await env.agents.answer(
        wid, {questions[1].id: False, questions[2].id: True}, by="bob"
    )
    assert outcome["stop_reason"] == "end_turn" and outcome["interrupts"] == []
    assert (_runs(a), _runs(b), _runs(c)) == (1, 0, 1)
    result = await env.agents.result(wid)
    audit = [(e["by"], e["answer"]) for e in result["state"]["audit"]]
    assert audit == [("alice", True), ("bob", False), ("bob", True)]


async def test_after_tool_retry(env: Env, tmp_path: Path) -> None:
    log = tmp_path / "f"
    wid = await env.agents.start("retry", _prompt(("flaky", {"path": str(log)})))
    [question] = await _pending(env, wid)
    assert question.source == "after_tool_call"
    assert question.reason == "TimeoutError: timed out"  # the tool's exception, as embedded
    assert _runs(log) == 1
    outcome = await env.agents.answer(wid, {question.id: True}, by="alice")
    assert outcome["stop_reason"] == "end_turn"
    assert _runs(log) == 2  # retried once; completed activities did not run again
    result = await env.agents.result(wid)
    [block] = result["state"]["messages"][2]["content"]
    assert block["status"] == "success"


async def test_a_deadline_applies_its_default(env: Env, tmp_path: Path) -> None:
    log = tmp_path / "d"
    wid = await env.agents.start("deadline", _prompt(("touch", {"path": str(log)})))
    [question] = await _pending(env, wid)
    assert question.expires_at is not None
    result = await env.agents.result(wid)  # nobody answers: the timer fires after 1.5 s
    assert result["stop_reason"] == "end_turn"
    assert _runs(log) == 1  # the default (True) approved it
    [entry] = result["state"]["audit"]
    assert entry["by"] == "expiry" and entry["expired"] is True and entry["answer"] is True


async def test_paused_workflows_are_listed_by_search_attribute(env: Env, tmp_path: Path) -> None:

    log = tmp_path / "l"
    wid = await env.agents.start("approve", _prompt(("touch", {"path": str(log)})))
    other = await env.agents.start("retry", _prompt(("flaky", {"path": str(tmp_path / "x")})))
    [question] = await _pending(env, wid)
    await _pending(env, other)

    async def paused() -> list[str]:  # visibility is eventually consistent
        listed: list[str] = await env.agents.paused("approve")
        return listed if wid in listed else []

    listed = await until(paused, f"{wid} listed as paused")
    assert wid in listed and other not in listed
    assert other in await env.agents.paused(names="retry")
    assert {wid, other} <= set(await env.agents.paused())
    await env.agents.answer(wid, {question.id: True}, by="alice")
    await env.agents.result(wid)

    async def gone() -> bool:
        return wid not in await env.agents.paused()

    await until(gone, f"{wid} to leave the paused list")
    assert wid not in await env.agents.paused()


async def test_finished_histories_replay_deterministically(env: Env, tmp_path: Path) -> None:
    from interlude.temporal import replayer

    from .agents import app

    ids = []
    for name in ("approve", "deadline", "retry"):
        tool = "flaky" if name == "retry" else "touch"
        wid = await env.agents.start(name, _prompt((tool, {"path": str(tmp_path / name)})))
        [question] = await _pending(env, wid)
        if name != "deadline":
            await env.agents.answer(wid, {question.id: True}, by="alice")
        await env.agents.result(wid)
        ids.append(wid)
    for wid in ids:
        history = await env.client.get_workflow_handle(wid).fetch_history()
        await replayer(app).replay_workflow(history)  # raises on nondeterminism
