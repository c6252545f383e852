"""Rewinds (``store.rewind``, an optional operation, see ``interlude.sessions._protocol``): a save
that first cuts the stored conversation back, in the same transaction. A store without the
method skips these checks (an undo then says the store cannot rewind); a shipped store fails
them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, cast

from ...errors import (
    AlreadyAnsweredError,
    InvalidSessionIdError,
    SessionConflictError,
    SessionError,
)
from ...sessions import AnswerQueue, PendingIndex, SessionStore, SessionUpdate, StoredSession
from ._base import StoreHooks, _close
from ._support import _loaded, _question, _refused, _text, _update

__all__ = ["RewindChecks"]

Rewind = Callable[[str, SessionUpdate], Coroutine[Any, Any, int]]

_CLAIM = {"owner": "worker:1", "expires_at": 4102444800.0}


def _rewinder(store: SessionStore) -> Rewind:
    """The store's ``rewind``; the check is skipped when it has none (but a shipped store, one
    of ``interlude.sessions``, must have it)."""
    own = getattr(store, "rewind", None)
    if own is not None:
        return cast(Rewind, own)
    name = type(store).__name__
    if type(store).__module__.startswith("interlude.sessions"):
        raise AssertionError(f"{name} is a shipped store: it must have rewind")
    import pytest

    _close(store)
    pytest.skip(f"{name} has no rewind (optional: an undo says the store cannot rewind)")


async def _refused_rewind(
    rewind: Rewind,
    session_id: str,
    update: SessionUpdate,
    errors: tuple[type[Exception], ...] = (SessionConflictError,),
) -> None:
    try:
        await rewind(session_id, update)
    except errors:
        return
    raise AssertionError(f"a rewind of {session_id!r} was accepted: {update}")


async def _four(store: SessionStore, **kw: Any) -> int:
    """Session ``s`` with messages 0..3, saved in two saves; its version."""
    v = await store.save("s", _update(0, 0, [_text(0), _text(1)], audit=[{"answer": 1}]))
    return await store.save("s", _update(v, 2, [_text(2), _text(3)], **kw))


class RewindChecks(StoreHooks):
    """The ``rewind`` operation: a save that cuts the conversation back first."""

    def test_a_rewind_cuts_the_conversation_and_saves_the_rest(self, tmp_path: Path) -> None:
        store = self.store_for(SessionStore, tmp_path)
        rewind = _rewinder(store)
        made = _update(
            2,
            2,
            [_text(7)],
            pause={"p": 2},
            pending=[_question("q-new", None)],
            state={"n": 2},
            claim=_CLAIM,
            tools=["record", "other"],
            audit=[{"undo": "m2"}],
        )

        async def go() -> tuple[int, StoredSession, int, int]:
            question = _question("q-old", None)
            v = await _four(store, pause={"p": 1}, pending=[question], state={"n": 1}, agent="ops")
            assert v == 2, v
            written = getattr(store, "bytes_written", 0)
            version = await rewind("s", made)
            return version, await _loaded(store, "s"), written, getattr(store, "bytes_written", 0)

        version, got, before, after = asyncio.run(go())
        assert version == 3 and got.version == 3
        assert got.messages == [_text(0), _text(1), _text(7)]
        assert (got.pause, got.state, got.claim, got.tools) == (
            {"p": 2},
            {"n": 2},
            _CLAIM,
            ["record", "other"],
        )
        assert got.agent == "ops"  # None in the update leaves the stored name
        assert got.audit == [{"answer": 1}, {"undo": "m2"}]  # appended: the trail is not cut
        assert asyncio.run(store.audit_trail("s")) == got.audit
        assert after > before, "a rewind's JSON bytes are counted in bytes_written"

    def test_a_stale_rewind_changes_nothing(self, tmp_path: Path) -> None:
        store = self.store_for(SessionStore, tmp_path)
        rewind = _rewinder(store)

        async def go() -> tuple[StoredSession, StoredSession]:
            v = await _four(store, pause={"p": 1}, state={"n": 1})
            before = await _loaded(store, "s")
            for stale in (v - 1, v + 1):
                update = _update(stale, 1, [_text(9)], state={"n": 9}, audit=[{"x": 1}])
                await _refused_rewind(rewind, "s", update)
            return before, await _loaded(store, "s")

        before, after = asyncio.run(go())
        assert after == before
        assert after.messages == [_text(i) for i in range(4)]

    def test_a_rewind_past_the_stored_messages_changes_nothing(self, tmp_path: Path) -> None:
        store = self.store_for(SessionStore, tmp_path)
        rewind = _rewinder(store)

        async def go() -> tuple[StoredSession, StoredSession, int, StoredSession]:
            v = await _four(store)
            before = await _loaded(store, "s")
            await _refused_rewind(rewind, "s", _update(v, 5, [_text(9)], audit=[{"x": 1}]))
            after = await _loaded(store, "s")
            # at the stored count, a rewind is a save
            version = await rewind("s", _update(v, 4, [_text(4)], audit=[{"y": 2}]))
            return before, after, version, await _loaded(store, "s")

        before, after, version, saved = asyncio.run(go())
        assert after == before
        assert version == before.version + 1 == saved.version
        assert saved.messages == [_text(i) for i in range(5)]
        assert saved.audit == [{"answer": 1}, {"y": 2}]

    def test_saves_after_a_rewind_append_at_the_new_count(self, tmp_path: Path) -> None:
        store = self.store_for(SessionStore, tmp_path)
        rewind = _rewinder(store)

        async def go() -> tuple[StoredSession, StoredSession]:
            v = await _four(store)
            v = await rewind("s", _update(v, 1, [_text(5)]))
            await _refused(store, "s", _update(v, 4, [_text(6)]))  # the old count
            v = await store.save("s", _update(v, 2, [_text(6)], audit=[{"later": 1}]))
            first = await _loaded(store, "s")
            v = await rewind("s", _update(v, 2, [_text(7), _text(8)]))  # again, past the first
            v = await store.save("s", _update(v, 4, [_text(9)]))
            return first, await _loaded(store, "s")

        first, last = asyncio.run(go())
        assert first.messages == [_text(0), _text(5), _text(6)]
        assert first.audit == [{"answer": 1}, {"later": 1}] and first.version == 4
        assert last.messages == [_text(0), _text(5), _text(7), _text(8), _text(9)]
        assert last.version == 6

    def test_a_rewind_to_no_messages(self, tmp_path: Path) -> None:
        store = self.store_for(SessionStore, tmp_path)
        rewind = _rewinder(store)

        async def go() -> tuple[StoredSession, StoredSession, StoredSession]:
            v = await _four(store)
            v = await rewind("s", _update(v, 0, []))
            empty = await _loaded(store, "s")
            v = await store.save("s", _update(v, 0, [_text(5)]))
            saved = await _loaded(store, "s")
            await rewind("s", _update(v, 0, [_text(6), _text(7)]))
            return empty, saved, await _loaded(store, "s")

        empty, saved, again = asyncio.run(go())
        assert (empty.messages, empty.version) == ([], 3)
        assert (saved.messages, saved.version) == ([_text(5)], 4)
        assert (again.messages, again.version) == ([_text(6), _text(7)], 5)

    def test_a_rewind_needs_a_stored_session(self, tmp_path: Path) -> None:
        store = self.store_for(SessionStore, tmp_path)
        rewind = _rewinder(store)
        errors = (SessionConflictError, SessionError)

        async def go() -> tuple[StoredSession | None, list[str]]:
            await store.save("s", _update(0, 0, [_text(0)]))
            await _refused_rewind(rewind, "missing", _update(0, 0, [_text(1)]), errors)
            await _refused_rewind(rewind, "missing", _update(1, 0, [_text(1)]), errors)
            bad = (InvalidSessionIdError,)
            await _refused_rewind(rewind, "../x", _update(1, 0, []), bad)
            return await store.load("missing"), await store.list_sessions()

        missing, listed = asyncio.run(go())
        assert missing is None and listed == ["s"]

    def test_a_rewind_replaces_the_pending_index(self, tmp_path: Path) -> None:
        store = self.store_for(PendingIndex, tmp_path)
        rewind = _rewinder(store)

        async def questions() -> list[tuple[str, str]]:
            return [(e.session_id, e.interrupt.id) for e in await store.pending_interrupts()]

        async def go() -> list[list[tuple[str, str]]]:
            await store.save("other", _update(0, 0, [], pending=[_question("q-other", None)]))
            v = await _four(store, pause={"p": 1}, pending=[_question("q-old", None)])
            seen = [await questions()]
            v = await rewind("s", _update(v, 3, [], pause={"p": 1}, pending=None))
            seen.append(await questions())  # None leaves the index
            v = await rewind("s", _update(v, 2, [_text(5)], pending=[]))
            seen.append(await questions())  # the old pause's question is gone
            await rewind("s", _update(v, 1, [], pause={"p": 3}, pending=[_question("q-new", None)]))
            seen.append(await questions())
            return seen

        old, kept, cleared, new = asyncio.run(go())
        assert sorted(old) == sorted(kept) == [("other", "q-other"), ("s", "q-old")]
        assert cleared == [("other", "q-other")]
        assert sorted(new) == [("other", "q-other"), ("s", "q-new")]

    def test_a_refused_rewind_cuts_nothing_and_one_applying_answers_removes_them(
        self, tmp_path: Path
    ) -> None:
        store = self.store_for(AnswerQueue, tmp_path)
        rewind = _rewinder(store)
        recorded = {"interrupt_id": "a", "answer": True, "by": "ann", "at": 1.0, "shown": None}
        answers = [{"interrupt_id": "a", "by": "bo", "answer": False}]

        async def go() -> tuple[StoredSession, StoredSession, StoredSession, int]:
            v = await _four(store, pause={"p": 1}, pending=[_question("a", None)])
            await store.record_answers("s", [recorded], expected_version=v)
            before = await _loaded(store, "s")
            update = _update(v, 1, [_text(5)], pending=[], audit=answers)
            await _refused_rewind(rewind, "s", update, (AlreadyAnsweredError,))
            after = await _loaded(store, "s")
            ann = [{"interrupt_id": "a", "by": "ann", "answer": True}]
            applying = _update(v, 1, [_text(5)], pending=[], audit=ann, applied_answers=[1])
            await rewind("s", applying)
            left = len(await store.recorded_answers("s"))
            return before, after, await _loaded(store, "s"), left

        before, after, rewound, left = asyncio.run(go())
        assert after == before  # nothing cut, nothing saved
        assert rewound.messages == [_text(0), _text(5)] and rewound.version == before.version + 1
        assert rewound.audit[-1]["by"] == "ann" and left == 0
