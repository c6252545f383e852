"""Agent names and audit trails: stored with the save, kept, and gone with the session."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ...errors import StateFormatError
from ...sessions import SessionStore, StoredSession
from ._base import StoreHooks
from ._support import _loaded, _question, _refused, _text, _update

__all__ = ["AuditChecks"]


class AuditChecks(StoreHooks):
    """The agent name a session is saved under and its append-only audit trail."""

    def test_agent_name_is_stored_kept_and_overwritten(self, tmp_path: Path) -> None:
        store = self.store_for(SessionStore, tmp_path)

        async def go() -> tuple[list[str | None], str | None]:
            await store.save("s", _update(0, 0, [_text(0)]))  # saved without a name
            names = [(await _loaded(store, "s")).agent]
            v = await store.save("s", _update(1, 1, [], agent="triage"))
            names.append((await _loaded(store, "s")).agent)
            v = await store.save("s", _update(v, 1, [_text(1)]))  # None keeps the name
            names.append((await _loaded(store, "s")).agent)
            v = await store.save("s", _update(v, 2, [], agent="billing"))
            await _refused(store, "s", _update(1, 1, [], agent="late"))
            names.append((await _loaded(store, "s")).agent)
            await store.save("t", _update(0, 0, [], agent="first"))
            return names, (await _loaded(store, "t")).agent

        assert asyncio.run(go()) == ([None, "triage", "triage", "billing"], "first")

    def test_audit_entries_are_appended_with_the_save(self, tmp_path: Path) -> None:
        store = self.store_for(SessionStore, tmp_path)
        a1 = {"event": "asked", "interrupt": "i1", "at": 1.5}
        a2 = {"event": "answered", "interrupt": "i1", "answer": {"ok": True, "note": "é"}}
        a3 = {"event": "expired", "interrupt": "i2", "nested": [1, None, "x", 2.5]}
        lost = {"event": "lost"}

        async def go() -> tuple[StoredSession, list[Any]]:
            assert await store.audit_trail("s") == []  # no such session
            v = await store.save("s", _update(0, 0, [_text(0)], audit=[a1]))
            assert await store.audit_trail("s") == [a1]
            v = await store.save("s", _update(v, 1, [_text(1)]))  # no entries: none added
            await _refused(store, "s", _update(1, 1, [_text(9)], audit=[lost]))  # stale version
            await _refused(store, "s", _update(v, 0, [], audit=[lost]))  # wrong message index
            await _refused(store, "s", _update(0, 0, [], audit=[lost]))  # "new" but stored
            v = await store.save("s", _update(v, 2, [], audit=[a2, a3]))
            try:  # an entry that is not an object is refused before anything is written
                await store.save("s", _update(v, 2, [], audit=[lost, ["not", "an", "object"]]))
            except StateFormatError:
                pass
            else:
                raise AssertionError("an audit entry that is not an object was stored")
            await _refused(store, "new", _update(0, 1, [_text(1)], audit=[lost]))
            assert await store.audit_trail("new") == [] and await store.load("new") is None
            return await _loaded(store, "s"), await store.audit_trail("s")

        got, trail = asyncio.run(go())
        assert got.audit == trail == [a1, a2, a3]
        assert got.version == 3 and got.messages == [_text(0), _text(1)]

    def test_audit_and_agent_survive_reopening_the_store(self, tmp_path: Path) -> None:
        url = self.store_url(tmp_path)
        if url is None:
            import pytest

            pytest.skip("this store lives in one process")
        from ...sessions import open_store

        store = self.store_for(SessionStore, tmp_path)
        e1, e2, e3 = {"n": 1}, {"n": 2, "who": "ann"}, {"n": 3}
        asyncio.run(store.save("s", _update(0, 0, [_text(0)], agent="a", audit=[e1, e2])))
        getattr(store, "close", lambda: None)()
        again = self.make_store(tmp_path)  # a new store object on the same path or database
        assert asyncio.run(again.audit_trail("s")) == [e1, e2]
        asyncio.run(again.save("s", _update(1, 1, [], audit=[e3])))
        other = open_store(url)
        try:
            got = asyncio.run(_loaded(other, "s"))
            assert (got.agent, got.audit) == ("a", [e1, e2, e3])
            assert asyncio.run(other.audit_trail("s")) == [e1, e2, e3]
        finally:
            getattr(other, "close", lambda: None)()

    def test_delete_removes_the_audit_trail(self, tmp_path: Path) -> None:
        store = self.store_for(SessionStore, tmp_path)

        async def go() -> tuple[list[Any], list[Any], list[Any], str | None]:
            pending = [_question("q", 5.0)]
            await store.save("s", _update(0, 0, [_text(0)], pending=pending, audit=[{"n": 1}]))
            await store.save("kept", _update(0, 0, [], audit=[{"kept": True}]))
            await store.delete("s")
            gone = await store.audit_trail("s")
            await store.save("s", _update(0, 0, [], audit=[{"n": 2}]))  # a new session
            again = await _loaded(store, "s")
            return gone, again.audit, await store.audit_trail("kept"), again.agent

        assert asyncio.run(go()) == ([], [{"n": 2}], [{"kept": True}], None)
