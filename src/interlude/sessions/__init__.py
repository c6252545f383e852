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

# Besides the public names, the face carries (outside __all__) what the loop, graphs, the
# operator floor and store authors use: a session's lease (the claim helpers), a save's journal,
# forks by copy, reading a local store's URL and the pending-query filter. The claim and fork
# helpers load on first use.
from ._amended import amended as amended
from ._answers import queued_first as queued_first
from ._memory import MemoryStore
from ._memory import select_pending as select_pending
from ._protocol import (
    AnswerQueue,
    CallClaims,
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
from ._protocol import journal_update as journal_update
from ._url import local_store_path as local_store_path
from ._url import open_store, store_url

if TYPE_CHECKING:
    from ._claims import Renewer as Renewer
    from ._claims import claim_is_live as claim_is_live
    from ._claims import describe_claim as describe_claim
    from ._claims import machine_identity as machine_identity
    from ._claims import new_claim as new_claim
    from ._claims import split_marker as split_marker
    from ._file import FileStore
    from ._forking import fork_by_copy as fork_by_copy
    from ._forking import fork_update as fork_update
    from ._postgres import PostgresStore
    from ._sqlite import SQLiteStore

__all__ = [
    "AnswerQueue",
    "CallClaims",
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
    "Renewer": "._claims",
    "claim_is_live": "._claims",
    "describe_claim": "._claims",
    "machine_identity": "._claims",
    "new_claim": "._claims",
    "split_marker": "._claims",
    "fork_by_copy": "._forking",
    "fork_update": "._forking",
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

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # looked up once: a later import finds it without this hook
    return value
