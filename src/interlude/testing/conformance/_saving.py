"""Saving and loading: round trips, append-only writes, version conflicts, ids, deletes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ..._interrupt import Interrupt
from ..._messages import ToolUse
from ...errors import InvalidSessionIdError, SessionConflictError
from ...sessions import SessionStore
from ._base import StoreHooks
from ._support import BAD_IDS, _text, _update, build_agent

__all__ = ["SavingChecks"]


class SavingChecks(StoreHooks):
    """What a save writes, what a load returns, and which saves are refused."""

    def test_round_trip(self, tmp_path: Path) -> None:
        store = self.store_for(SessionStore, tmp_path)
        assert asyncio.run(store.load("s1")) is None
        interrupt = Interrupt(id="v1:x:m1:abc", name="ask", source="before_model_call")
        pause = {"step": {"kind": "before_model_call"}, "note": [1, 2.5, None, "é"]}
        update = _update(
            0,
            0,
            [_text(0), _text(1)],
            pause=pause,
            pending=[interrupt.to_dict()],
            state={"k": {"n": 1}},
        )
        assert asyncio.run(store.save("s1", update)) == 1
        got = asyncio.run(store.load("s1"))
        assert got is not None
        assert (got.session_id, got.version, got.format_version) == ("s1", 1, 1)
        assert got.messages == [_text(0), _text(1)]
        assert got.pause == pause
        assert got.state == {"k": {"n": 1}}
        assert got.tools == ["record"]

    def test_append_only_writes(self, tmp_path: Path) -> None:
        store = self.store_for(SessionStore, tmp_path)
        history = [_text(i, 1000) for i in range(100)]
        asyncio.run(store.save("s1", _update(0, 0, history, state={})))
        before = store.bytes_written  # type: ignore[attr-defined]
        asyncio.run(store.save("s1", _update(1, 100, [_text(100)], pause={"p": 1})))
        written = store.bytes_written - before  # type: ignore[attr-defined]
        assert 0 < written < 2_000, f"a one-message save wrote {written} bytes"
        got = asyncio.run(store.load("s1"))
        assert got is not None and got.version == 2
        assert got.messages == [*history, _text(100)]
        assert got.state == {}  # state=None in an update leaves it as it was

    def test_compare_and_swap_conflicts_write_nothing(self, tmp_path: Path) -> None:
        store = self.store_for(SessionStore, tmp_path)
        asyncio.run(store.save("s1", _update(0, 0, [_text(0)])))
        for bad in (
            _update(0, 0, [_text(9)]),
            _update(5, 1, [_text(9)]),
            _update(1, 0, [_text(9)]),
        ):
            try:
                asyncio.run(store.save("s1", bad))
            except SessionConflictError as exc:
                assert "s1" in str(exc)
            else:
                raise AssertionError(f"a stale save was accepted: {bad}")
        got = asyncio.run(store.load("s1"))
        assert got is not None and got.version == 1 and got.messages == [_text(0)]
        try:  # a new session must start at message 0
            asyncio.run(store.save("s2", _update(0, 1, [_text(1)])))
        except SessionConflictError:
            pass
        else:
            raise AssertionError("a first save appending at message 1 was accepted")
        assert asyncio.run(store.load("s2")) is None
        assert asyncio.run(store.list_sessions()) == ["s1"]

    def test_list_and_delete(self, tmp_path: Path) -> None:
        store = self.store_for(SessionStore, tmp_path)
        for sid in ("b", "a", "c"):
            asyncio.run(store.save(sid, _update(0, 0, [_text(0)])))
        assert asyncio.run(store.list_sessions()) == ["a", "b", "c"]
        asyncio.run(store.delete("b"))
        asyncio.run(store.delete("never-there"))
        assert asyncio.run(store.list_sessions()) == ["a", "c"]
        assert asyncio.run(store.load("b")) is None
        assert asyncio.run(store.save("b", _update(0, 0, [_text(1)]))) == 1

    def test_bad_ids_are_refused(self, tmp_path: Path) -> None:
        store = self.store_for(SessionStore, tmp_path)
        for bad in BAD_IDS:
            calls = [store.load(bad), store.save(bad, _update(0, 0, [])), store.delete(bad)]
            for call in calls:
                try:
                    asyncio.run(call)
                except InvalidSessionIdError as exc:
                    assert repr(bad)[:20] in str(exc) or bad == ""
                else:
                    raise AssertionError(f"session id {bad!r} was accepted")
            try:
                build_agent(store, bad, [], tmp_path / "c")
            except InvalidSessionIdError:
                pass
            else:
                raise AssertionError(f"Agent accepted session id {bad!r}")
        assert asyncio.run(store.list_sessions()) == []

    def test_pause_write_does_not_grow_with_history(self, tmp_path: Path) -> None:
        store = self.store_for(SessionStore, tmp_path)
        short = _pause_bytes(store, tmp_path, "short", 10)
        long = _pause_bytes(store, tmp_path, "long", 1000)
        assert long <= 2 * short, f"a pause after 1000 messages wrote {long} B, after 10 {short} B"


def _pause_bytes(store: SessionStore, tmp_path: Path, sid: str, history: int) -> int:
    """Bytes a store writes for a run that pauses at the end of a ``history``-message talk."""
    from ..._messages import Message, Text

    messages = [
        Message("user" if i % 2 == 0 else "assistant", [Text(f"message {i} " + "x" * 40)])
        for i in range(history)
    ]
    turns: list[Any] = ["ok", [ToolUse("t1", "record", {"item": "x"})]]
    agent = build_agent(store, sid, turns, tmp_path / sid, messages=messages)
    assert agent("warm up").stop_reason == "end_turn"  # stores the history
    before = store.bytes_written  # type: ignore[attr-defined]
    assert agent("one more").stop_reason == "interrupt"
    return int(store.bytes_written - before)  # type: ignore[attr-defined]
