"""The command's defaults that every part of it reads (a leaf: it imports nothing)."""

from __future__ import annotations

__all__ = ["DEFAULT_STORE"]

DEFAULT_STORE = "sqlite:///.interlude/demo.db"
"""Where sessions are kept when neither ``--store`` nor ``$INTERLUDE_STORE`` says."""
