"""The hooks a store's test class implements, and the parts of the protocol a store provides:
every group of checks builds on them."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, cast

from ...sessions import (
    AnswerQueue,
    CallClaims,
    InboxStore,
    NotificationOutbox,
    PendingIndex,
    SessionStore,
)

__all__ = ["OPTIONAL", "REQUIRED", "StoreHooks"]

REQUIRED: tuple[type, ...] = (SessionStore,)
"""The parts every store provides: the session itself (load, save, list, delete)."""
OPTIONAL: tuple[type, ...] = (AnswerQueue, PendingIndex, NotificationOutbox, CallClaims)
"""The parts a store may provide: recorded answers, the index of pending questions, the
outbox of notifications, and claims on tool calls that forked sessions share."""


class StoreHooks:
    """How the checks make, reach and damage the store under test."""

    provides: ClassVar[tuple[type, ...] | None] = None
    """The optional parts (``OPTIONAL``) the store provides, whose checks run; a part listed
    that the store does not implement fails its checks. None: the parts whose protocol the
    store's object meets."""

    def make_store(self, tmp_path: Path) -> SessionStore:
        raise NotImplementedError

    def store_for(self, part: type, tmp_path: Path) -> InboxStore:
        """A new store for a check of ``part`` (a protocol of ``REQUIRED`` or ``OPTIONAL``).

        The check fails if the store lacks a required part or one it says it ``provides``,
        and is skipped if the store does not provide an optional part. (Typed as a store of
        every part: a check uses ``SessionStore`` and the part it checks.)"""
        store = self.make_store(tmp_path)
        name = type(store).__name__
        meets = isinstance(store, part)
        if part in REQUIRED:
            if not meets:
                raise AssertionError(f"{name} does not meet {part.__name__}: every store must")
            return cast(InboxStore, store)
        if part not in OPTIONAL:
            raise ValueError(f"{part!r} is not a part of the store protocol")
        declared = self.provides
        if declared is not None and part in declared and not meets:
            raise AssertionError(f"{name} says it provides {part.__name__} but does not meet it")
        if not meets if declared is None else part not in declared:
            import pytest

            _close(store)
            pytest.skip(f"{name} does not provide {part.__name__} (optional)")
        return cast(InboxStore, store)

    def store_url(self, tmp_path: Path) -> str | None:
        """A URL for :func:`interlude.sessions.open_store` that reaches the same store from
        another process, or None if the store lives in this process only."""
        return None

    def corrupt(self, store: SessionStore, tmp_path: Path, session_id: str) -> None:
        """Damage the stored session ``session_id`` so that loading it must fail."""
        raise NotImplementedError

    def corrupt_answers(self, store: SessionStore, tmp_path: Path, session_id: str) -> None:
        """Damage the recorded answers of ``session_id`` (optional: the check skips without)."""
        raise NotImplementedError


def _close(store: object) -> None:
    close = getattr(store, "close", None)
    if callable(close):
        close()
