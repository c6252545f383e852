"""Webhooks to a real HTTP receiver on loopback, from a worker of an App with ``notify=``:
what is delivered when, signed, once per event, retried, and failed for good when refused."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest

from interlude import App, Inbox, Worker
from interlude.notify import Notifications, Notifier, Webhook, notification_id, signature
from interlude.sessions import SQLiteStore
from tests.support import wait_for

from . import notify_app
from .receivers import Receiver

SECRET = "a-webhook-secret"


def _app(*targets: object, **settings: object) -> App:
    notify = Notifications(targets=targets, **settings)  # type: ignore[arg-type]
    app = App(notify=notify, inbox_url="http://inbox.test/")
    app.agent("payer")(notify_app.build)
    return app


def test_asked_and_answered_are_delivered_once_signed_with_the_link(
    tmp_path: Path, receiver: Receiver
) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    app = _app(Webhook(receiver.url, secret=SECRET))
    question = app.start("payer", "pay:ana@1", store)("Pay ana").interrupts[0]
    worker = Worker(app, store)
    asyncio.run(worker.run_once())

    (asked,) = receiver.got
    assert asked.signed_by(SECRET) and not asked.signed_by("another secret")
    assert asked.headers["content-type"] == "application/json"
    assert asked.headers["x-interlude-signature"] == signature(SECRET, asked.body)
    body = asked.json
    nid = notification_id("pay:ana@1", question.id, "asked")
    assert asked.headers["x-interlude-notification-id"] == body["id"] == nid
    assert body["event"] == "asked" and body["agent"] == "payer"
    assert body["session_id"] == "pay:ana@1"
    assert body["question"] == question.to_dict()
    assert body["at"] == question.raised_at
    assert body["url"] == "http://inbox.test/sessions/pay%3Aana%401"

    asyncio.run(worker.run_once())
    assert len(receiver.got) == 1  # nothing new: nothing sent again

    Inbox(store).record("pay:ana@1", {question.id: True}, by="ana")
    assert asyncio.run(worker.run_once()) == 1  # resumed, and then announced
    assert notify_app.PAID[-1] == "ana"
    answered = receiver.got[-1].json
    assert answered["event"] == "answered" and answered["question"]["id"] == question.id
    assert answered["answer"]["by"] == "ana" and answered["answer"]["answer"] is True
    assert answered["id"] == notification_id("pay:ana@1", question.id, "answered")
    asyncio.run(worker.run_once())
    assert [r.json["event"] for r in receiver.got] == ["asked", "answered"]
    stored = asyncio.run(store.notifications("pay:ana@1"))
    assert [(n.event, n.status, n.attempts) for n in stored] == [
        ("asked", "sent", 1),
        ("answered", "sent", 1),
    ]


def test_deadline_near_then_expired(
    tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOTIFY_EXPIRES", "0.4")
    store = SQLiteStore(tmp_path / "s.db")
    app = _app(Webhook(receiver.url), warn_before=3600.0)  # near from the start
    (question,) = app.start("payer", "s1", store)("Pay bo").interrupts
    assert question.expires_at == question.raised_at + 0.4
    # The worker's first pass is at the moment the question is asked, however long the machine
    # takes to get there; its later passes, once the deadline has passed, on the real clock.
    stopped: list[float] = [question.raised_at]
    worker = Worker(app, store, clock=lambda: stopped[0] if stopped else time.time())
    asyncio.run(worker.run_once())
    # delivered concurrently: in either order
    assert sorted(r.json["event"] for r in receiver.got) == ["asked", "deadline_near"]
    stopped.clear()
    wait_for(lambda: time.time() > question.expires_at, what="the deadline to pass")
    asyncio.run(worker.run_once())  # announced while pending, then settled by the worker
    asyncio.run(worker.run_once())
    assert [r.json["event"] for r in receiver.got[2:]] == ["expired"]  # once
    assert "bo" not in notify_app.PAID
    audit = asyncio.run(store.audit_trail("s1"))
    assert audit[-1]["by"] == "expiry"


def test_a_receiver_failing_twice_gets_it_once(tmp_path: Path, receiver: Receiver) -> None:
    receiver.statuses = [503, 429]
    store = SQLiteStore(tmp_path / "s.db")
    app = _app(Webhook(receiver.url, retries=2, backoff=0.01))
    app.start("payer", "s1", store)("Pay cy")
    asyncio.run(Worker(app, store).run_once())
    assert [r.headers["x-answered"] for r in receiver.got] == ["503", "429", "200"]
    assert len({r.headers["x-interlude-notification-id"] for r in receiver.got}) == 1
    assert [b["event"] for b in receiver.delivered] == ["asked"]


def test_the_outbox_retries_later_and_keeps_what_is_refused(
    tmp_path: Path, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    build = _app()  # builds the agent; the notifier below delivers
    build.start("payer", "s1", store)("Pay di")
    now = [time.time()]
    notifier = Notifier(
        store,
        Notifications(targets=(Webhook(receiver.url, retries=0),), retry_base=10.0),
        clock=lambda: now[0],
    )
    receiver.statuses = [500, 502]
    assert asyncio.run(notifier.run_once()) == 0
    (n,) = asyncio.run(store.notifications("s1"))
    assert (n.status, n.attempts) == ("pending", 1)
    assert n.last_error == f"webhook {receiver.url} failed after 1 try: HTTP 500"
    assert n.next_attempt_at is not None and now[0] + 5 <= n.next_attempt_at <= now[0] + 10
    assert asyncio.run(notifier.run_once()) == 0  # not due yet: not sent
    assert len(receiver.got) == 1
    now[0] += 10
    assert asyncio.run(notifier.run_once()) == 0  # 502: later again (10-20 s)
    now[0] += 20
    assert asyncio.run(notifier.run_once()) == 1
    assert [r.headers["x-answered"] for r in receiver.got] == ["500", "502", "200"]
    assert (notifier.sent, notifier.retried, notifier.failed) == (1, 2, 0)

    build.start("payer", "s2", store)("Pay ed")
    receiver.statuses = [404]
    with caplog.at_level(logging.ERROR, logger="interlude.notify"):
        assert asyncio.run(notifier.run_once()) == 0
    (refused,) = asyncio.run(store.notifications("s2"))
    assert (refused.status, refused.attempts) == ("failed", 1)
    assert "HTTP 404" in (refused.last_error or "") and notifier.failed == 1
    assert refused.id in caplog.text and "failed for good" in caplog.text
    now[0] += 1e6  # past the questions' deadlines too
    asyncio.run(notifier.run_once())
    ids = [r.headers["x-interlude-notification-id"] for r in receiver.got]
    assert ids.count(refused.id) == 1  # kept, reported, never sent again
    assert [r.json["event"] for r in receiver.got[4:]] == ["expired", "expired"]
