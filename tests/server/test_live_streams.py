"""Event streams on a real uvicorn: one shared poller, a cap per approver, a prompt end on
Ctrl-C of ``interlude serve``."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from interlude.server import _events, create_app
from tests.support import free_port, wait_for
from tests.support.serving import serving

from . import inbox_app
from .conftest import ANA, BO, TOKENS, bearer

ROOT = Path(__file__).resolve().parents[2]


def _hold(url: str, token: str, opened: list[int], ended: list[str]) -> None:
    """Open an event stream and read it to its end (``ended`` gets how it ended)."""
    try:
        with (
            httpx.Client(base_url=url, headers=bearer(token), timeout=30) as http,
            http.stream("GET", "/events") as stream,
        ):
            opened.append(stream.status_code)
            for _ in stream.iter_lines():
                pass
        ended.append("clean")
    except Exception as exc:
        ended.append(type(exc).__name__)


def test_streams_share_one_poller_and_an_approver_holds_at_most_ten(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox_app.pause("ops", "s1", store_url)
    reads = 0
    real = _events.pending_rows

    async def counted(state: object) -> object:
        nonlocal reads
        reads += 1
        return await real(state)  # type: ignore[arg-type]

    monkeypatch.setattr(_events, "pending_rows", counted)
    asgi = create_app(store_url, inbox_app.app, tokens=TOKENS, poll=0.1, stream_seconds=3)
    hub = asgi.state.interlude.hub
    with serving(asgi) as url:
        opened: list[int] = []
        ended: list[str] = []
        threads = [
            threading.Thread(target=_hold, args=(url, ANA, opened, ended), daemon=True)
            for _ in range(_events.MAX_STREAMS)
        ]
        for t in threads:
            t.start()
        wait_for(lambda: hub.streams == _events.MAX_STREAMS, what="ten streams")
        started = time.monotonic()
        one_more = httpx.get(f"{url}/events", headers=bearer(ANA), timeout=10)
        assert one_more.status_code == 429 and "Retry-After" in one_more.headers
        assert hub.streams == _events.MAX_STREAMS  # the one refused is not counted
        with (
            httpx.Client(base_url=url, headers=bearer(BO), timeout=10) as http,
            http.stream("GET", "/events") as other,  # another approver is not capped
        ):
            assert other.status_code == 200
            lines = other.iter_lines()
            assert next(lines).startswith("retry:")
            next(lines)  # a blank line
            assert next(lines) == "event: pending"
        reads_at, since = reads, time.monotonic()
        wait_for(lambda: reads - reads_at >= 3, what="three polls")
        polled, took = reads - reads_at, time.monotonic() - since
        # one poller (a read per 0.1 s), not one per stream (ten per 0.1 s), however slow
        assert 3 <= polled <= took / 0.1 + 3, (polled, took)
        for t in threads:
            t.join(30)
        assert opened == [200] * _events.MAX_STREAMS and ended == ["clean"] * len(opened)
        assert time.monotonic() - started < 25  # they end on their own (stream_seconds=3)
        wait_for(lambda: hub.streams == 0 and not hub.polling, what="the poller to stop")
        idle = reads
        time.sleep(0.5)
        assert reads == idle  # no stream, no polling


def test_ctrl_c_ends_open_streams_at_once(store_url: str) -> None:
    inbox_app.pause("ops", "s1", store_url)
    env = {**os.environ, "INTERLUDE_TOKENS": f"{ANA}=ana"}
    port = free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "interlude", "serve", "--store", store_url, "--port", str(port),
         "--shutdown-timeout", "60"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:

        def up() -> bool:
            try:
                return httpx.get(f"{url}/openapi.json").status_code == 200
            except httpx.TransportError:
                return False

        wait_for(up, what="interlude serve to listen", timeout=30)
        opened: list[int] = []
        ended: list[str] = []
        threads = [
            threading.Thread(target=_hold, args=(url, ANA, opened, ended), daemon=True)
            for _ in range(4)
        ]
        for t in threads:
            t.start()
        wait_for(lambda: len(opened) == 4, what="four streams")
        assert opened == [200] * 4
        time.sleep(0.3)
        started = time.monotonic()
        serve.send_signal(signal.SIGINT)
        _, stderr = serve.communicate(timeout=15)
        took = time.monotonic() - started
        for t in threads:
            t.join(5)
    finally:
        with contextlib.suppress(ProcessLookupError):
            serve.kill()
    assert serve.returncode == 0, stderr
    assert took < 30, (took, stderr)  # the streams ended: not the 60 s graceful timeout
    assert "Traceback" not in stderr and "CancelledError" not in stderr, stderr
    assert ended == ["clean"] * 4
