"""FileStore: each session a folder of plain JSON files, locked with ``flock`` (POSIX only)."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import datetime
from pathlib import Path

from .._interrupt import Interrupt
from .._messages import JsonValue
from ..errors import (
    InvalidSessionIdError,
    SessionConflictError,
    SessionCorruptError,
    StateFormatError,
)
from ._answers import call_taken, claim_deadline
from ._file_answers import _RESERVED, FileAnswers
from ._file_format import (
    NOFOLLOW,
    Head,
    audit_entries,
    corrupt,
    line_start,
    lines,
    link_error,
    open_in,
    parse_calls,
    parse_head,
    read_in,
    store_errors,
    write_all,
)
from ._file_outbox import FileOutbox
from ._memory import expired_first, select_pending
from ._protocol import (
    PendingInterrupt,
    PendingQuery,
    SessionUpdate,
    StoredSession,
    audit_json,
    check_session_id,
    epoch,
    no_rewind,
)

__all__ = ["FileStore"]

_HEAD, _MESSAGES, _LOCK, _TEMP = "head.json", "messages.jsonl", ".lock", ".head.json.tmp"
_AUDIT = "audit.jsonl"
_CALLS, _CALLS_TEMP = "calls.json", ".calls.json.tmp"  # claims on calls asked in the session


class FileStore(FileOutbox, FileAnswers):
    """Sessions as plain files: ``<directory>/<session_id>/messages.jsonl``, ``audit.jsonl`` and
    ``head.json``.

    ``messages.jsonl`` holds one JSON message per line and ``audit.jsonl`` one audit entry per
    line; both are only appended to. ``head.json`` holds the rest (version, state, pause, run
    claim, tools, agent name, pending interrupts, and how many messages and audit entries, in
    which bytes, belong to the session) and is replaced atomically (temporary file and
    ``os.replace``). A :meth:`rewind` appends a copy of the messages it keeps too, and the
    head then says the messages start there. A save holds an exclusive ``flock`` on the
    session's ``.lock`` file, a load a shared one, so the compare-and-swap holds across
    processes on one machine (not on NFS). ``calls.json`` holds the claims on tool calls
    asked in the session (:meth:`claim_call`), replaced atomically under the same exclusive
    lock.

    A crash between appending lines and replacing the head leaves extra lines past the head's
    counts: loads ignore them and the next save appending to that file truncates them. With
    ``fsync=True`` every save is flushed to disk before it returns. Like SQLiteStore, the async
    methods do their (short) file work inline on the event loop's thread. POSIX only
    (``fcntl``).

    ``bytes_written`` counts the JSON bytes saved (messages, pause, claim, pending, state when
    given).

    Nothing is read or written through a symbolic link: files are opened relative to the
    session folder with ``O_NOFOLLOW``, and a session folder that is, or holds, a link is
    refused with SessionCorruptError (and left out, by name, of :meth:`pending_interrupts`).
    """

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._root = self.directory.resolve()
        self.fsync = fsync
        self.bytes_written = 0
        self._where: dict[str, str] = {}

    def _folder(self, session_id: str) -> Path:
        check_session_id(session_id)
        folder = self._root / session_id
        if folder.resolve().parent != self._root:
            raise InvalidSessionIdError(
                f"session id {session_id!r} resolves outside the store's directory "
                f"{str(self._root)!r}"
            )
        return folder

    def _open_folder(self, session_id: str, folder: Path) -> int | None:
        """The session folder, opened without following a link; None if there is no folder.

        SessionCorruptError if it is a symbolic link.
        """
        try:
            return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | NOFOLLOW)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if os.path.islink(folder):
                raise corrupt(
                    session_id, folder, "is a symbolic link, not a session folder (refused)"
                ) from None
            if exc.errno == errno.ENOTDIR:
                return None  # a stray file, not a session
            raise

    @staticmethod
    def _check_links(session_id: str, folder: Path, dir_fd: int) -> None:
        """SessionCorruptError if the session folder holds a symbolic link."""
        with os.scandir(dir_fd) as entries:
            links = sorted(e.name for e in entries if e.is_symlink())
        if links:
            raise link_error(session_id, folder / links[0])

    @contextmanager
    def _locked(
        self, session_id: str, folder: Path, *, exclusive: bool, create: bool
    ) -> Iterator[int | None]:
        """Hold the session's lock and yield the folder's descriptor; yield None (holding
        nothing) if there is no such folder.

        A delete removes the folder while holding the lock, so after locking we check that our
        folder and lock file are still the ones in the store; if not, we start again. Nothing
        is opened through a symbolic link (SessionCorruptError).
        """
        while True:
            if create:
                with suppress(FileExistsError):
                    os.mkdir(folder)
            dir_fd = self._open_folder(session_id, folder)
            if dir_fd is None:
                if create:
                    continue
                yield None
                return
            try:
                try:
                    fd = open_in(session_id, folder, dir_fd, _LOCK, os.O_RDWR | os.O_CREAT)
                except FileNotFoundError:  # the folder was deleted meanwhile
                    continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
                    try:
                        here = os.stat(folder, follow_symlinks=False)
                        lock = os.stat(_LOCK, dir_fd=dir_fd, follow_symlinks=False)
                        ours, held = os.fstat(dir_fd), os.fstat(fd)
                        same = (here.st_dev, here.st_ino, lock.st_dev, lock.st_ino) == (
                            ours.st_dev,
                            ours.st_ino,
                            held.st_dev,
                            held.st_ino,
                        )
                    except FileNotFoundError:
                        same = False
                    if same:
                        yield dir_fd
                        return
                finally:
                    os.close(fd)  # also releases the lock
            finally:
                os.close(dir_fd)

    def _has_head(self, session_id: str, folder: Path, dir_fd: int) -> bool:
        return self._head(session_id, folder, dir_fd) is not None

    def _head(self, session_id: str, folder: Path, dir_fd: int) -> Head | None:
        try:
            raw = read_in(session_id, folder, dir_fd, _HEAD)
        except FileNotFoundError:
            return None
        return parse_head(session_id, folder / _HEAD, raw)

    def _read(self, session_id: str, *, messages: bool) -> tuple[Path, Head, bytes, bytes] | None:
        """Under the shared lock: the folder, the head, the bytes of the messages (when
        ``messages``) and of the audit trail that the head counts; None if there is no session.
        Bytes past what the head counts (a crashed save's) are not read."""
        folder = self._folder(session_id)
        with self._locked(session_id, folder, exclusive=False, create=False) as dir_fd:
            if dir_fd is None:
                return None
            return self._read_held(session_id, folder, dir_fd, messages=messages)

    def _read_held(
        self, session_id: str, folder: Path, dir_fd: int, *, messages: bool
    ) -> tuple[Path, Head, bytes, bytes] | None:
        """:meth:`_read`'s reading, by a caller that holds the session's lock."""
        self._check_links(session_id, folder, dir_fd)
        head = self._head(session_id, folder, dir_fd)
        if head is None:
            return None
        parts = []
        start = head.message_start
        for name, size, at in (
            (_MESSAGES, head.message_bytes - start if messages else 0, start),
            (_AUDIT, head.audit_bytes, 0),
        ):
            try:
                parts.append(read_in(session_id, folder, dir_fd, name, size, at) if size else b"")
            except FileNotFoundError:
                parts.append(b"")
        return folder, head, parts[0], parts[1]

    @store_errors
    async def load(self, session_id: str) -> StoredSession | None:
        read = self._read(session_id, messages=True)
        return None if read is None else self._stored(session_id, *read)

    @staticmethod
    def _stored(
        session_id: str, folder: Path, head: Head, raw: bytes, audit: bytes
    ) -> StoredSession:
        """The session of what :meth:`_read` read (parsed outside the lock)."""
        size = head.message_bytes - head.message_start
        messages = lines(session_id, folder / _MESSAGES, raw, size, head.message_count)
        return StoredSession(
            session_id=session_id,
            version=head.version,
            format_version=head.format_version,
            messages=messages,
            state=head.state,
            pause=head.pause,
            tools=head.tools,
            claim=head.claim,
            agent=head.agent,
            audit=audit_entries(session_id, folder / _AUDIT, audit, head),
        )

    @store_errors
    async def audit_trail(self, session_id: str) -> list[dict[str, JsonValue]]:
        read = self._read(session_id, messages=False)
        if read is None:
            return []
        folder, head, _, audit = read
        return audit_entries(session_id, folder / _AUDIT, audit, head)

    _saves_inline = True
    """Saves run to the end without suspending (no await inside): a cancel cannot cut one."""

    @store_errors
    async def save(self, session_id: str, update: SessionUpdate) -> int:
        return self._save(session_id, update)

    @store_errors
    async def rewind(self, session_id: str, update: SessionUpdate) -> int:
        """:meth:`save`, except that ``update.first_index`` may be below the number of messages
        stored (the optional ``rewind`` of ``interlude.sessions._protocol``): the new head
        counts a copy of the first ``first_index`` messages and the new ones, appended to
        ``messages.jsonl`` as a save appends (the file is never cut below what the stored
        head counts), and says the messages start at the copy. One ``head.json`` replaced, as
        in a save: a crash leaves the session as it was or as rewound. The bytes before the
        copy stay in the file, unread, until the session is deleted."""
        if update.expected_version < 1:
            raise no_rewind(check_session_id(session_id))
        return self._save(session_id, update, rewind=True)

    def _save(self, session_id: str, update: SessionUpdate, *, rewind: bool = False) -> int:
        """A save (a rewind, with ``rewind``), under the session's exclusive lock."""
        folder = self._folder(session_id)
        for i, p in enumerate(update.pending or ()):  # the check SQLiteStore needs for its index
            Interrupt.from_dict(p, f"pending[{i}]")
        messages = [json.dumps(m) for m in update.new_messages]
        blob = "".join(m + "\n" for m in messages).encode()
        pause = json.dumps(update.pause)
        claim = json.dumps(update.claim)
        state = None if update.state is None else json.dumps(update.state)
        pending = [json.dumps(p) for p in update.pending or ()]
        audit = audit_json(session_id, update.audit)
        audit_blob = "".join(a + "\n" for a in audit).encode()
        with self._locked(session_id, folder, exclusive=True, create=not rewind) as dir_fd:
            if dir_fd is None:  # no folder: a rewind's (create=True always yields one)
                raise no_rewind(session_id)
            self._check_links(session_id, folder, dir_fd)
            head = self._head(session_id, folder, dir_fd)
            if update.pending is None and head is not None:  # the index as it is
                pending = [json.dumps(p) for p in head.pending]
            current = 0 if head is None else head.version
            count = 0 if head is None else head.message_count
            if current != update.expected_version:
                raise SessionConflictError(
                    f"session {session_id!r} is at version {current}, not "
                    f"{update.expected_version}: another agent saved it first"
                )
            offset = 0 if head is None else head.message_bytes
            start = 0 if head is None else head.message_start
            if update.first_index != count:
                if not rewind or head is None or update.first_index > count:
                    raise SessionConflictError(
                        f"session {session_id!r} holds {count} messages, but the save "
                        f"appends at {update.first_index}"
                    )
                # a rewind: a copy of the messages kept, then the new ones, appended; the
                # head says the messages start at the copy
                blob = self._kept(session_id, folder, dir_fd, head, update.first_index) + blob
                start, count = offset, update.first_index
            if audit and head is not None:  # may not answer what a recorded answer waits for
                self._check_queue(session_id, folder, dir_fd, update)
            if update.starts:  # may not start a call another session claimed
                held = self._calls(session_id, folder, dir_fd)
                for key in update.starts:
                    if held.get(key, session_id) != session_id:
                        raise call_taken(session_id, key, held[key])
            self._append(session_id, folder, dir_fd, _MESSAGES, offset, blob)
            audit_offset = 0 if head is None else head.audit_bytes
            if audit_blob:  # past audit_offset are only lines of a crashed save: unread
                self._append(session_id, folder, dir_fd, _AUDIT, audit_offset, audit_blob)
            if state is None:
                state = json.dumps({} if head is None else head.state)
            agent = update.agent if update.agent is not None or head is None else head.agent
            text = (
                f'{{"version": {current + 1}, '
                f'"format_version": {json.dumps(update.format_version)}, '
                f'"message_count": {count + len(messages)}, "message_start": {start}, '
                f'"message_bytes": {offset + len(blob)}, '
                f'"state": {state}, "pause": {pause}, "claim": {claim}, '
                f'"tools": {json.dumps(list(update.tools))}, '
                f'"pending": [{", ".join(pending)}], "agent": {json.dumps(agent)}, '
                f'"audit_count": {(0 if head is None else head.audit_count) + len(audit)}, '
                f'"audit_bytes": {audit_offset + len(audit_blob)}}}'
            )
            self._replace_head(session_id, folder, dir_fd, text.encode())
            if update.applied_answers:
                self._drop_answers(session_id, folder, dir_fd, set(update.applied_answers))
            if update.claim is not None:  # the run's claim takes over from a reservation
                with suppress(FileNotFoundError):
                    os.unlink(_RESERVED, dir_fd=dir_fd)
        self.bytes_written += sum(map(len, messages)) + len(pause) + sum(map(len, pending))
        self.bytes_written += len(claim) + (0 if update.state is None else len(state))
        self.bytes_written += sum(map(len, audit))
        return current + 1

    @staticmethod
    def _kept(session_id: str, folder: Path, dir_fd: int, head: Head, kept: int) -> bytes:
        """The lines of the session's first ``kept`` messages (at most the head's count), as
        ``messages.jsonl`` holds them."""
        if kept == 0:
            return b""
        size = head.message_bytes - head.message_start
        raw = read_in(session_id, folder, dir_fd, _MESSAGES, size, head.message_start)
        return raw[: line_start(session_id, folder / _MESSAGES, raw, size, kept)]

    def _append(
        self, session_id: str, folder: Path, dir_fd: int, name: str, offset: int, blob: bytes
    ) -> None:
        """Write ``blob`` at ``offset`` of the append-only file ``name``, first cutting what a
        save that crashed before its head.json left past ``offset``. We hold the exclusive lock.
        """
        fd = open_in(session_id, folder, dir_fd, name, os.O_WRONLY | os.O_CREAT)
        try:
            size = os.fstat(fd).st_size
            if size < offset:
                raise corrupt(
                    session_id, folder / name, f"holds {size} bytes, head.json says {offset}"
                )
            if size > offset:  # lines left by a save that crashed before its head.json
                os.ftruncate(fd, offset)
            write_all(fd, blob, offset)
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def _replace_head(
        self,
        session_id: str,
        folder: Path,
        dir_fd: int,
        data: bytes,
        names: tuple[str, str] = (_TEMP, _HEAD),
    ) -> None:
        """Replace the file ``names[1]`` (head.json) atomically, writing ``names[0]`` first."""
        # one writer at a time: we hold the exclusive lock
        temp, name = names
        fd = open_in(session_id, folder, dir_fd, temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with open(fd, "wb") as f:
            f.write(data)
            if self.fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        if self.fsync:
            os.fsync(dir_fd)

    def _session_ids(self) -> list[str]:
        """The ids a load does not answer None for: folders with a ``head.json``, and folders
        that are, or hold, symbolic links (a load refuses them, so they are listed, not hidden).
        """
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
            try:
                if entry.is_symlink():
                    ids.append(entry.name)
                    continue
                if not entry.is_dir(follow_symlinks=False):
                    continue
                with os.scandir(entry.path) as inner:
                    names = {e.name: e.is_symlink() for e in inner}
            except OSError:
                continue  # deleted meanwhile
            if _HEAD in names or any(names.values()):
                ids.append(entry.name)
        return sorted(ids)

    skipped: tuple[tuple[str, str], ...] = ()
    """``(session_id, why)`` of the sessions the last :meth:`pending_interrupts` (or
    :meth:`expired_interrupts`, or :meth:`sessions_to_resume`) call left out entries of,
    because they could not be read (empty when everything was read)."""

    @store_errors
    async def pending_interrupts(self, query: PendingQuery | None = None) -> list[PendingInterrupt]:
        """Pending interrupts across sessions, oldest first, that pass ``query`` (None: all).

        A session that cannot be read (a corrupt ``head.json``, a folder that is or holds a
        symbolic link) does not hide the others: it is left out, and so is a pending entry
        that is not a valid interrupt. ``self.skipped`` is then set to the
        ``(session_id, why)`` of each session left out (or partly left out) by this call, in
        session id order; it is empty when everything was read.
        """
        return select_pending(self._pending(), query or PendingQuery())

    @store_errors
    async def expired_interrupts(
        self, now: datetime | float, *, limit: int | None = None
    ) -> list[PendingInterrupt]:
        """Pending interrupts whose deadline is at or before ``now``, earliest first; sessions
        and entries that cannot be read are left out and named in ``self.skipped``, as above."""
        return expired_first(self._pending(), float(epoch(now) or 0.0), limit)

    def _pending(
        self, answered: dict[str, float] | None = None, claims: dict[str, float] | None = None
    ) -> list[PendingInterrupt]:
        """Every readable pending interrupt of every session; sets ``self.skipped``. Given
        ``answered`` and ``claims``, also fills in each session's first recorded answer's time
        and its run claim's lease."""
        found = []
        skipped: dict[str, str] = {}
        for sid in self._session_ids():
            try:
                folder = self._folder(sid)
                dir_fd = self._open_folder(sid, folder)
                if dir_fd is None:
                    continue
                try:  # head.json is replaced atomically, so no lock is needed to read it
                    self._check_links(sid, folder, dir_fd)
                    head = self._head(sid, folder, dir_fd)
                    if head is not None and answered is not None and claims is not None:
                        first = self._answers(sid, folder, dir_fd)[1][:1]
                        if first:
                            answered[sid] = first[0].at
                        lease = claim_deadline(head.claim)
                        if lease is not None:
                            claims[sid] = lease
                finally:
                    os.close(dir_fd)
            except (SessionCorruptError, InvalidSessionIdError) as exc:
                skipped[sid] = str(exc)
                continue
            if head is None:
                continue
            for i, data in enumerate(head.pending):
                try:
                    interrupt = Interrupt.from_dict(data, f"pending[{i}]")
                except StateFormatError as exc:
                    skipped.setdefault(sid, str(corrupt(sid, folder / _HEAD, str(exc))))
                    continue
                found.append(PendingInterrupt(sid, interrupt, interrupt.raised_at, head.agent))
        self.skipped = tuple(sorted(skipped.items()))
        return found

    @store_errors
    async def list_sessions(self) -> list[str]:
        return self._session_ids()

    @store_errors
    async def fork(self, session_id: str, new_session_id: str, update: SessionUpdate) -> int:
        """Make session ``new_session_id`` from the start of ``session_id`` and ``update``
        (see ``interlude.sessions._forking``); the source is not changed."""
        from ._forking import fork_by_copy

        return await fork_by_copy(self, session_id, new_session_id, update)

    def _calls(self, session_id: str, folder: Path, dir_fd: int) -> dict[str, str]:
        """The claims on calls asked in the session (``calls.json``: call key -> the session
        that holds it); we hold the session's lock."""
        try:
            raw = read_in(session_id, folder, dir_fd, _CALLS)
        except FileNotFoundError:
            return {}
        return parse_calls(session_id, folder / _CALLS, raw)

    @store_errors
    async def claim_call(
        self, key: str, session_id: str, *, origin: str
    ) -> tuple[str, StoredSession | None]:
        """Claim tool call ``key`` for ``session_id`` (see :class:`CallClaims`), under the
        exclusive lock of session ``origin`` (the one a save of it takes, so the two take
        turns across processes): ``origin`` read as :meth:`load` reads it, and the claim added
        to its ``calls.json`` (replaced atomically) unless the call has a holder.

        The claims live in ``origin``'s folder and go with it. When there is no session
        ``origin`` (never saved, or deleted) nothing is recorded: the answer is
        ``(session_id, None)`` (no save of it can start the call, and a session saved later
        under that id starts with no claims, as after a delete)."""
        check_session_id(session_id)
        folder = self._folder(origin)
        with self._locked(origin, folder, exclusive=True, create=False) as dir_fd:
            if dir_fd is None:
                return session_id, None
            read = self._read_held(origin, folder, dir_fd, messages=True)
            if read is None:
                return session_id, None
            held = self._calls(origin, folder, dir_fd)
            holder = held.get(key)
            if holder is None:
                holder = held[key] = session_id
                text = json.dumps(held).encode()
                self._replace_head(origin, folder, dir_fd, text, (_CALLS_TEMP, _CALLS))
        return holder, self._stored(origin, *read)

    async def delete(self, session_id: str) -> None:
        """Remove the session, with the claims on calls asked in it (``calls.json``). A session
        folder that is, or holds, a symbolic link is removed too (the links themselves, never
        what they point to)."""
        folder = self._folder(session_id)
        # A name no session id can have (ids do not start with '.'), so lists skip it.
        trash = self._root / f".deleted-{session_id}-{os.urandom(8).hex()}"
        try:
            with self._locked(session_id, folder, exclusive=True, create=False) as dir_fd:
                if dir_fd is None:
                    return
                os.rename(folder, trash)
        except SessionCorruptError:  # a link where the folder or its lock should be
            try:
                os.rename(folder, trash)  # moves a link itself, never its target
            except FileNotFoundError:
                return
        try:
            os.unlink(trash)  # a link moved here
        except OSError:  # a folder: rmtree removes the links in it, it does not follow them
            shutil.rmtree(trash, ignore_errors=True)
