"""Fixtures of the door tests: ``interlude serve --app tests.doors.doors_app:app`` started once
(a second process on the same store where a test races two doors), and the tool-run
log."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import require_service

from .served import Served

EXTRAS = ("starlette", "uvicorn", "a2a", "ag_ui")
"""What the serving processes drive (the [server,a2a,ag-ui] extras)."""


def missing_extras() -> str | None:
    """What the door tests need and is not installed (None: nothing)."""
    missing = [m for m in EXTRAS if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    return f"the door tests need {', '.join(missing)} (the [server,a2a,ag-ui] extras)"


@dataclass
class Doors:
    """The served store and its servers (``servers[0]`` is ``url``'s)."""

    db: Path
    servers: list[Served]

    @property
    def store_url(self) -> str:
        return f"sqlite:///{self.db}"

    @property
    def url(self) -> str:
        return self.servers[0].url


def serve_doors(
    base: Path, *envs: dict[str, str], args: Sequence[Sequence[str]] = ()
) -> Iterator[Doors]:
    """A serving process per ``envs`` (each with that environment added, and the ``serve``
    options of ``args`` at the same place, if any) on one SQLite store; ``$DOORS_EFFECTS`` set
    here too (a worker pass in the test process, or ``interlude answer``, runs the same
    tools). Skipped (failed in CI) without the extras."""
    require_service(missing_extras())
    from interlude.sessions import SQLiteStore

    db = base / "doors.db"
    SQLiteStore(db).close()  # serve opens a store that exists
    effects = str(base / "effects.txt")
    servers: list[Served] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DOORS_EFFECTS", effects)
        try:
            for i, env in enumerate(envs):
                options = tuple(args[i]) if i < len(args) else ()
                served = Served(db, {**env, "DOORS_EFFECTS": effects}, options)
                servers.append(served.start())
            yield Doors(db, servers)
        finally:
            for served in servers:
                served.stop()


@pytest.fixture(scope="session")
def doors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Doors]:
    """One ``interlude serve`` of the doors app (inbox API, AG-UI, A2A) shared by the modules
    that need no other (each test works on sessions of its own names); a module that needs
    other servers defines its own ``doors``."""
    yield from serve_doors(tmp_path_factory.mktemp("doors"), {})
