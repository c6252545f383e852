"""Every store shared by two store objects and raced by two processes: one store object sees
what the other saved and loses a stale save; two processes saving over the same version, only
one wins (the file store, SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from interlude.errors import SessionConflictError
from interlude.sessions import SessionStore, open_store
from tests.support import wait_for

from .records import msg, update
from .stores import KINDS, store_url


@pytest.fixture(params=KINDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return store_url(request.param, tmp_path, request.addfinalizer)


def close(store: SessionStore) -> None:
    closer = getattr(store, "close", None)
    if callable(closer):
        closer()


@pytest.fixture
def stores(url: str) -> Iterator[tuple[SessionStore, SessionStore]]:
    """Two store objects on the same place."""
    one, two = open_store(url), open_store(url)
    try:
        yield one, two
    finally:
        close(one)
        close(two)


async def test_two_store_objects_share_one_place(
    stores: tuple[SessionStore, SessionStore],
) -> None:
    one, two = stores
    await one.save("s", update(0, 0, [msg("a")]))
    seen = await two.load("s")
    assert seen is not None and seen.version == 1
    await two.save("s", update(1, 1, [msg("b")], state={"by": "two"}))
    with pytest.raises(SessionConflictError):
        await one.save("s", update(1, 1, [msg("c")]))
    loaded = await one.load("s")
    assert loaded is not None and loaded.messages == [msg("a"), msg("b")]
    assert loaded.state == {"by": "two"}


RACER = textwrap.dedent(
    """
    import asyncio, os, sys, time
    from interlude.errors import SessionConflictError
    from interlude.sessions import SessionUpdate, open_store

    async def main():
        store = open_store(sys.argv[1])
        seen = await store.load("race")
        open(sys.argv[2] + "." + sys.argv[3], "w").close()
        while not os.path.exists(sys.argv[2]):
            time.sleep(0.002)
        update = SessionUpdate(expected_version=seen.version, first_index=len(seen.messages),
                               new_messages=[{"by": sys.argv[3]}], pause=None, pending=[],
                               tools=[], format_version=1)
        try:
            await store.save("race", update)
            print("won")
        except SessionConflictError:
            print("lost")

    asyncio.run(main())
    """
)
"""A process that loads the session, says so (``GO.<who>``), waits for ``GO``, then saves."""


def test_two_processes_race_one_wins(url: str, tmp_path: Path) -> None:
    store = open_store(url)
    try:
        asyncio.run(store.save("race", update(0, 0, [msg("start")])))
        go = tmp_path / "go"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", RACER, url, str(go), who], stdout=subprocess.PIPE, text=True
            )
            for who in ("p1", "p2")
        ]
        for who, proc in zip(("p1", "p2"), procs, strict=True):
            ready = tmp_path / f"go.{who}"
            wait_for(ready.exists, what=f"{who} to load the session", process=proc)
        go.touch()
        outcomes = [p.communicate(timeout=60)[0].strip() for p in procs]
        assert sorted(outcomes) == ["lost", "won"]
        final = asyncio.run(store.load("race"))
        assert final is not None and final.version == 2
        winner = "p1" if outcomes[0] == "won" else "p2"
        assert final.messages == [msg("start"), {"by": winner}]
    finally:
        close(store)
