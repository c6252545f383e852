"""The ``interlude`` command (see ``interlude --help``)."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``interlude`` console script and of ``python -m interlude``.

    Run as a command (``argv`` None), the working directory is taken off the import path that
    ``python -m`` puts it on, so both ways of starting behave alike: a module lying in the
    current folder is imported only when ``--app`` names it.
    """
    import os
    import sys

    if argv is None and sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]
    from ._main import run

    return run(argv)
