"""The command's defaults that every part of it reads (a leaf: it imports nothing)."""

from __future__ import annotations

__all__ = ["DEFAULT_STORE", "DEMO_AGENT"]

DEFAULT_STORE = "sqlite:///.interlude/demo.db"
"""Where sessions are kept when neither ``--store`` nor ``$INTERLUDE_STORE`` says."""

DEMO_AGENT = "demo"
"""The name of the built-in demo app's one agent (the app used when no ``--app`` is given)."""
