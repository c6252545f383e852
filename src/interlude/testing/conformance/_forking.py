"""Forks (``store.fork``, see ``interlude.sessions._forking``; a store without its own ``fork``
gets the copy every shipped store uses): the new session starts from the source's first
messages and the update's own parts, each then changes alone, and the source never changes."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ...errors import InvalidSessionIdError, SessionConflictError, SessionError
from ...sessions import SessionStore, SessionUpdate, StoredSession, fork_by_copy
from ._base import StoreHooks
from ._support import _loaded, _question, _text, _update

__all__ = ["ForkChecks"]


async def _fork(store: SessionStore, source: str, new: str, update: SessionUpdate) -> int:
    own = getattr(store, "fork", None)
    if own is not None:
        version: int = await own(source, new, update)
        return version
    return await fork_by_copy(store, source, new, update)


class ForkChecks(StoreHooks):
    """The ``fork`` operation: a new session from the start of another."""

    def test_a_fork_starts_from_the_source_and_leaves_it_as_it_was(self, tmp_path: Path) -> None:
        store = self.store_for(SessionStore, tmp_path)
        question = _question("q-fork", None)
        audit = [{"name": "fork", "answer": {"session": "s", "checkpoint": "m1"}}]

        async def go() -> tuple[StoredSession, StoredSession, StoredSession, list[str]]:
            v = await store.save("s", _update(0, 0, [_text(0), _text(1)], state={"n": 1}))
            v = await store.save("s", _update(v, 2, [_text(2)], audit=[{"answer": 1}]))
            before = await _loaded(store, "s")
            made = _update(
                0,
                2,
                [_text(7)],
                pause={"p": 1},
                pending=[question],
                state={"n": 2},
                agent="ops",
                audit=audit,
            )
            version = await _fork(store, "s", "s-fork", made)
            assert version == 1, version
            fork = await _loaded(store, "s-fork")
            # each changes alone from here
            await store.save("s-fork", _update(version, 3, [_text(8)], audit=[{"later": 1}]))
            await store.save("s", _update(v, 3, [_text(3)]))
            return before, fork, await _loaded(store, "s-fork"), sorted(await store.list_sessions())

        before, fork, later, listed = asyncio.run(go())
        assert fork.messages == [_text(0), _text(1), _text(7)]
        assert (fork.pause, fork.state, fork.agent, fork.audit) == (
            {"p": 1},
            {"n": 2},
            "ops",
            audit,
        )
        assert fork.claim is None and fork.version == 1
        assert later.messages == [_text(0), _text(1), _text(7), _text(8)]
        assert later.audit == [*audit, {"later": 1}]
        source = asyncio.run(_loaded(store, "s"))
        assert source.messages == [*before.messages, _text(3)] and source.audit == before.audit
        assert source.state == before.state == {"n": 1}
        assert listed == ["s", "s-fork"]

    def test_a_fork_needs_a_source_a_new_id_and_no_more_messages_than_the_source(
        self, tmp_path: Path
    ) -> None:
        store = self.store_for(SessionStore, tmp_path)

        async def refused(source: str, new: str, kept: int, error: type[Exception]) -> None:
            try:
                await _fork(store, source, new, _update(0, kept, []))
            except error:
                return
            raise AssertionError(f"fork {source!r} -> {new!r} keeping {kept} was accepted")

        async def go() -> StoredSession:
            await store.save("s", _update(0, 0, [_text(0)]))
            await store.save("taken", _update(0, 0, [_text(5)]))
            await refused("missing", "f1", 0, SessionError)
            await refused("s", "f2", 2, SessionError)  # more messages than it holds
            await refused("s", "taken", 1, SessionConflictError)
            await refused("s", "bad/../id", 1, InvalidSessionIdError)
            assert await store.load("f1") is None and await store.load("f2") is None
            return await _loaded(store, "taken")

        taken = asyncio.run(go())
        assert taken.messages == [_text(5)] and taken.version == 1

    def test_deleting_the_source_leaves_the_fork(self, tmp_path: Path) -> None:
        store = self.store_for(SessionStore, tmp_path)

        async def go() -> StoredSession | None:
            await store.save("s", _update(0, 0, [_text(0), _text(1)]))
            await _fork(store, "s", "f", _update(0, 1, []))
            await store.delete("s")
            assert await store.load("s") is None
            return await store.load("f")

        fork = asyncio.run(go())
        assert fork is not None and fork.messages == [_text(0)]
