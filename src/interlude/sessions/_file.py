"""FileStore: each session a folder of plain JSON files, locked with ``flock`` (POSIX only)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from .._interrupt import Interrupt
from .._messages import JsonValue
from ..errors import (
    InvalidSessionIdError,
    SessionConflictError,
    SessionCorruptError,
    StateFormatError,
)
from ._memory import matches
from ._protocol import PendingInterrupt, SessionUpdate, StoredSession, check_session_id, epoch

__all__ = ["FileStore"]

_HEAD, _MESSAGES, _LOCK, _TEMP = "head.json", "messages.jsonl", ".lock", ".head.json.tmp"


@dataclass(frozen=True, slots=True)
class _Head:
    """A parsed ``head.json``: everything but the messages, and where the messages end."""

    version: int
    format_version: int
    message_count: int
    message_bytes: int
    state: dict[str, JsonValue]
    pause: dict[str, JsonValue] | None
    tools: list[str]
    pending: list[dict[str, JsonValue]]
    claim: dict[str, JsonValue] | None


def _corrupt(session_id: str, path: Path, detail: str) -> SessionCorruptError:
    return SessionCorruptError(f"session {session_id!r} is corrupt: {str(path)!r} {detail}")


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _parse_head(session_id: str, path: Path, raw: bytes) -> _Head:
    try:
        d: Any = json.loads(raw)
    except ValueError as exc:
        raise _corrupt(session_id, path, f"is not valid JSON ({exc})") from None
    if not isinstance(d, dict):
        raise _corrupt(session_id, path, f"holds a {type(d).__name__}, not an object")
    for key in ("version", "format_version", "message_count", "message_bytes"):
        if not _count(d.get(key)):
            raise _corrupt(session_id, path, f"has {key} {d.get(key)!r}, not a count")
    state, pause, tools, pending = d.get("state"), d.get("pause"), d.get("tools"), d.get("pending")
    if not isinstance(state, dict):
        raise _corrupt(session_id, path, f"has state {state!r}, not an object")
    if pause is not None and not isinstance(pause, dict):
        raise _corrupt(session_id, path, f"has pause {pause!r}, not an object or null")
    claim = d.get("claim")  # absent in heads written before claims were stored
    if claim is not None and not isinstance(claim, dict):
        raise _corrupt(session_id, path, f"has claim {claim!r}, not an object or null")
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        raise _corrupt(session_id, path, f"has tools {tools!r}, not a list of names")
    if not isinstance(pending, list) or not all(isinstance(p, dict) for p in pending):
        raise _corrupt(session_id, path, "has pending that is not a list of objects")
    return _Head(
        d["version"],
        d["format_version"],
        d["message_count"],
        d["message_bytes"],
        state,
        pause,
        tools,
        pending,
        claim,
    )


def _read_prefix(path: Path, size: int) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except FileNotFoundError:
        return b""


def _write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


class FileStore:
    """Sessions as plain files: ``<directory>/<session_id>/messages.jsonl`` and ``head.json``.

    ``messages.jsonl`` holds one JSON message per line and is only appended to. ``head.json``
    holds the rest (version, state, pause, run claim, tools, pending interrupts, and how many
    messages, in how many bytes, belong to the session) and is replaced atomically (temporary
    file and ``os.replace``). A save holds an exclusive ``flock`` on the session's ``.lock``
    file, a load a shared one, so the compare-and-swap holds across processes on one machine
    (not on NFS).

    A crash between appending messages and replacing the head leaves extra lines past the
    head's count: loads ignore them and the next save truncates them. With ``fsync=True`` every
    save is flushed to disk before it returns. Like SQLiteStore, the async methods do their
    (short) file work inline on the event loop's thread. POSIX only (``fcntl``).

    ``bytes_written`` counts the JSON bytes saved (messages, pause, claim, pending, state when
    given).
    """

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._root = self.directory.resolve()
        self.fsync = fsync
        self.bytes_written = 0

    def _folder(self, session_id: str) -> Path:
        check_session_id(session_id)
        folder = self._root / session_id
        if folder.resolve().parent != self._root:
            raise InvalidSessionIdError(
                f"session id {session_id!r} resolves outside the store's directory "
                f"{str(self._root)!r}"
            )
        return folder

    @contextmanager
    def _locked(self, folder: Path, *, exclusive: bool, create: bool) -> Iterator[bool]:
        """Hold the session's lock; yield False (holding nothing) if there is no such folder.

        A delete removes the folder while holding the lock, so after locking we check that our
        lock file is still the one in the folder; if not, we start again.
        """
        lock_path = folder / _LOCK
        while True:
            if create:
                folder.mkdir(exist_ok=True)
            try:
                fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except FileNotFoundError:
                if create:
                    continue
                yield False
                return
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
                try:
                    st, current = os.fstat(fd), os.stat(lock_path)
                    same = (st.st_dev, st.st_ino) == (current.st_dev, current.st_ino)
                except FileNotFoundError:
                    same = False
                if same:
                    yield True
                    return
            finally:
                os.close(fd)  # also releases the lock

    def _head(self, session_id: str, folder: Path) -> _Head | None:
        path = folder / _HEAD
        try:
            raw = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        return _parse_head(session_id, path, raw)

    async def load(self, session_id: str) -> StoredSession | None:
        folder = self._folder(session_id)
        if not folder.is_dir():
            return None
        path = folder / _MESSAGES
        with self._locked(folder, exclusive=False, create=False) as exists:
            if not exists:
                return None
            head = self._head(session_id, folder)
            if head is None:
                return None
            raw = _read_prefix(path, head.message_bytes)
        if len(raw) != head.message_bytes:
            raise _corrupt(
                session_id, path, f"holds {len(raw)} bytes, head.json says {head.message_bytes}"
            )
        lines = raw.split(b"\n")
        if lines.pop() != b"" or len(lines) != head.message_count:
            raise _corrupt(
                session_id, path, f"does not hold the {head.message_count} lines head.json says"
            )
        messages = []
        for number, line in enumerate(lines, 1):
            try:
                messages.append(json.loads(line))
            except ValueError as exc:
                raise _corrupt(
                    session_id, path, f"line {number} is not valid JSON ({exc})"
                ) from None
        return StoredSession(
            session_id,
            head.version,
            head.format_version,
            messages,
            head.state,
            head.pause,
            head.tools,
            head.claim,
        )

    _saves_inline = True
    """Saves run to the end without suspending (no await inside): a cancel cannot cut one."""

    async def save(self, session_id: str, update: SessionUpdate) -> int:
        folder = self._folder(session_id)
        for i, p in enumerate(update.pending or ()):  # the check SQLiteStore needs for its index
            Interrupt.from_dict(p, f"pending[{i}]")
        messages = [json.dumps(m) for m in update.new_messages]
        blob = "".join(m + "\n" for m in messages).encode()
        pause = json.dumps(update.pause)
        claim = json.dumps(update.claim)
        state = None if update.state is None else json.dumps(update.state)
        pending = [json.dumps(p) for p in update.pending or ()]
        with self._locked(folder, exclusive=True, create=True):
            head = self._head(session_id, folder)
            if update.pending is None and head is not None:  # the index as it is
                pending = [json.dumps(p) for p in head.pending]
            current = 0 if head is None else head.version
            count = 0 if head is None else head.message_count
            if current != update.expected_version:
                raise SessionConflictError(
                    f"session {session_id!r} is at version {current}, not "
                    f"{update.expected_version}: another agent saved it first"
                )
            if update.first_index != count:
                raise SessionConflictError(
                    f"session {session_id!r} holds {count} messages, but the save appends at "
                    f"{update.first_index}"
                )
            offset = 0 if head is None else head.message_bytes
            path = folder / _MESSAGES
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                size = os.fstat(fd).st_size
                if size < offset:
                    raise _corrupt(session_id, path, f"holds {size} bytes, head.json says {offset}")
                if size > offset:  # lines left by a save that crashed before its head.json
                    os.ftruncate(fd, offset)
                _write_all(fd, blob, offset)
                if self.fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            if state is None:
                state = json.dumps({} if head is None else head.state)
            text = (
                f'{{"version": {current + 1}, '
                f'"format_version": {json.dumps(update.format_version)}, '
                f'"message_count": {count + len(messages)}, '
                f'"message_bytes": {offset + len(blob)}, '
                f'"state": {state}, "pause": {pause}, "claim": {claim}, '
                f'"tools": {json.dumps(list(update.tools))}, '
                f'"pending": [{", ".join(pending)}]}}'
            )
            self._replace_head(folder, text.encode())
        self.bytes_written += sum(map(len, messages)) + len(pause) + sum(map(len, pending))
        self.bytes_written += len(claim) + (0 if update.state is None else len(state))
        return current + 1

    def _replace_head(self, folder: Path, data: bytes) -> None:
        temp = folder / _TEMP  # one writer at a time: we hold the exclusive lock
        with open(temp, "wb") as f:
            f.write(data)
            if self.fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(temp, folder / _HEAD)
        if self.fsync:
            dir_fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def _session_ids(self) -> list[str]:
        try:
            entries = list(os.scandir(self._root))
        except FileNotFoundError:
            return []
        ids = []
        for entry in entries:
            try:
                check_session_id(entry.name)
            except InvalidSessionIdError:
                continue  # a temporary folder of a delete, or something not ours
            if os.path.isfile(os.path.join(entry.path, _HEAD)):
                ids.append(entry.name)
        return sorted(ids)

    async def pending_interrupts(
        self,
        *,
        name: str | None = None,
        tool_name: str | None = None,
        older_than: datetime | float | None = None,
        newer_than: datetime | float | None = None,
        limit: int | None = None,
    ) -> list[PendingInterrupt]:
        older, newer = epoch(older_than), epoch(newer_than)
        found = []
        for sid in self._session_ids():
            folder = self._root / sid
            head = self._head(sid, folder)  # replaced atomically, so no lock needed to read it
            if head is None:
                continue
            for data in head.pending:
                try:
                    interrupt = Interrupt.from_dict(data, "pending interrupt")
                except StateFormatError as exc:
                    raise _corrupt(sid, folder / _HEAD, str(exc)) from None
                entry = PendingInterrupt(sid, interrupt, interrupt.raised_at)
                if matches(entry, name, tool_name, older, newer):
                    found.append(entry)
        found.sort(key=lambda e: (e.raised_at, e.session_id, e.interrupt.id))
        return found if limit is None else found[:limit]

    async def list_sessions(self) -> list[str]:
        return self._session_ids()

    async def delete(self, session_id: str) -> None:
        folder = self._folder(session_id)
        # A name no session id can have (ids do not start with '.'), so lists skip it.
        trash = self._root / f".deleted-{session_id}-{os.urandom(8).hex()}"
        with self._locked(folder, exclusive=True, create=False) as exists:
            if not exists:
                return
            os.rename(folder, trash)
        shutil.rmtree(trash, ignore_errors=True)
