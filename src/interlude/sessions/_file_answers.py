"""FileStore's answer queue. Answers recorded ahead of a resume live in each session folder's
``answers.json`` (rewritten whole, atomically, under the session's exclusive lock, since
clearing removes entries); a worker's reservation lives beside it in ``reserved.json``. A mixin:
the folders, locks and atomic file replacement it relies on are the store's."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path

from .._messages import JsonValue
from ..errors import SessionCorruptError
from ._answers import (
    answer_entries,
    answered_ids,
    check_version,
    conflict,
    no_session,
    queued_first,
    read_answer,
    reserved_by_other,
    resume_order,
)
from ._file_format import Head, parse_answers, read_in, store_errors
from ._memory import resume_times
from ._protocol import PendingInterrupt, RecordedAnswer, SessionUpdate, epoch

__all__ = ["FileAnswers"]

_ANSWERS, _ANSWERS_TEMP = "answers.json", ".answers.json.tmp"
_RESERVED, _RESERVED_TEMP = "reserved.json", ".reserved.json.tmp"  # a worker's reservation


class FileAnswers:
    """The answer-queue methods of :class:`~interlude.sessions.FileStore`."""

    bytes_written: int

    def _folder(self, session_id: str) -> Path:
        raise NotImplementedError

    def _locked(
        self, session_id: str, folder: Path, *, exclusive: bool, create: bool
    ) -> AbstractContextManager[int | None]:
        raise NotImplementedError

    @staticmethod
    def _check_links(session_id: str, folder: Path, dir_fd: int) -> None:
        raise NotImplementedError

    def _head(self, session_id: str, folder: Path, dir_fd: int) -> Head | None:
        raise NotImplementedError

    def _has_head(self, session_id: str, folder: Path, dir_fd: int) -> bool:
        raise NotImplementedError

    def _replace_head(
        self, session_id: str, folder: Path, dir_fd: int, data: bytes, names: tuple[str, str]
    ) -> None:
        raise NotImplementedError

    def _pending(
        self, answered: dict[str, float] | None = None, claims: dict[str, float] | None = None
    ) -> list[PendingInterrupt]:
        raise NotImplementedError

    @staticmethod
    def _answers(session_id: str, folder: Path, dir_fd: int) -> tuple[int, list[RecordedAnswer]]:
        """The session's ``answers.json``: the highest seq given and the answers kept."""
        try:
            raw = read_in(session_id, folder, dir_fd, _ANSWERS)
        except FileNotFoundError:
            return 0, []
        return parse_answers(session_id, folder / _ANSWERS, raw)

    def _write_answers(
        self, session_id: str, folder: Path, dir_fd: int, last: int, kept: list[RecordedAnswer]
    ) -> None:
        text = json.dumps({"last_seq": last, "answers": [a.to_dict() for a in kept]})
        self._replace_head(session_id, folder, dir_fd, text.encode(), (_ANSWERS_TEMP, _ANSWERS))

    def _drop_answers(self, session_id: str, folder: Path, dir_fd: int, seqs: set[int]) -> None:
        """Remove the answers a save applied, right after its head.json and under its lock (a
        crash between the two leaves answers to questions no longer pending, which workers
        drop). We hold the exclusive lock."""
        last, kept = self._answers(session_id, folder, dir_fd)
        left = [a for a in kept if a.seq not in seqs]
        if len(left) != len(kept):
            self._write_answers(session_id, folder, dir_fd, last, left)

    def _check_queue(
        self, session_id: str, folder: Path, dir_fd: int, update: SessionUpdate
    ) -> None:
        """AlreadyAnsweredError if ``update`` answers a question a recorded answer waits for
        (read under the save's exclusive lock)."""
        answered = set(answered_ids(update.audit))
        if answered:
            applied = set(update.applied_answers)
            for waiting in self._answers(session_id, folder, dir_fd)[1]:
                if waiting.interrupt_id in answered and waiting.seq not in applied:
                    raise queued_first(session_id, waiting)

    @store_errors
    async def record_answers(
        self,
        session_id: str,
        answers: list[dict[str, JsonValue]],
        *,
        expected_version: int | None = None,
    ) -> list[RecordedAnswer]:
        """Record the answers under the session's exclusive lock, replacing ``answers.json``
        atomically (it is rewritten, not appended to: clearing removes entries)."""
        folder = self._folder(session_id)
        entries = answer_entries(session_id, answers)
        with self._locked(session_id, folder, exclusive=True, create=False) as dir_fd:
            if dir_fd is None:
                raise no_session(session_id)
            self._check_links(session_id, folder, dir_fd)
            head = self._head(session_id, folder, dir_fd)
            if head is None:
                raise no_session(session_id)
            check_version(session_id, head.version, expected_version)
            last, kept = self._answers(session_id, folder, dir_fd)
            taken = {a.interrupt_id for a in kept}
            for e in entries:
                if e["interrupt_id"] in taken:
                    raise conflict(session_id, str(e["interrupt_id"]))
            new = [read_answer(session_id, last + 1 + i, e) for i, e in enumerate(entries)]
            if new:
                self._write_answers(session_id, folder, dir_fd, last + len(new), kept + new)
        self.bytes_written += sum(len(json.dumps(e)) for e in entries)
        return new

    @store_errors
    async def recorded_answers(self, session_id: str) -> list[RecordedAnswer]:
        folder = self._folder(session_id)
        with self._locked(session_id, folder, exclusive=False, create=False) as dir_fd:
            if dir_fd is None:
                return []
            self._check_links(session_id, folder, dir_fd)
            return self._answers(session_id, folder, dir_fd)[1]

    @store_errors
    async def clear_answers(self, session_id: str, upto_seq: int) -> None:
        folder = self._folder(session_id)
        with self._locked(session_id, folder, exclusive=True, create=False) as dir_fd:
            if dir_fd is None:
                return
            self._check_links(session_id, folder, dir_fd)
            last, kept = self._answers(session_id, folder, dir_fd)
            left = [a for a in kept if a.seq > upto_seq]
            if len(left) != len(kept):
                self._write_answers(session_id, folder, dir_fd, last, left)

    reserves_work = True
    """:meth:`sessions_to_resume` reserves what it returns when given ``reserve_for``."""

    @store_errors
    async def sessions_to_resume(
        self,
        now: datetime | float,
        *,
        limit: int | None = None,
        reserve_for: str | None = None,
        lease: float = 30.0,
    ) -> list[str]:
        """Sessions with recorded answers, an overdue question or a lapsed run claim, oldest
        work first (a scan of every session); unreadable sessions are named in
        ``self.skipped``. With ``reserve_for``, each session found is then taken in that
        order, under its exclusive lock, unless another owner's reservation in its
        ``reserved.json`` is live, until ``limit`` are reserved."""
        answered: dict[str, float] = {}
        claims: dict[str, float] = {}
        pending = self._pending(answered, claims)
        when = float(epoch(now) or 0.0)
        due = resume_times(pending, answered, claims, when)
        if reserve_for is None:
            return resume_order(due, limit)
        taken: list[str] = []
        for sid in resume_order(due, None):
            if limit is not None and len(taken) >= limit:
                break
            if self._reserve(sid, reserve_for, when + lease, when):
                taken.append(sid)
        return taken

    def _reserve(self, session_id: str, owner: str, until: float, now: float) -> bool:
        """Reserve the session for ``owner`` until ``until`` under its exclusive lock, unless
        another owner holds it at ``now``; whether it was. A session gone meanwhile, or
        unreadable, is not reserved."""
        folder = self._folder(session_id)
        try:
            with self._locked(session_id, folder, exclusive=True, create=False) as dir_fd:
                if dir_fd is None or not self._has_head(session_id, folder, dir_fd):
                    return False
                self._check_links(session_id, folder, dir_fd)
                try:
                    held = json.loads(read_in(session_id, folder, dir_fd, _RESERVED))
                except FileNotFoundError:
                    held = None
                except ValueError:  # advisory: a damaged reservation holds nobody off
                    held = None
                if reserved_by_other(held, owner, now):
                    return False
                text = json.dumps({"owner": owner, "until": until}).encode()
                names = (_RESERVED_TEMP, _RESERVED)
                self._replace_head(session_id, folder, dir_fd, text, names)
                return True
        except SessionCorruptError:
            return False
