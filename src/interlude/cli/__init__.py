"""The ``interlude`` command (see ``interlude --help``)."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``interlude`` console script."""
    from ._main import run

    return run(argv)
