"""Deadlines: ``expired_interrupts``, earliest deadline first (``PendingIndex``, an optional
part)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path

from ...sessions import PendingIndex
from ._base import StoreHooks
from ._support import _question, _update

__all__ = ["DeadlineChecks"]


class DeadlineChecks(StoreHooks):
    """Which pending questions are past their deadline, and in what order."""

    def test_expired_interrupts(self, tmp_path: Path) -> None:
        store = self.store_for(PendingIndex, tmp_path)

        async def fill() -> None:
            b = [_question("i2", 30), _question("free", None)]  # an int deadline is a time too
            await store.save("b", _update(0, 0, [], pending=b))
            await store.save("b", _update(1, 0, [], pending=None))  # the index as it is
            await store.save("b", _update(2, 0, [], pending=[*b, _question("i1", 30.0)]))
            late = _question("late", 50.0, default="no", has_default=True)
            await store.save("a", _update(0, 0, [], pending=[_question("i9", 30.0), late]))
            await store.save("c", _update(0, 0, [], pending=[_question("first", 10, 20.0)]))
            await store.save("d", _update(0, 0, [], pending=[_question("never", None, 0.5)]))

        asyncio.run(fill())

        def expired(now: datetime | float, limit: int | None = None) -> list[tuple[str, str]]:
            found = asyncio.run(store.expired_interrupts(now, limit=limit))
            return [(e.session_id, e.interrupt.id) for e in found]

        at_30 = [("c", "first"), ("a", "i9"), ("b", "i1"), ("b", "i2")]
        assert expired(30.0) == at_30  # at the deadline counts; ties by session, then id
        assert expired(30) == at_30
        assert expired(datetime.fromtimestamp(30.0)) == at_30
        assert expired(29.999) == [("c", "first")]
        assert expired(9.0) == []
        assert expired(30.0, limit=2) == at_30[:2]
        assert expired(30.0, limit=0) == []
        everything = asyncio.run(store.expired_interrupts(1e12))
        assert [(e.session_id, e.interrupt.id) for e in everything] == [*at_30, ("a", "late")]
        assert [e.expires_at for e in everything] == [10.0, 30.0, 30.0, 30.0, 50.0]
        late = everything[-1].interrupt
        assert (late.default, late.has_default, late.name) == ("no", True, "ask")
        assert everything[0].raised_at == 20.0
        # questions without a deadline are pending, but never expire
        assert len(asyncio.run(store.pending_interrupts())) == 7
        ids = {e.interrupt.id for e in asyncio.run(store.expired_interrupts(float("1e300")))}
        assert not ids & {"free", "never"}
        asyncio.run(store.save("c", _update(1, 0, [], pending=[])))  # answered: not expired
        asyncio.run(store.save("a", _update(1, 0, [], pending=None)))  # still waiting
        assert expired(1e12) == [("a", "i9"), ("b", "i1"), ("b", "i2"), ("a", "late")]
