"""Damaged data: corrupt sessions and unknown format versions are reported, never half loaded.
(Corrupt recorded answers and the pending index's tolerance of corrupt sessions are checked
with their parts.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

from ..._messages import ToolUse
from ...errors import SessionCorruptError
from ...sessions import SessionStore
from ._base import StoreHooks
from ._support import _text, _update, build_agent

__all__ = ["CorruptionChecks"]


class CorruptionChecks(StoreHooks):
    """What a store does with data it cannot read (it damages it with the ``corrupt`` hooks)."""

    def test_corrupt_data_is_reported_not_half_loaded(self, tmp_path: Path) -> None:
        store = self.store_for(SessionStore, tmp_path)
        counter = tmp_path / "runs"
        agent = build_agent(store, "broken", [[ToolUse("t1", "record", {"item": "a"})]], counter)
        agent("go")
        self.corrupt(store, tmp_path, "broken")
        for attempt in range(2):
            try:
                if attempt == 0:
                    asyncio.run(store.load("broken"))
                    # a store may leave shape checks of message contents to the agent
                asyncio.run(build_agent(store, "broken", [], counter).load())
            except SessionCorruptError as exc:
                assert "broken" in str(exc)
                break
        else:
            raise AssertionError("a corrupt session loaded without error")
        assert "broken" in asyncio.run(store.list_sessions())

    def test_unknown_format_version_is_refused(self, tmp_path: Path) -> None:
        store = self.store_for(SessionStore, tmp_path)
        asyncio.run(store.save("future", _update(0, 0, [_text(0)], format_version=99, state={})))
        try:
            asyncio.run(build_agent(store, "future", [], tmp_path / "c").load())
        except SessionCorruptError as exc:
            assert "future" in str(exc) and "99" in str(exc)
        else:
            raise AssertionError("a session of format version 99 was loaded")
