"""FileStore's notification outbox: each session's notifications in its folder's
``notifications.json``, replaced atomically under the session's lock (gone with the folder)."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import Literal

from ..errors import InvalidSessionIdError, SessionCorruptError
from ._file_format import corrupt, read_in, store_errors
from ._outbox import CLOSING_EVENTS, check_notifications, due_order, read_notification, settled
from ._protocol import Notification

__all__ = ["FileOutbox"]

_NOTES, _NOTES_TEMP = "notifications.json", ".notifications.json.tmp"
_Edit = Callable[[list["Notification"]], list["Notification"]]


class FileOutbox:
    """The outbox methods of :class:`~interlude.sessions.FileStore` (a mixin: it uses the
    store's folders and locks). Listing due notifications reads every session's file."""

    _where: dict[str, str]  # notification id -> session id, as last read

    def _folder(self, session_id: str) -> Path:
        raise NotImplementedError

    def _locked(
        self, session_id: str, folder: Path, *, exclusive: bool, create: bool
    ) -> AbstractContextManager[int | None]:
        raise NotImplementedError

    def _session_ids(self) -> list[str]:
        raise NotImplementedError

    def _replace_head(
        self, session_id: str, folder: Path, dir_fd: int, data: bytes, names: tuple[str, str]
    ) -> None:
        raise NotImplementedError

    def _has_head(self, session_id: str, folder: Path, dir_fd: int) -> bool:
        raise NotImplementedError

    # -- one session's file --------------------------------------------------------------------

    @staticmethod
    def _read_notes(session_id: str, folder: Path, dir_fd: int) -> list[Notification]:
        try:
            raw = read_in(session_id, folder, dir_fd, _NOTES)
        except FileNotFoundError:
            return []
        try:
            items = json.loads(raw)["items"]
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            raise corrupt(session_id, folder / _NOTES, f"is not readable ({exc})") from None
        if not isinstance(items, list):
            raise corrupt(session_id, folder / _NOTES, "has items that are not a list")
        return [read_notification(item, repr(str(folder / _NOTES))) for item in items]

    def _write_notes(
        self, session_id: str, folder: Path, dir_fd: int, notes: list[Notification]
    ) -> None:
        text = json.dumps({"items": [n.to_dict() for n in notes]})
        self._replace_head(session_id, folder, dir_fd, text.encode(), (_NOTES_TEMP, _NOTES))

    def _edit(self, session_id: str, edit: _Edit) -> list[Notification]:
        """Apply ``edit(notes) -> notes`` to the session's notifications under its exclusive
        lock and return the result (unchanged when there is no such session)."""
        folder = self._folder(session_id)
        with self._locked(session_id, folder, exclusive=True, create=False) as dir_fd:
            if dir_fd is None or not self._has_head(session_id, folder, dir_fd):
                return []
            notes = self._read_notes(session_id, folder, dir_fd)
            new = edit(notes)
            if new is not notes:
                self._write_notes(session_id, folder, dir_fd, new)
            for n in new:
                self._where[n.id] = session_id
            return list(new)

    def _all_notes(self) -> list[Notification]:
        found = []
        for sid in self._session_ids():
            try:
                found.extend(self._session_notes(sid))
            except (SessionCorruptError, InvalidSessionIdError):
                continue  # a session that cannot be read hides no other's notifications
        return found

    def _session_notes(self, session_id: str) -> list[Notification]:
        folder = self._folder(session_id)
        with self._locked(session_id, folder, exclusive=False, create=False) as dir_fd:
            if dir_fd is None:
                return []
            notes = self._read_notes(session_id, folder, dir_fd)
        for n in notes:
            self._where[n.id] = session_id
        return notes

    # -- the protocol --------------------------------------------------------------------------

    @store_errors
    async def add_notifications(self, notifications: list[Notification]) -> list[str]:
        checked = check_notifications(notifications)
        added: list[str] = []
        for sid in dict.fromkeys(n.session_id for n in checked):
            mine = [n for n in checked if n.session_id == sid]

            def add(
                notes: list[Notification], mine: list[Notification] = mine
            ) -> list[Notification]:
                have = {n.id for n in notes}
                new = [n for n in mine if n.id not in have]
                added.extend(n.id for n in new)
                return notes + new if new else notes

            self._edit(sid, add)
        order = {n.id: i for i, n in enumerate(checked)}
        return sorted(added, key=order.__getitem__)

    @store_errors
    async def claim_notifications(
        self, now: float, *, lease: float, limit: int | None = None
    ) -> list[Notification]:
        due = [
            n
            for n in self._all_notes()
            if n.status == "pending" and (n.next_attempt_at or 0.0) <= now
        ]
        due.sort(key=due_order)
        due = due if limit is None else due[: max(limit, 0)]
        wanted = {n.id for n in due}
        taken: list[Notification] = []
        for sid in dict.fromkeys(n.session_id for n in due):

            def claim(notes: list[Notification]) -> list[Notification]:
                # read again under the lock: another notifier may have claimed some meanwhile
                mine = [
                    n
                    for n in notes
                    if n.id in wanted and n.status == "pending" and (n.next_attempt_at or 0) <= now
                ]
                if not mine:
                    return notes
                ids = {n.id for n in mine}
                taken.extend(replace(n, next_attempt_at=now + lease) for n in mine)
                return [
                    replace(n, next_attempt_at=now + lease) if n.id in ids else n for n in notes
                ]

            self._edit(sid, claim)
        order = {n.id: i for i, n in enumerate(due)}
        return sorted(taken, key=lambda n: order[n.id])

    @store_errors
    async def settle_notification(
        self,
        notification_id: str,
        outcome: Literal["sent", "retry", "failed"],
        *,
        retry_at: float | None = None,
        error: str | None = None,
    ) -> None:
        sid = self._where.get(notification_id)
        if sid is None:
            self._all_notes()  # fills self._where
            sid = self._where.get(notification_id)
        if sid is None:
            return

        def settle(notes: list[Notification]) -> list[Notification]:
            if not any(n.id == notification_id for n in notes):
                return notes
            return [
                settled(n, outcome, retry_at, error) if n.id == notification_id else n
                for n in notes
            ]

        self._edit(sid, settle)

    @store_errors
    async def open_questions(self, *, limit: int | None = None) -> list[Notification]:
        notes = self._all_notes()
        closed = {(n.session_id, n.interrupt_id) for n in notes if n.event in CLOSING_EVENTS}
        found = [
            n for n in notes if n.event == "asked" and (n.session_id, n.interrupt_id) not in closed
        ]
        found.sort(key=lambda n: (n.created_at, n.id))
        return found if limit is None else found[: max(limit, 0)]

    @store_errors
    async def notifications(self, session_id: str) -> list[Notification]:
        notes = self._session_notes(session_id)
        return sorted(notes, key=lambda n: (n.created_at, n.id))
