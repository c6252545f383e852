"""FileStore on a full disk reports StoreUnavailableError (a SessionError, as the other stores
report their failures), keeps nothing of the failed call, and works again once there is room.

Two honest ways to fill a disk: a 256 KiB tmpfs mounted for the test (ENOSPC; needs root, so it
skips otherwise), and a file size limit (RLIMIT_FSIZE) in a child process (EFBIG; anywhere).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from interlude.errors import SessionError
from interlude.sessions import FileStore
from interlude.testing.conformance._support import _text, _update


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {mounted.stderr!r}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def _big(i: int, size: int) -> dict[str, object]:
    return {"role": "user", "content": [{"type": "text", "text": "x" * size}], "i": i}


def test_a_full_disk_is_store_unavailable_and_keeps_nothing(small_disk: Path) -> None:
    from interlude.errors import StoreUnavailableError

    store = FileStore(small_disk / "sessions")

    async def go() -> None:
        v = await store.save("s", _update(0, 0, [_text(0)]))
        with pytest.raises(StoreUnavailableError, match="No space left") as caught:
            await store.save("s", _update(v, 1, [_big(1, 400_000)]))
        assert isinstance(caught.value, SessionError)
        stored = await store.load("s")
        assert stored is not None and stored.version == v and len(stored.messages) == 1
        assert await store.save("s", _update(v, 1, [_text(1)])) == v + 1  # room enough again
        stored = await store.load("s")
        assert stored is not None and len(stored.messages) == 2

    asyncio.run(go())


CHILD = textwrap.dedent(
    """
    import asyncio, resource, signal, sys
    from interlude.sessions import FileStore
    from interlude.testing.conformance._support import _text, _update

    store = FileStore(sys.argv[1])
    v = asyncio.run(store.save("s", _update(0, 0, [_text(0)])))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG rather than the signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
    big = {"role": "user", "content": [{"type": "text", "text": "x" * 200_000}]}
    try:
        asyncio.run(store.save("s", _update(v, 1, [big])))
    except Exception as exc:
        print(type(exc).__name__, [c.__name__ for c in type(exc).__mro__])
    """
)


def test_a_file_size_limit_is_store_unavailable_not_a_raw_oserror(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "sessions")],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("StoreUnavailableError"), out.stdout
    assert "SessionError" in out.stdout
