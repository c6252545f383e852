"""The inbox on a real uvicorn: the API, the in-process worker, the event stream, the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from interlude import Inbox
from interlude.server import create_app
from tests.support import free_port, wait_for
from tests.support.serving import serving

from . import inbox_app
from .conftest import ANA, TOKENS, bearer

ROOT = Path(__file__).resolve().parents[2]


def test_answer_over_http_and_the_in_process_worker_runs_the_tool_once(store_url: str) -> None:
    iid = inbox_app.pause("ops", "s1", store_url)
    asgi = create_app(store_url, inbox_app.app, tokens=TOKENS, worker=True, poll=0.05)
    with serving(asgi) as url, httpx.Client(base_url=url, headers=bearer()) as http:
        assert httpx.get(f"{url}/api/pending").status_code == 401
        (row,) = http.get("/api/pending").json()["pending"]
        r = http.post(
            "/api/sessions/s1/answers",
            json={"answers": {iid: True}, "shown": {iid: row["shown"]}},
        )
        assert r.status_code == 202
        wait_for(lambda: inbox_app.RUNS, what="the worker to run the tool")
        wait_for(lambda: not http.get("/api/pending").json()["pending"], what="the pause to end")
        assert http.get("/api/sessions/s1").json()["audit"][0]["by"] == "ana"
    assert inbox_app.RUNS == ["deploy web 1.2.3"]


def _events(lines: object) -> object:
    """The ``data`` of each ``pending`` event of an SSE line iterator."""
    event = None
    for line in lines:  # type: ignore[attr-defined]
        if line.startswith("event: "):
            event = line[len("event: ") :]
        elif line.startswith("data: ") and event == "pending":
            yield json.loads(line[len("data: ") :])


def test_the_event_stream_tells_when_questions_arrive_and_are_answered(store_url: str) -> None:
    iid = inbox_app.pause("ops", "s1", store_url)
    asgi = create_app(store_url, inbox_app.app, tokens=TOKENS, poll=0.05, stream_seconds=20)
    with (
        serving(asgi) as url,
        httpx.Client(base_url=url, headers=bearer(), timeout=10) as http,
        http.stream("GET", "/events") as stream,
    ):
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        events = _events(stream.iter_lines())
        first = next(events)  # type: ignore[call-overload]
        assert first["count"] == 1
        inbox_app.pause("refunds", "s2", store_url)  # a question arrives
        arrived = next(events)  # type: ignore[call-overload]
        assert arrived["count"] == 2
        answer = http.post("/api/sessions/s1/answers", json={"answers": {iid: True}})
        assert answer.status_code == 202
        answered = next(events)  # type: ignore[call-overload]
        assert answered["count"] == 2 and answered["fingerprint"] != arrived["fingerprint"]


def _cli(*args: str, env: dict[str, str]) -> list[str]:
    return [sys.executable, "-m", "interlude", *args]


def test_interlude_serve_with_a_worker_and_interlude_worker_once(
    store_url: str, tmp_path: Path
) -> None:
    runs = tmp_path / "runs.txt"
    env = {
        **os.environ,
        "INTERLUDE_TOKENS": f"{ANA}=ana",
        "INTERLUDE_TEST_RUNS": str(runs),
        "INTERLUDE_APP": "tests.server.inbox_app:app",
    }
    iid = inbox_app.pause("ops", "s1", store_url)
    port = free_port()
    serve = subprocess.Popen(
        _cli(
            "serve",
            "--store",
            store_url,
            "--port",
            str(port),
            "--worker",
            "--poll",
            "0.05",
            env=env,
        ),
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert serve.stdout is not None
        banner = serve.stdout.readline() + serve.stdout.readline()
        assert f"http://127.0.0.1:{port}" in banner and "/login" in banner, banner
        url = f"http://127.0.0.1:{port}"

        def up() -> bool:
            try:
                return httpx.get(f"{url}/openapi.json").status_code == 200
            except httpx.TransportError:
                return False

        wait_for(up, what="interlude serve to listen")
        r = httpx.post(
            f"{url}/api/sessions/s1/answers", json={"answers": {iid: True}}, headers=bearer()
        )
        assert r.status_code == 202, r.text
        wait_for(runs.exists, what="the served worker to run the tool")
    finally:
        serve.send_signal(signal.SIGINT)
        serve.wait(15)
    assert runs.read_text().splitlines() == ["deploy web 1.2.3"]

    # `interlude worker --once` carries on a session answered through the inbox.
    iid2 = inbox_app.pause("ops", "s2", store_url)
    Inbox(store_url).record("s2", {iid2: True}, by="bo")
    done = subprocess.run(
        _cli("worker", "--store", store_url, "--once", "--json", env=env),
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"handled": 1, "failed": {}}
    assert runs.read_text().splitlines() == ["deploy web 1.2.3"] * 2
    assert Inbox(store_url).audit("s2")[0]["by"] == "bo"


def test_serve_without_tokens_refuses_a_public_address(store_url: str) -> None:
    inbox_app.pause("ops", "s1", store_url)
    env = {k: v for k, v in os.environ.items() if k != "INTERLUDE_TOKENS"}
    r = subprocess.run(
        _cli("serve", "--store", store_url, "--host", "0.0.0.0", env=env),
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 1
    assert "INTERLUDE_TOKENS" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    env["INTERLUDE_TOKENS"] = "short=ana"
    r = subprocess.run(
        _cli("serve", "--store", store_url, env=env),
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 1 and "shorter than 16" in r.stderr


def test_serve_without_tokens_on_loopback_prints_a_one_run_token(store_url: str) -> None:
    inbox_app.pause("ops", "s1", store_url)
    env = {k: v for k, v in os.environ.items() if k != "INTERLUDE_TOKENS"}
    port = free_port()
    serve = subprocess.Popen(
        _cli("serve", "--store", store_url, "--port", str(port), "--json", env=env),
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert serve.stdout is not None
        info = json.loads(serve.stdout.readline())
        url = info["url"]

        def up() -> bool:
            try:
                return httpx.get(f"{url}/openapi.json").status_code == 200
            except httpx.TransportError:
                return False

        wait_for(up, what="interlude serve to listen")
        token = info["token"]
        assert len(token) >= 16
        r = httpx.get(f"{url}/api/pending", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200 and r.json()["pending"][0]["session"] == "s1"
    finally:
        serve.send_signal(signal.SIGINT)
        serve.wait(15)
