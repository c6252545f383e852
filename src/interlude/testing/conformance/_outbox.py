"""The notification outbox (``NotificationOutbox``, an optional part): added once by id, claimed
when due (earliest first, leased), settled, open questions, gone with the session."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Protocol, cast

from ...sessions import Notification, NotificationOutbox, SessionStore
from ._base import StoreHooks
from ._support import _update

__all__ = ["OutboxChecks"]


class _OutboxStore(SessionStore, NotificationOutbox, Protocol):
    """A store with sessions and an outbox, as these checks use it."""


def _note(nid: str, session: str, event: str = "asked", **kw: Any) -> Notification:
    return Notification(
        id=nid,
        session_id=session,
        interrupt_id=kw.pop("interrupt_id", "q1"),
        event=event,
        payload=kw.pop("payload", {"event": event, "text": "é \u2028", "n": [1, None]}),
        created_at=kw.pop("created_at", 1.0),
        next_attempt_at=kw.pop("next_attempt_at", 10.0),
        **kw,
    )


class OutboxChecks(StoreHooks):
    """Notifications waiting for delivery, and the questions they are about."""

    def test_notifications_are_added_once_claimed_when_due_and_settled(
        self, tmp_path: Path
    ) -> None:
        store = cast(_OutboxStore, self.store_for(NotificationOutbox, tmp_path))

        def claim(now: float, lease: float = 100.0, limit: int | None = None) -> list[str]:
            found = asyncio.run(store.claim_notifications(now, lease=lease, limit=limit))
            return [n.id for n in found]

        async def fill() -> None:
            await store.save("a", _update(0, 0, []))
            await store.save("b", _update(0, 0, []))
            got = await store.add_notifications(
                [
                    _note("n1", "a"),
                    _note("n2", "a", "deadline_near", next_attempt_at=5.0),
                    _note("n3", "b", created_at=0.5),
                    _note("n4", "ghost"),  # no such session: left out
                    _note("n1", "a", payload={"other": True}),  # twice in one call: once
                ]
            )
            assert got == ["n1", "n2", "n3"]
            assert await store.add_notifications([_note("n1", "a", payload={"x": 1})]) == []
            (stored,) = [n for n in await store.notifications("a") if n.id == "n1"]
            assert stored == _note("n1", "a")  # as first added, payload and all
            assert [n.id for n in await store.notifications("b")] == ["n3"]
            assert await store.notifications("ghost") == []

        asyncio.run(fill())
        assert claim(7.0) == ["n2"]  # due at 5
        assert claim(7.0) == []  # claimed: due again only when its lease runs out
        assert claim(20.0, limit=1) == ["n1"]  # n1 and n3 are due at 10: by id
        assert claim(20.0) == ["n3"]
        assert claim(50.0) == []
        assert claim(107.5, lease=1.0) == ["n2"]  # its notifier died: due again (7 + 100)
        (taken,) = asyncio.run(store.claim_notifications(200.0, lease=3.0, limit=1))
        assert (taken.id, taken.next_attempt_at, taken.status) == ("n2", 203.0, "pending")

        async def settle() -> None:
            await store.settle_notification("n2", "sent")
            await store.settle_notification("n1", "retry", retry_at=300.0, error="HTTP 503")
            await store.settle_notification("n3", "failed", error="HTTP 404")
            await store.settle_notification("nobody", "sent")  # no such one: no error

        asyncio.run(settle())
        assert claim(299.0) == []
        assert claim(300.0) == ["n1"]
        a = {n.id: n for n in asyncio.run(store.notifications("a"))}
        assert (a["n2"].status, a["n2"].attempts, a["n2"].next_attempt_at) == ("sent", 1, None)
        assert (a["n1"].status, a["n1"].attempts, a["n1"].last_error) == (
            "pending",
            1,
            "HTTP 503",
        )
        (b,) = asyncio.run(store.notifications("b"))
        assert (b.status, b.attempts, b.next_attempt_at, b.last_error) == (
            "failed",
            1,
            None,
            "HTTP 404",
        )
        assert claim(1e12) == ["n1"]  # its lease ran out
        asyncio.run(store.settle_notification("n1", "sent"))
        assert claim(1e12) == []  # sent and failed ones are never due again

    def test_open_questions_and_deleting_a_session(self, tmp_path: Path) -> None:
        store = cast(_OutboxStore, self.store_for(NotificationOutbox, tmp_path))

        def open_ones(limit: int | None = None) -> list[tuple[str, str]]:
            found = asyncio.run(store.open_questions(limit=limit))
            assert all(n.event == "asked" for n in found)
            return [(n.session_id, n.interrupt_id) for n in found]

        async def add(*notes: Notification) -> None:
            await store.add_notifications(list(notes))

        asyncio.run(store.save("a", _update(0, 0, [])))
        asyncio.run(store.save("b", _update(0, 0, [])))
        asyncio.run(
            add(
                _note("a1", "a", created_at=3.0),
                _note("a2", "a", interrupt_id="q2", created_at=1.0),
                _note("b1", "b", created_at=2.0),
                _note("a2-near", "a", "deadline_near", interrupt_id="q2"),  # does not close
            )
        )
        assert open_ones() == [("a", "q2"), ("b", "q1"), ("a", "q1")]
        assert open_ones(limit=1) == [("a", "q2")]
        asyncio.run(add(_note("a1-done", "a", "answered")))
        asyncio.run(add(_note("b1-gone", "b", "withdrawn", status="skipped", next_attempt_at=None)))
        assert open_ones() == [("a", "q2")]
        asyncio.run(add(_note("a2-late", "a", "expired", interrupt_id="q2")))
        assert open_ones() == []
        # a closing event stored first: the question is not open when asked after it
        asyncio.run(add(_note("b3-done", "b", "answered", interrupt_id="q3")))
        asyncio.run(add(_note("b3", "b", interrupt_id="q3")))
        assert open_ones() == []
        assert [n.id for n in asyncio.run(store.claim_notifications(1e9, lease=1.0))] == [
            "a1",
            "a1-done",
            "a2",
            "a2-late",
            "a2-near",
            "b1",
            "b3",
            "b3-done",
        ]  # the skipped one is never delivered
        asyncio.run(add(_note("a9", "a", interrupt_id="q9")))
        asyncio.run(store.delete("a"))
        assert asyncio.run(store.notifications("a")) == []
        assert open_ones() == []
        left = asyncio.run(store.claim_notifications(1e12, lease=1.0))
        assert [n.id for n in left] == ["b1", "b3", "b3-done"]  # only b's, due again
