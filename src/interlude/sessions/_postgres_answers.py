"""PostgresStore's answer queue: the rows of answers recorded ahead of a resume (the first
answer to a question wins, backed by a unique key), the check a save makes against them, and
the work a worker has to do (``sessions_to_resume``, optionally reserving what it picks for
that worker). A mixin: its calls go through the store's pools, statements and error mapping."""

from __future__ import annotations

import json
import threading
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from .._messages import JsonValue
from ..errors import ConfigurationError, SessionCorruptError
from . import _postgres_wire as wire
from ._answers import (
    answer_entries,
    check_version,
    conflict,
    no_session,
    read_answer,
    read_answer_rows,
)
from ._protocol import RecordedAnswer, check_session_id, epoch

if TYPE_CHECKING:
    import psycopg

    from ._postgres_pools import LoopPools

__all__ = ["PostgresAnswers"]

T = TypeVar("T")


def _corrupt(session_id: str, problem: str) -> SessionCorruptError:
    return SessionCorruptError(f"session {session_id!r} is corrupt: {problem}")


class PostgresAnswers:
    """The answer-queue methods of :class:`~interlude.sessions.PostgresStore`."""

    bytes_written: int
    _lock: threading.Lock
    _pools: LoopPools
    _sql: dict[str, bytes]
    _wire: dict[str, wire.Statement]
    _integrity_error: type[psycopg.IntegrityError]

    async def _run(self, what: str, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        raise NotImplementedError

    async def _rows(self, statement: str, params: dict[str, Any]) -> list[Any]:
        raise NotImplementedError

    async def record_answers(
        self,
        session_id: str,
        answers: list[dict[str, JsonValue]],
        *,
        expected_version: int | None = None,
    ) -> list[RecordedAnswer]:
        """Record the answers in one transaction. Bumping the session's answer seq locks its
        row, so concurrent callers take turns and the later one sees the earlier one's answers;
        the unique (session, interrupt) key backs that up."""
        check_session_id(session_id)
        entries = answer_entries(session_id, answers)
        params: dict[str, Any] = {
            "id": session_id,
            "n": len(entries),
            "ids": [e["interrupt_id"] for e in entries],
            "ats": [e["at"] for e in entries],
            "data": [json.dumps(e) for e in entries],
            "expected": expected_version,
        }
        first = await self._run(f"record answers for session {session_id!r}", self._record, params)
        with self._lock:
            self.bytes_written += sum(map(len, params["data"]))
        return [read_answer(session_id, first + i, e) for i, e in enumerate(entries)]

    async def _record(self, p: dict[str, Any]) -> int:
        """Store the answers; the seq of the first."""
        sid, q = p["id"], self._sql
        try:
            async with self._pools.connection() as conn, conn.transaction():
                row = await (await conn.execute(q["answer_seq"], p)).fetchone()
                if row is None:
                    raise no_session(sid)
                check_version(sid, int(row[1]), p["expected"])
                taken = await (await conn.execute(q["answer_taken"], p)).fetchone()
                if taken is not None:
                    raise conflict(sid, taken[0])
                p["first"] = int(row[0]) - p["n"] + 1
                if p["n"]:
                    await conn.execute(q["add_answers"], p)
                return int(p["first"])
        except self._integrity_error as exc:  # a row the seq counter did not account for
            raise _corrupt(sid, f"its answer rows clash with this call ({exc})") from exc

    async def recorded_answers(self, session_id: str) -> list[RecordedAnswer]:
        check_session_id(session_id)
        rows = await self._run(f"read the answers of {session_id!r}", self._answers, session_id)
        return read_answer_rows(session_id, rows)

    async def _answers(self, session_id: str) -> list[tuple[int | None, str | None, str | None]]:
        async with self._pools.connection() as conn:
            result = await wire.run(conn, self._wire["answers"], {"id": session_id})
        cell = result.get_value
        return [
            (wire.int_of(cell(i, 0)), wire.text_of(cell(i, 1)), wire.text_of(cell(i, 2)))
            for i in range(result.ntuples)
        ]

    async def clear_answers(self, session_id: str, upto_seq: int) -> None:
        check_session_id(session_id)
        params = {"id": session_id, "upto": int(upto_seq)}
        await self._run(f"clear the answers of {session_id!r}", self._rows, "clear_answers", params)

    reserves_work = True
    """:meth:`sessions_to_resume` can reserve what it returns for one worker
    (``reserve_for=``), so that workers sharing the database take different sessions."""

    async def sessions_to_resume(
        self,
        now: datetime | float,
        *,
        limit: int | None = None,
        reserve_for: str | None = None,
        lease: float = 30.0,
    ) -> list[str]:
        """Sessions with recorded answers, an overdue question or a lapsed run claim, oldest
        work first: one query over the (small) answers table and two partial indexes.

        With ``reserve_for`` (a worker's id) the sessions returned are reserved for that owner
        until ``now + lease``, in the same statement that picks them (rows locked with
        ``FOR UPDATE SKIP LOCKED``): until then, a reserving call for another owner leaves them
        out (the same owner may get them again). Calls without ``reserve_for`` ignore
        reservations."""
        rows = None if limit is None or limit < 0 else int(limit)
        at = float(epoch(now) or 0.0)
        params: dict[str, Any] = {"now": at, "limit": rows}
        statement = "to_resume"
        if reserve_for is not None:
            if not isinstance(reserve_for, str):
                raise ConfigurationError(f"reserve_for is a worker id (str), got {reserve_for!r}")
            params |= {"owner": reserve_for, "until": at + float(lease)}
            statement = "to_resume_reserving"
        found = [
            r[0] for r in await self._run("list sessions to resume", self._rows, statement, params)
        ]
        return found if limit is None else found[:limit]
