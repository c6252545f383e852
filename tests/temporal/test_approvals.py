"""Approvals on Temporal: the tool flag with an edit, a remembered decision, an approver in
workflow code, and a quorum counted across Updates, against a real dev server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import Env
from .test_workflow import _pending, _prompt, _runs


async def test_an_edited_approval_runs_exactly_the_edit(env: Env, tmp_path: Path) -> None:
    asked, edited = tmp_path / "asked", tmp_path / "edited"
    wid = await env.agents.start("guarded", _prompt(("guarded", {"path": str(asked)})))
    [question] = await _pending(env, wid)
    assert question.name == "approval" and question.tool_use.input == {"path": str(asked)}
    answer = {"approve": True, "input": {"path": str(edited)}, "remember": "run"}
    outcome = await env.agents.answer(wid, {question.id: answer}, by="ana")
    assert outcome["stop_reason"] == "end_turn"
    result = await env.agents.result(wid)
    assert (_runs(asked), _runs(edited)) == (0, 1)  # the edit, once
    [entry] = result["state"]["audit"]
    assert entry["by"] == "ana" and entry["answer"]["input"] == {"path": str(edited)}
    tool_result = result["state"]["messages"][2]["content"][0]
    assert "approved with edited input" in json.dumps(tool_result)


async def test_an_approver_in_workflow_code_answers_what_it_can(env: Env, tmp_path: Path) -> None:
    scratch, real = tmp_path / "scratch", tmp_path / "real"
    prompt = _prompt(("guarded", {"path": str(scratch)}), ("guarded", {"path": str(real)}))
    wid = await env.agents.start("guarded", prompt)
    [question] = await _pending(env, wid)  # the approver took the scratch one
    assert question.tool_use.input == {"path": str(real)}
    assert _runs(scratch) == 1
    outcome = await env.agents.answer(wid, {question.id: False}, by="ana")
    assert outcome["stop_reason"] == "end_turn"
    assert (_runs(scratch), _runs(real)) == (1, 0)
    result = await env.agents.result(wid)
    assert [e["by"] for e in result["state"]["audit"]] == ["approver:_approve_scratch", "ana"]


async def test_a_quorum_is_counted_across_updates(env: Env, tmp_path: Path) -> None:
    from interlude.errors import ResumeInputError

    log = tmp_path / "a"
    wid = await env.agents.start("quorum", _prompt(("touch", {"path": str(log)})))
    [question] = await _pending(env, wid)
    assert (question.approvers, question.quorum) == (("ops",), 2)
    first = await env.agents.answer(wid, {question.id: True}, by="ana")
    assert first["stop_reason"] == "interrupt" and _runs(log) == 0  # one vote of two
    with pytest.raises(ResumeInputError, match="ana already approved"):
        await env.agents.answer(wid, {question.id: True}, by="ana")
    done = await env.agents.answer(wid, {question.id: True}, by="bo")
    assert done["stop_reason"] == "end_turn" and _runs(log) == 1
    result = await env.agents.result(wid)
    assert [(e["by"], e["vote"]) for e in result["state"]["audit"]] == [
        ("ana", [1, 2]),
        ("bo", [2, 2]),
    ]


async def test_a_policy_judges_every_call_in_workflow_code(env: Env, tmp_path: Path) -> None:
    scratch, real, flaky = tmp_path / "scratch", tmp_path / "real", tmp_path / "flaky"
    prompt = _prompt(
        ("touch", {"path": str(scratch)}),
        ("touch", {"path": str(real)}),
        ("flaky", {"path": str(flaky)}),
    )
    wid = await env.agents.start("policed", prompt)
    [question] = await _pending(env, wid)
    assert question.tool_use.input == {"path": str(real)} and question.approvers == ("ops",)
    assert question.reason["policy"]["policy"] == "temporal-1"
    outcome = await env.agents.answer(wid, {question.id: True}, by="ana")
    assert outcome["stop_reason"] == "end_turn"
    assert (_runs(scratch), _runs(real), _runs(flaky)) == (1, 1, 0)  # allowed, asked, denied
    result = await env.agents.result(wid)
    decided = [
        (e["tool"], e["answer"]["then"]) for e in result["state"]["audit"] if e["name"] == "policy"
    ]
    assert sorted(decided) == [("flaky", "deny"), ("touch", "allow"), ("touch", "ask")]


async def test_the_temporal_inbox_checks_who_may_answer(env: Env, tmp_path: Path) -> None:
    from interlude.errors import NotAllowedToAnswerError
    from interlude.temporal import TemporalInbox

    log = tmp_path / "a"
    wid = await env.agents.start("quorum", _prompt(("touch", {"path": str(log)})))
    [question] = await _pending(env, wid)
    inbox = TemporalInbox(env.client, task_queue=env.task_queue)
    with pytest.raises(NotAllowedToAnswerError):
        await inbox.answer(wid, {question.id: True}, by="eve", groups=["sales"])
    assert [q.id for q in await env.agents.pending(wid)] == [question.id]  # nothing sent
    await inbox.answer(wid, {question.id: True}, by="ana", groups=["ops"])
    await inbox.answer(wid, {question.id: True}, by="bo", groups=["ops"])
    result = await env.agents.result(wid)
    assert result["stop_reason"] == "end_turn" and _runs(log) == 1
