"""Notifications of runs on Temporal, to a real webhook receiver on loopback: asked,
escalated and deadline_near on durable workflow timers, answered after an Update, each once
with the id the store-backed notifier gives it."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from interlude import App
from interlude.notify import Webhook, notification_id
from tests.notify.receivers import Receiver, start_receiver

from . import agents
from .polling import pending, until
from .test_workflow import _prompt, _runs


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r, server = start_receiver()
    yield r
    server.shutdown()
    server.server_close()


async def _events(receiver: Receiver, count: int) -> list[str]:
    async def delivered() -> bool:
        return len(receiver.delivered) >= count

    with contextlib.suppress(AssertionError):  # the caller compares what was delivered
        await until(delivered, f"{count} notification(s)", every=0.025)
    return [m["event"] for m in receiver.delivered]


async def _question(agents_client: object, wid: str) -> list:
    return await pending(agents_client, wid)


async def test_a_paused_run_notifies_on_its_own_timers(
    temporal_address: str, receiver: Receiver, tmp_path: Path
) -> None:
    from temporalio.client import Client

    from interlude.temporal import AgentClient, worker

    app = App(notify=[Webhook(receiver.url, secret="s" * 20)], inbox_url="http://inbox.test")
    app.agent("timed")(agents.build_timed)
    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "a"
    async with worker(client, app, task_queue=queue):
        agents_client = AgentClient(client, task_queue=queue)
        wid = await agents_client.start("timed", _prompt(("touch", {"path": str(log)})))
        [question] = await _question(agents_client, wid)
        assert await _events(receiver, 3) == ["asked", "escalated", "deadline_near"]
        done = await agents_client.answer(wid, {question.id: True}, by="ana")
        assert done["stop_reason"] == "end_turn" and _runs(log) == 1
        events = await _events(receiver, 4)
    assert events == ["asked", "escalated", "deadline_near", "answered"]
    answered = receiver.delivered[3]
    assert answered["answer"]["by"] == "ana" and answered["session_id"] == wid
    assert answered["id"] == notification_id(wid, question.id, "answered")
    assert answered["url"] == f"http://inbox.test/sessions/{wid}"
    assert all(r.signed_by("s" * 20) for r in receiver.got)
    assert len(receiver.got) == 4  # each once


async def test_a_graphs_question_notifies_asked_and_answered(
    temporal_address: str, receiver: Receiver, tmp_path: Path
) -> None:
    """A graph run as a workflow: its node's question is notified when asked and when
    answered, under the graph's question id and workflow id."""
    from temporalio.client import Client

    from interlude.temporal import AgentClient, worker

    app = App(notify=[Webhook(receiver.url, secret="s" * 20)], inbox_url="http://inbox.test")
    app.graph("review")(agents.build_review)
    client = await Client.connect(temporal_address)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    draft, publish = tmp_path / "draft", tmp_path / "publish"
    calls = {
        "draft": [["touch", {"path": str(draft)}]],
        "publish": [["touch", {"path": str(publish)}]],
    }
    task = json.dumps(calls)
    async with worker(client, app, task_queue=queue):
        agents_client = AgentClient(client, task_queue=queue)
        wid = await agents_client.start("review", task)
        [question] = await _question(agents_client, wid)
        assert await _events(receiver, 1) == ["asked"]
        done = await agents_client.answer(wid, {question.id: True}, by="ana")
        assert done["stop_reason"] == "end_turn" and _runs(draft) == 1 and _runs(publish) == 1
        events = await _events(receiver, 2)
    assert events == ["asked", "answered"]
    asked, answered = receiver.delivered
    assert asked["id"] == notification_id(wid, question.id, "asked")
    assert answered["id"] == notification_id(wid, question.id, "answered")
    assert answered["answer"]["by"] == "ana" and answered["session_id"] == wid
    assert len(receiver.got) == 2  # each once
