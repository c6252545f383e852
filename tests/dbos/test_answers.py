"""Runs on a DBOS worker in another process, answered from this one: a pause listed by
``pending`` and answered, refused answers that change nothing, a deadline that settles itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from interlude.errors import AlreadyAnsweredError, AnswerValidationError, NotPausedError
from tests.support import Started

from .agents import runs
from .support import paused, prompt, session


async def test_a_pause_is_listed_answered_from_here_and_the_tool_runs_once(
    dbos_url: str, worker: Started, tmp_path: Path
) -> None:
    from interlude.dbos import answer, pending, result, start

    path, sid = str(tmp_path / "touch"), session()
    await start(dbos_url, "approve", sid, prompt(("touch", {"path": path})))
    [question] = await paused(dbos_url, sid)
    assert question.interrupt.name == "approve"
    assert question.agent == "approve" and question.tool_name == "touch"
    assert runs(path) == 0

    await answer(dbos_url, sid, {question.interrupt.id: True}, by="ana")
    out = await result(dbos_url, sid)
    assert (out["stop_reason"], out["text"]) == ("end_turn", "Done.")
    assert out["answered"] == {question.interrupt.id: "ana"}
    assert runs(path) == 1
    assert [p for p in await pending(dbos_url) if p.session_id == sid] == []
    audit = out["state"]["audit"]
    assert [(e["interrupt_id"], e["by"]) for e in audit] == [(question.interrupt.id, "ana")]


async def test_refused_answers_raise_the_embedded_errors_and_change_nothing(
    dbos_url: str, worker: Started, tmp_path: Path
) -> None:
    from interlude.dbos import answer, result, start

    path, sid = str(tmp_path / "touch"), session()
    await start(dbos_url, "typed", sid, prompt(("touch", {"path": path})))
    [question] = await paused(dbos_url, sid)
    qid = question.interrupt.id

    with pytest.raises(AnswerValidationError) as refused:  # not a Decision
        await answer(dbos_url, sid, {qid: "yes"}, by="ana")
    assert refused.value.interrupt_id == qid
    assert [p.interrupt.id for p in await paused(dbos_url, sid)] == [qid]  # still waiting
    assert runs(path) == 0

    await answer(dbos_url, sid, {qid: {"approved": True}}, by="bob")
    await result(dbos_url, sid)
    with pytest.raises(AlreadyAnsweredError) as again:  # the first answer won
        await answer(dbos_url, sid, {qid: {"approved": False}}, by="eve")
    assert (again.value.interrupt_id, again.value.by) == (qid, "bob")
    out = await result(dbos_url, sid)
    assert out["answered"] == {qid: "bob"} and runs(path) == 1

    with pytest.raises(NotPausedError):
        await answer(dbos_url, "no-such-run", {qid: True})


async def test_a_second_answer_while_the_run_waits_again_is_already_answered(
    dbos_url: str, worker: Started, tmp_path: Path
) -> None:
    """The second answer reaches the workflow itself (paused on its next question): it refuses
    it, and the new question stays as it was."""
    from interlude.dbos import answer, result, start

    first, second, sid = str(tmp_path / "a"), str(tmp_path / "b"), session()
    calls = (("touch", {"path": first}), ("slow", {"path": second}))
    (tmp_path / "b.release").touch()
    await start(dbos_url, "approve", sid, prompt(*calls))
    questions = await paused(dbos_url, sid)
    ids = sorted(q.interrupt.id for q in questions)
    assert len(ids) == 2  # both calls of the turn ask at once
    await answer(dbos_url, sid, {ids[0]: True}, by="ana")
    with pytest.raises(AlreadyAnsweredError):
        await answer(dbos_url, sid, {ids[0]: False}, by="eve")
    [left] = await paused(dbos_url, sid)
    assert left.interrupt.id == ids[1]
    await answer(dbos_url, sid, {ids[1]: True}, by="bob")
    out = await result(dbos_url, sid)
    assert out["answered"] == {ids[0]: "ana", ids[1]: "bob"}
    assert (runs(first), runs(second)) == (1, 1)


async def test_a_deadline_settles_the_question_by_itself(
    dbos_url: str, worker: Started, tmp_path: Path
) -> None:
    from interlude.dbos import result, start

    path, sid = str(tmp_path / "touch"), session()
    await start(dbos_url, "deadline", sid, prompt(("touch", {"path": path})))
    [question] = await paused(dbos_url, sid)
    assert question.expires_at is not None
    out = await result(dbos_url, sid, timeout=60)
    assert out["stop_reason"] == "end_turn"
    assert runs(path) == 1  # its default (True) approved the call
    audit = out["state"]["audit"]
    assert [e["by"] for e in audit] == ["expiry"]
