"""Session stores: where agents keep conversations and pauses between processes.

``SQLiteStore`` is the embedded default; ``PostgresStore`` serves many workers; ``FileStore``
keeps plain JSON files; ``MemoryStore`` is for tests. Stores other than the memory one load
their modules (and drivers) only when used.

A store meets :class:`SessionStore` (all an agent needs) and, optionally, :class:`AnswerQueue`
and :class:`PendingIndex` (what the operator floor's inbox and workers use besides); every
shipped store meets all three, :class:`InboxStore`, and :class:`NotificationOutbox` (the
notifications ``interlude.notify`` delivers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._memory import MemoryStore
from ._protocol import (
    AnswerQueue,
    InboxStore,
    Notification,
    NotificationOutbox,
    PendingIndex,
    PendingInterrupt,
    PendingQuery,
    RecordedAnswer,
    SessionStore,
    SessionUpdate,
    StoredSession,
    check_session_id,
)
from ._url import open_store, store_url

if TYPE_CHECKING:
    from ._file import FileStore
    from ._postgres import PostgresStore
    from ._sqlite import SQLiteStore

__all__ = [
    "AnswerQueue",
    "FileStore",
    "InboxStore",
    "MemoryStore",
    "Notification",
    "NotificationOutbox",
    "PendingIndex",
    "PendingInterrupt",
    "PendingQuery",
    "PostgresStore",
    "RecordedAnswer",
    "SQLiteStore",
    "SessionStore",
    "SessionUpdate",
    "StoredSession",
    "check_session_id",
    "open_store",
    "store_url",
]

_LAZY = {
    "FileStore": "._file",
    "SQLiteStore": "._sqlite",
    "PostgresStore": "._postgres",
}

MOVED = ("Inbox", "SessionView")
"""Names that lived here and moved up to the operator floor (``interlude.operate``). The old
imports keep working, with a DeprecationWarning: the floor is loaded with ``interlude`` (the
parent package of this one), so they are read from it as loaded, the stores never importing
upward."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        if name in MOVED:
            import warnings

            warnings.warn(
                f"interlude.sessions.{name} moved to interlude.operate.{name} (also "
                f"interlude.{name}); the old name will be removed",
                DeprecationWarning,
                stacklevel=2,
            )
            import sys

            return getattr(sys.modules["interlude.operate"], name)
        raise AttributeError(f"module 'interlude.sessions' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module, __name__), name)
