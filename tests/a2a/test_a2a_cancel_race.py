"""A cancel that races a run is held to the same rule as a cancel of a paused task: only one
who may answer the pending questions may drop them (found by a review of issue 39's doors: a
person in no group sent an answer that would be refused and canceled while its run decided)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from a2a.types import CancelTaskRequest, Part

import interlude.a2a._live as live_runs
from interlude.a2a import create_a2a_app
from interlude.sessions import open_store

from .streams import BO_TOKEN, PEOPLE, streaming_app
from .wire import data, questions, sdk_client, send


async def test_a_cancel_racing_a_refused_answer_leaves_the_pause(
    tmp_path: Path, effects_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    slow = {"on": False}
    real_load = store.load

    async def load(session_id: str) -> Any:
        if slow["on"]:
            await asyncio.sleep(0.3)  # a store across a network: the run decides slowly
        return await real_load(session_id)

    monkeypatch.setattr(store, "load", load)
    asgi = create_a2a_app(streaming_app(), store, tokens=PEOPLE)
    ana = await sdk_client(asgi, "guarded")
    bo = await sdk_client(asgi, "guarded", BO_TOKEN)  # bo is in no group
    task = await send(ana, Part(text="Wipe the data"))
    [question] = questions(task)
    with pytest.raises(Exception, match=r"not_allowed|may not answer"):
        await bo.cancel_task(CancelTaskRequest(id=task.id))  # a plain cancel: refused

    started = asyncio.Event()
    real_start = live_runs.Runs.start

    def start(self: Any, *args: Any, **kwargs: Any) -> Any:
        run = real_start(self, *args, **kwargs)
        started.set()
        return run

    monkeypatch.setattr(live_runs.Runs, "start", start)
    slow["on"] = True
    answering = asyncio.ensure_future(
        send(bo, data({"answers": {question["id"]: True}}), task_id=task.id)
    )
    await started.wait()  # bo's answer is being decided (it will be refused): cancel now
    with pytest.raises(Exception, match="may not answer"):
        await bo.cancel_task(CancelTaskRequest(id=task.id))
    await asyncio.gather(answering, return_exceptions=True)
    slow["on"] = False
    stored = await real_load(task.id)
    assert stored is not None and stored.pause is not None  # the question still waits
    assert [q["id"] for q in stored.pause["interrupts"]] == [question["id"].split("/", 1)[-1]]
    assert "interlude.a2a" not in stored.state  # no cancel was recorded
    done = await send(ana, data({"answers": {question["id"]: True}}), task_id=task.id)
    assert done.status.state != task.status.state  # ana may still answer it: it carries on
