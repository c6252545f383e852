"""Recorded answers (``AnswerQueue``, an optional part): seq order, first answer wins,
cleared seqs never reused, corrupt answers reported, and the sessions a worker has to resume."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from typing import Any

from ...errors import (
    AlreadyAnsweredError,
    SessionConflictError,
    SessionCorruptError,
    SessionError,
)
from ...sessions import AnswerQueue
from ._base import StoreHooks
from ._support import _loaded, _question, _refused, _text, _update

__all__ = ["AnswerChecks"]


class AnswerChecks(StoreHooks):
    """Answers recorded ahead of a resume, and ``sessions_to_resume``."""

    def test_recorded_answers_first_answer_wins(self, tmp_path: Path) -> None:
        store = self.store_for(AnswerQueue, tmp_path)

        def answer(iid: str, value: Any = True, by: str = "ann", at: float = 5.0) -> dict[str, Any]:
            return {"interrupt_id": iid, "answer": value, "by": by, "at": at, "shown": "d" + iid}

        async def refused(answers: list[dict[str, Any]], named: str) -> None:
            try:
                await store.record_answers("s", answers)
            except SessionConflictError as exc:
                assert named in str(exc) and "s" in str(exc)
            else:
                raise AssertionError(f"answers {answers} were recorded twice")

        async def go() -> None:
            await store.save("s", _update(0, 0, [_text(0)], pending=[_question("q1", None)]))
            assert await store.recorded_answers("s") == []
            got = await store.record_answers(
                "s", [answer("q1", {"ok": [1, None, "é"]}), answer("q2", "no", by="bob", at=6)]
            )
            assert [(a.seq, a.interrupt_id, a.answer, a.by, a.at, a.shown) for a in got] == [
                (1, "q1", {"ok": [1, None, "é"]}, "ann", 5.0, "dq1"),
                (2, "q2", "no", "bob", 6.0, "dq2"),
            ]
            assert await store.recorded_answers("s") == got
            await refused([answer("q3"), answer("q1", False)], "q1")  # q1 is taken
            await refused([answer("q4"), answer("q4", False)], "q4")  # twice in one call
            assert await store.recorded_answers("s") == got  # nothing of those was recorded
            third = await store.record_answers("s", [answer("q3", at=7.0)])
            assert [a.seq for a in third] == [3]
            try:
                await store.record_answers("nobody", [answer("q1")])
            except SessionConflictError:
                raise AssertionError("an unknown session is not a conflict") from None
            except SessionError as exc:
                assert "nobody" in str(exc)
            else:
                raise AssertionError("answers were recorded for a session that does not exist")
            assert await store.recorded_answers("nobody") == []
            assert "nobody" not in await store.list_sessions()
            # saves leave the recorded answers alone
            v = await store.save("s", _update(1, 1, [_text(1)], pending=[], claim={"x": 1}))
            await store.save("s", _update(v, 2, [], pending=None, state={"k": 1}))
            assert [a.seq for a in await store.recorded_answers("s")] == [1, 2, 3]

        asyncio.run(go())

    def test_clearing_answers_never_reuses_a_seq(self, tmp_path: Path) -> None:
        store = self.store_for(AnswerQueue, tmp_path)

        def answer(iid: str) -> dict[str, Any]:
            return {"interrupt_id": iid, "answer": iid, "by": "ann", "at": 1.0, "shown": None}

        async def go() -> None:
            await store.save("s", _update(0, 0, []))
            await store.save("t", _update(0, 0, []))
            await store.record_answers("s", [answer("a"), answer("b"), answer("c")])
            await store.record_answers("t", [answer("a")])
            await store.clear_answers("s", 2)
            left = await store.recorded_answers("s")
            assert [(a.seq, a.interrupt_id, a.shown) for a in left] == [(3, "c", None)]
            await store.clear_answers("s", 2)  # nothing left to clear: no error
            await store.clear_answers("nobody", 5)
            again = await store.record_answers("s", [answer("a")])  # a cleared answer's id
            assert [a.seq for a in again] == [4]
            await store.clear_answers("s", 10)
            assert await store.recorded_answers("s") == []
            assert [a.seq for a in await store.record_answers("s", [answer("d")])] == [5]
            assert [a.seq for a in await store.recorded_answers("t")] == [1]  # untouched
            await store.delete("s")
            assert await store.recorded_answers("s") == []
            await store.save("s", _update(0, 0, []))  # a new session: nothing carried over
            assert await store.recorded_answers("s") == []
            assert [a.seq for a in await store.record_answers("s", [answer("d")])] == [1]

        asyncio.run(go())

    def test_a_save_removes_the_answers_it_applies_and_only_those(self, tmp_path: Path) -> None:
        store = self.store_for(AnswerQueue, tmp_path)

        def answer(iid: str) -> dict[str, Any]:
            return {"interrupt_id": iid, "answer": iid, "by": "ann", "at": 1.0, "shown": None}

        async def go() -> None:
            asks = [_question("a", None), _question("b", None), _question("c", None)]
            await store.save("s", _update(0, 0, [_text(0)], pending=asks))
            await store.save("t", _update(0, 0, [], pending=asks))
            await store.record_answers("s", [answer("a"), answer("b"), answer("c")])
            await store.record_answers("t", [answer("a")])
            # a save that does not land (a stale version) removes nothing
            await _refused(store, "s", _update(5, 1, [], applied_answers=[1, 2, 3]))
            assert [a.seq for a in await store.recorded_answers("s")] == [1, 2, 3]
            audit = [{"interrupt_id": "a", "by": "ann"}, {"interrupt_id": "c", "by": "ann"}]
            left = [_question("b", None)]
            v = await store.save(
                "s", _update(1, 1, [_text(1)], pending=left, audit=audit, applied_answers=[1, 3])
            )
            assert [a.interrupt_id for a in await store.recorded_answers("s")] == ["b"]
            assert [a.seq for a in await store.recorded_answers("t")] == [1]  # untouched
            assert len(await store.audit_trail("s")) == 2
            # seqs no longer (or never) recorded are no error; saves without any keep answers
            await store.save("s", _update(v, 2, [], pending=None, applied_answers=[1, 99]))
            await store.save("s", _update(v + 1, 2, [], pending=None))
            assert [a.seq for a in await store.recorded_answers("s")] == [2]
            assert [a.seq for a in await store.record_answers("s", [answer("d")])] == [4]

        asyncio.run(go())

    def test_a_load_reads_the_queue_as_it_stands_or_not_at_all(self, tmp_path: Path) -> None:
        """``StoredSession.answers``: None (the store does not read the queue with the
        session), or exactly what ``recorded_answers`` gives at that moment."""
        store = self.store_for(AnswerQueue, tmp_path)

        def answer(iid: str) -> dict[str, Any]:
            return {"interrupt_id": iid, "answer": [iid], "by": "ann", "at": 2.0, "shown": "x"}

        async def same() -> None:
            stored = await store.load("s")
            assert stored is not None
            if stored.answers is not None:
                assert stored.answers == await store.recorded_answers("s")

        async def go() -> None:
            asks = [_question("a", None), _question("b", None)]
            await store.save("s", _update(0, 0, [_text(0)], pending=asks))
            await same()  # none recorded
            await store.record_answers("s", [answer("a"), answer("b")])
            await same()
            stored = await store.load("s")
            assert stored is not None
            if stored.answers is not None:  # in seq order, with their answers as recorded
                assert [(a.seq, a.interrupt_id, a.answer) for a in stored.answers] == [
                    (1, "a", ["a"]),
                    (2, "b", ["b"]),
                ]
            audit = [{"interrupt_id": "a", "by": "ann"}]
            await store.save("s", _update(1, 1, [], pending=None, audit=audit, applied_answers=[1]))
            await same()  # the applied one is gone
            await store.clear_answers("s", 2)
            await same()

        asyncio.run(go())

    def test_the_first_answer_wins_between_the_queue_and_a_save(self, tmp_path: Path) -> None:
        """A save answering a question whose answer waits in the queue is refused (it writes
        nothing), unless it applies that answer; answers checked against a version of the
        session are not recorded once it moved on."""
        store = self.store_for(AnswerQueue, tmp_path)

        def answer(iid: str, by: str = "ann") -> dict[str, Any]:
            return {"interrupt_id": iid, "answer": False, "by": by, "at": 1.0, "shown": None}

        async def go() -> None:
            asks = [_question("a", None), _question("b", None)]
            v = await store.save("s", _update(0, 0, [_text(0)], pending=asks))
            await store.record_answers("s", [answer("a")], expected_version=v)
            before = await _loaded(store, "s")
            bo = [{"interrupt_id": "a", "by": "bo", "answer": True}]
            try:
                await store.save("s", _update(v, 1, [_text(1)], pending=[], audit=bo))
            except AlreadyAnsweredError as exc:
                assert exc.interrupt_id == "a" and exc.by == "ann"
            else:
                raise AssertionError("a save answered a question the queue holds an answer to")
            after = await _loaded(store, "s")
            assert (after.version, after.messages, after.audit) == (
                before.version,
                before.messages,
                before.audit,
            )
            assert [a.interrupt_id for a in await store.recorded_answers("s")] == ["a"]
            # another question, a deadline's settling, or the queued answer applied: saved
            expiry = [{"interrupt_id": "a", "by": "deadline", "expired": True}]
            v = await store.save("s", _update(v, 1, [], pending=None, audit=expiry))
            other = [{"interrupt_id": "b", "by": "bo"}]
            v = await store.save("s", _update(v, 1, [], pending=None, audit=other))
            ann = [{"interrupt_id": "a", "by": "ann"}]
            v = await store.save(
                "s", _update(v, 1, [], pending=None, audit=ann, applied_answers=[1])
            )
            assert await store.recorded_answers("s") == []
            # answers checked against an older version are refused, nothing recorded
            try:
                await store.record_answers("s", [answer("b")], expected_version=v - 1)
            except SessionConflictError:
                pass
            else:
                raise AssertionError("answers checked against an old version were recorded")
            assert await store.recorded_answers("s") == []
            got = await store.record_answers("s", [answer("b")], expected_version=v)
            assert [a.interrupt_id for a in got] == ["b"]

        asyncio.run(go())

    def test_sessions_to_resume(self, tmp_path: Path) -> None:
        store = self.store_for(AnswerQueue, tmp_path)

        def answer(iid: str, at: float) -> dict[str, Any]:
            return {"interrupt_id": iid, "answer": 1, "by": "ann", "at": at, "shown": None}

        def lease(expires_at: Any) -> dict[str, Any]:
            return {"owner": "host:1", "token": "t", "since": 0.0, "expires_at": expires_at}

        async def go() -> None:
            todo = store.sessions_to_resume
            assert await todo(100.0) == []
            await store.save("idle", _update(0, 0, [], pending=[_question("i", None)]))
            await store.save("answered", _update(0, 0, [], pending=[_question("q", None)]))
            await store.record_answers("answered", [answer("q", 40.0)])
            await store.record_answers("answered", [answer("r", 5.0)])  # first by seq: 40
            await store.save("overdue", _update(0, 0, [], pending=[_question("o", 30.0)]))
            await store.save("dead", _update(0, 0, [], claim=lease(20.0)))
            await store.save("live", _update(0, 0, [], claim=lease(1e12)))
            await store.save("no-lease", _update(0, 0, [], claim=lease(None)))
            both = [_question("b", 60.0)]
            await store.save("both", _update(0, 0, [], pending=both, claim=lease(50)))
            await store.record_answers("both", [answer("b", 70.0)])
            await store.save("later", _update(0, 0, [], pending=[_question("l", 500.0)]))
            assert await todo(100.0) == ["dead", "overdue", "answered", "both"]
            assert await todo(datetime.fromtimestamp(100.0)) == await todo(100)
            assert await todo(100.0, limit=2) == ["dead", "overdue"]
            assert await todo(100.0, limit=0) == []
            assert await todo(30.0) == ["dead", "overdue", "answered", "both"]  # at counts
            assert await todo(29.0) == ["dead", "answered", "both"]
            assert await todo(1.0) == ["answered", "both"]
            # a finished save clears the claim; clearing the answers leaves the deadline
            await store.save("dead", _update(1, 0, [], claim=None))
            await store.clear_answers("answered", 2)
            await store.clear_answers("both", 1)
            assert await todo(100.0) == ["overdue", "both"]
            await store.save("overdue", _update(1, 0, [], pending=[]))  # answered and applied
            await store.delete("both")
            assert await todo(1e300) == ["later", "live"]

        asyncio.run(go())

    def test_corrupt_recorded_answers_are_reported(self, tmp_path: Path) -> None:
        store = self.store_for(AnswerQueue, tmp_path)
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
