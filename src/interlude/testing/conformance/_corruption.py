"""Damaged data: corrupt sessions, corrupt recorded answers and unknown format versions are
reported, never half loaded, and hide no other session's question."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ..._messages import ToolUse
from ...errors import SessionCorruptError
from ._base import StoreHooks
from ._support import _text, _update, build_agent

__all__ = ["CorruptionChecks"]


class CorruptionChecks(StoreHooks):
    """What a store does with data it cannot read (it damages it with the ``corrupt`` hooks)."""

    def test_corrupt_data_is_reported_not_half_loaded(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        counter = tmp_path / "runs"
        agent = build_agent(store, "broken", [[ToolUse("t1", "record", {"item": "a"})]], counter)
        agent("go")
        self.corrupt(store, tmp_path, "broken")
        for attempt in range(2):
            try:
                if attempt == 0:
                    asyncio.run(store.load("broken"))
                    # a store may leave shape checks of message contents to the agent
                build_agent(store, "broken", [], counter)
            except SessionCorruptError as exc:
                assert "broken" in str(exc)
                break
        else:
            raise AssertionError("a corrupt session loaded without error")
        assert "broken" in asyncio.run(store.list_sessions())

    def test_unknown_format_version_is_refused(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        asyncio.run(store.save("future", _update(0, 0, [_text(0)], format_version=99, state={})))
        try:
            build_agent(store, "future", [], tmp_path / "c")
        except SessionCorruptError as exc:
            assert "future" in str(exc) and "99" in str(exc)
        else:
            raise AssertionError("a session of format version 99 was loaded")

    def test_a_corrupt_session_hides_no_other_pending_interrupt(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
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

    def test_corrupt_recorded_answers_are_reported(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        answer = {"interrupt_id": "q", "answer": 1, "by": "ann", "at": 1.0, "shown": None}
        asyncio.run(store.save("bad", _update(0, 0, [])))
        asyncio.run(store.record_answers("bad", [answer]))
        try:
            self.corrupt_answers(store, tmp_path, "bad")
        except NotImplementedError:
            import pytest

            pytest.skip("no way to damage this store's recorded answers")
        try:
            asyncio.run(store.recorded_answers("bad"))
        except SessionCorruptError as exc:
            assert "bad" in str(exc)
        else:
            raise AssertionError("corrupt recorded answers were read")
