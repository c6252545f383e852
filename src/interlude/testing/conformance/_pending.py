"""The pending-interrupt index (``PendingIndex``, an optional part): which questions
``pending_interrupts`` lists, how a ``PendingQuery`` narrows them, and that a corrupt session
hides no other's question."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from datetime import datetime
from pathlib import Path
from typing import Any

from ..._interrupt import Interrupt, interrupt_id
from ..._messages import ToolUse
from ...sessions import PendingIndex, PendingInterrupt, PendingQuery
from ._base import StoreHooks
from ._support import _question, _text, _update, build_agent

__all__ = ["PendingChecks"]


class PendingChecks(StoreHooks):
    """Which questions ``pending_interrupts`` lists, and how a query narrows them (for stores
    that provide ``PendingIndex``)."""

    def test_pending_none_leaves_the_index_as_it_is(self, tmp_path: Path) -> None:
        store = self.store_for(PendingIndex, tmp_path)
        question = Interrupt(
            id=interrupt_id("before_tool_call", "t1", "approve"),
            name="approve",
            source="before_tool_call",
            raised_at=5.0,
        ).to_dict()

        async def go() -> tuple[int, int, int]:
            v = await store.save("kept", _update(0, 0, [_text(0)], pending=[question]))
            v = await store.save("kept", _update(v, 1, [_text(1)], pending=None))
            kept = len(await store.pending_interrupts())
            v = await store.save("kept", _update(v, 2, [], pending=[]))
            cleared = len(await store.pending_interrupts())
            await store.save("kept", _update(v, 2, [], pending=None))
            return kept, cleared, len(await store.pending_interrupts())

        assert asyncio.run(go()) == (1, 0, 0)

    def test_delete_removes_the_pending_interrupts(self, tmp_path: Path) -> None:
        store = self.store_for(PendingIndex, tmp_path)

        async def go() -> tuple[list[str], list[str], list[str]]:
            await store.save("s", _update(0, 0, [_text(0)], pending=[_question("q", 5.0)]))
            await store.save("kept", _update(0, 0, [], pending=[_question("k", 5.0)]))
            await store.delete("s")
            listed = [e.session_id for e in await store.pending_interrupts()]
            expired = [e.session_id for e in await store.expired_interrupts(10.0)]
            await store.save("s", _update(0, 0, []))  # a new session: nothing carried over
            return listed, expired, [e.session_id for e in await store.pending_interrupts()]

        assert asyncio.run(go()) == (["kept"], ["kept"], ["kept"])

    def test_pending_interrupt_queries(self, tmp_path: Path) -> None:
        store = self.store_for(PendingIndex, tmp_path)
        marks = []
        for sid, item in (("p1", "a"), ("p2", "b"), ("p3", "c")):
            agent = build_agent(
                store, sid, [[ToolUse("t1", "record", {"item": item})]], tmp_path / sid
            )
            agent("go")
            marks.append(time.time())
            time.sleep(0.02)
        done = build_agent(store, "done", ["hello"], tmp_path / "d")
        done("hi")  # a finished session has nothing pending
        everything = asyncio.run(store.pending_interrupts())
        assert [e.session_id for e in everything] == ["p1", "p2", "p3"]
        approve = interrupt_id("before_tool_call", "t1", "approve")
        assert all(e.interrupt.id == approve and e.interrupt.name == "approve" for e in everything)
        assert [e.interrupt.tool_use.input["item"] for e in everything] == ["a", "b", "c"]  # type: ignore[union-attr]
        assert [e.tool_name for e in everything] == ["record"] * 3

        def q(**filters: Any) -> Coroutine[Any, Any, list[PendingInterrupt]]:
            return store.pending_interrupts(PendingQuery(**filters))

        assert len(asyncio.run(q(name="approve"))) == 3
        assert asyncio.run(q(name="other")) == []
        assert len(asyncio.run(q(tool_name="record"))) == 3
        assert asyncio.run(q(tool_name="nope")) == []
        assert [e.session_id for e in asyncio.run(q(older_than=marks[0]))] == ["p1"]
        assert [e.session_id for e in asyncio.run(q(newer_than=marks[1]))] == ["p3"]
        assert [e.session_id for e in asyncio.run(q(limit=2))] == ["p1", "p2"]
        resumer = build_agent(store, "p2", ["done"], tmp_path / "p2")
        resumer.resume({approve: True})
        assert [e.session_id for e in asyncio.run(q())] == ["p1", "p3"]

    def test_pending_interrupts_carry_and_filter_by_agent_and_deadline(
        self, tmp_path: Path
    ) -> None:
        store = self.store_for(PendingIndex, tmp_path)

        async def go() -> None:
            a = [_question("a1", 50.0, 1.0), _question("a2", None, 2.0)]
            await store.save("a", _update(0, 0, [], pending=a, agent="triage"))
            await store.save("b", _update(0, 0, [], pending=[_question("b1", 20, 3.0)]))
            c = [_question("c1", 10.0, 4.0)]
            await store.save("c", _update(0, 0, [], pending=c, agent="billing"))

            async def q(**filters: Any) -> list[PendingInterrupt]:
                return await store.pending_interrupts(PendingQuery(**filters))

            got = [(e.session_id, e.interrupt.id, e.agent) for e in await q()]
            assert got == [("a", "a1", "triage"), ("a", "a2", "triage"), ("b", "b1", None),
                           ("c", "c1", "billing")]  # fmt: skip
            assert [e.interrupt.id for e in await q(agent="triage")] == ["a1", "a2"]
            assert await q(agent="nobody") == []
            assert [e.interrupt.id for e in await q(expiring_before=50.0)] == ["b1", "c1"]
            assert [e.interrupt.id for e in await q(expiring_before=50.0001)] == ["a1", "b1", "c1"]
            when = datetime.fromtimestamp(20.5)
            assert [e.interrupt.id for e in await q(expiring_before=when)] == ["b1", "c1"]
            assert [e.interrupt.id for e in await q(expiring_before=1e300, agent="triage")] == [
                "a1"
            ]
            assert [e.interrupt.id for e in await q(expiring_before=1e9, limit=1)] == ["a1"]
            assert [e.interrupt.id for e in await q(expiring_before=1e9, newer_than=3.5)] == ["c1"]
            expired = await store.expired_interrupts(100.0)
            assert [(e.interrupt.id, e.agent) for e in expired] == [
                ("c1", "billing"),
                ("b1", None),
                ("a1", "triage"),
            ]

        asyncio.run(go())

    def test_a_corrupt_session_hides_no_other_pending_interrupt(self, tmp_path: Path) -> None:
        store = self.store_for(PendingIndex, tmp_path)
        for sid, item in (("broken", "a"), ("intact", "b")):
            agent = build_agent(
                store, sid, [[ToolUse("t1", "record", {"item": item})]], tmp_path / sid
            )
            assert agent("go").stop_reason == "interrupt"
        self.corrupt(store, tmp_path, "broken")
        found = asyncio.run(store.pending_interrupts())
        assert "intact" in [e.session_id for e in found], found
        # a store may still list the corrupt session's question (its index is intact) or
        # leave it out; if it leaves it out, it names it in ``skipped``, with a reason
        skipped = list(getattr(store, "skipped", ()))
        assert all(sid == "broken" and why for sid, why in skipped), skipped
        listed = {e.session_id for e in found}
        assert listed | {sid for sid, _ in skipped} == {"broken", "intact"}, (found, skipped)
        resumer = build_agent(store, "intact", ["done"], tmp_path / "intact")
        assert resumer.resume({resumer.interrupts[0].id: True}).stop_reason == "end_turn"
        assert [e.session_id for e in asyncio.run(store.pending_interrupts())] in ([], ["broken"])
