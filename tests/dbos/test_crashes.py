"""Workers SIGKILLed mid-step, their runs carried on by a new worker process of the same
executor id: a tool that may not run twice is never run again (the run asks ``in_doubt``); a
model call, which has no effects, is simply made again."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from tests.support import wait_for

from .agents import runs
from .conftest import dbos_worker, kill
from .support import paused, prompt, session


async def test_a_worker_killed_inside_a_tool_body_leaves_the_call_in_doubt(
    dbos_url: str, tmp_path: Path
) -> None:
    from interlude.dbos import answer, result, start

    path, sid, executor = str(tmp_path / "slow"), session(), f"c-{uuid.uuid4().hex[:6]}"
    with dbos_worker(dbos_url, executor) as doomed:
        await start(dbos_url, "plain", sid, prompt(("slow", {"path": path})))
        wait_for(lambda: runs(path + ".started") == 1, what="the tool body to start")
        kill(doomed)  # mid-body: it waits for its release file
    (tmp_path / "slow.release").touch()  # were the body run again, it would finish
    with dbos_worker(dbos_url, executor):  # the same worker, restarted: it recovers the run
        [question] = await paused(dbos_url, sid)
        assert question.interrupt.name == "in_doubt"
        assert question.tool_name == "slow"
        assert runs(path + ".started") == 1 and runs(path) == 0
        await answer(dbos_url, sid, {question.interrupt.id: "fail"}, by="ops")
        out = await result(dbos_url, sid)
    assert out["stop_reason"] == "end_turn"
    assert runs(path + ".started") == 1 and runs(path) == 0  # never run twice


async def test_a_worker_killed_inside_a_model_call_calls_the_model_again(
    dbos_url: str, tmp_path: Path
) -> None:
    from interlude.dbos import result, start

    hold, touched = str(tmp_path / "model"), str(tmp_path / "touch")
    sid, executor = session(), f"c-{uuid.uuid4().hex[:6]}"
    with dbos_worker(dbos_url, executor) as doomed:
        await start(dbos_url, "plain", sid, prompt(("touch", {"path": touched}), hold=hold))
        wait_for(lambda: runs(hold + ".started") == 1, what="the model call to start")
        kill(doomed)
    (tmp_path / "model.release").touch()
    with dbos_worker(dbos_url, executor):
        out = await result(dbos_url, sid)
    assert (out["stop_reason"], out["text"]) == ("end_turn", "Done.")
    assert runs(hold + ".started") == 3  # the lost call made again, then the next one
    assert runs(touched) == 1


async def test_a_worker_killed_between_steps_makes_no_finished_step_again(
    dbos_url: str, tmp_path: Path
) -> None:
    """Killed after the tool's result was recorded, in the next model call: the restarted
    worker takes the first model call and the tool's result from the record (neither runs
    again) and makes the lost call again."""
    from interlude.dbos import result, start

    hold, touched = str(tmp_path / "model"), str(tmp_path / "touch")
    sid, executor = session(), f"c-{uuid.uuid4().hex[:6]}"
    task = json.dumps({"calls": [["touch", {"path": touched}]], "hold": hold, "hold_from": 2})
    with dbos_worker(dbos_url, executor) as doomed:
        await start(dbos_url, "plain", sid, task)
        wait_for(lambda: runs(hold + ".started") == 2, what="the second model call to start")
        assert runs(touched) == 1  # the tool ran, its result recorded, before the next call
        kill(doomed)
    (tmp_path / "model.release").touch()
    with dbos_worker(dbos_url, executor):
        out = await result(dbos_url, sid)
    assert (out["stop_reason"], out["text"]) == ("end_turn", "Done.")
    assert runs(touched) == 1  # never again
    assert _model_calls(hold) == [
        "1",
        "3",
        "3",
    ]  # the first call once; the lost second one made again


def _model_calls(hold: str) -> list[str]:
    """How many messages each model call recorded in ``hold.started`` was given, in order."""
    lines = Path(hold + ".started").read_text(encoding="utf-8").splitlines()
    return [line.split()[-1] for line in lines]
