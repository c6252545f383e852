"""The hooks a store's test class implements; every group of checks builds on them."""

from __future__ import annotations

from pathlib import Path

from ...sessions._protocol import SessionStore

__all__ = ["StoreHooks"]


class StoreHooks:
    """How the checks make, reach and damage the store under test."""

    def make_store(self, tmp_path: Path) -> SessionStore:
        raise NotImplementedError

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
