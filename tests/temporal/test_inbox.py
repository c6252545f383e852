"""The web inbox on paused Temporal workflows (``create_app(TemporalInbox(...))``, ``interlude
serve`` with ``--temporal``), against the real dev server, through the ASGI client: the list
comes from the visibility listing and each workflow's ``pending`` query, and answers go to the
workflow's ``answer`` Update."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the inbox tests need the [server] extra")

import httpx

from tests.support import free_port

from .conftest import Env
from .polling import pending, until

TOKEN = "ana-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _prompt(*calls: tuple[str, dict[str, object]]) -> str:
    return json.dumps([list(c) for c in calls])


def _runs(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


async def _question(env: Env, workflow_id: str) -> Any:
    return (await pending(env.agents, workflow_id))[0]


async def _until(check: Callable[[], Any], what: str) -> Any:
    """``await check()`` until it returns something true (the listing is eventually
    consistent)."""
    return await until(check, what, every=0.1)


@asynccontextmanager
async def _inbox(env: Env, **options: Any) -> AsyncIterator[httpx.AsyncClient]:
    from interlude.server import create_app
    from interlude.temporal import TemporalInbox

    backend = TemporalInbox(env.client, task_queue=env.task_queue)
    asgi = create_app(backend, tokens={TOKEN: "ana"}, **options)
    transport = httpx.ASGITransport(app=asgi)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        yield http


async def _rows(http: httpx.AsyncClient, workflow_id: str) -> list[dict[str, Any]]:
    r = await http.get("/api/pending", headers=AUTH)
    assert r.status_code == 200, r.text
    return [row for row in r.json()["pending"] if row["session"] == workflow_id]


async def test_the_api_lists_a_paused_workflow_and_an_answer_runs_the_tool_once(
    env: Env, tmp_path: Path
) -> None:
    log = tmp_path / "a"
    wid = await env.agents.start("approve", _prompt(("touch", {"path": str(log)})))
    question = await _question(env, wid)
    async with _inbox(env) as http:
        assert (await http.get("/api/pending")).status_code == 401
        [row] = await _until(lambda: _rows(http, wid), "the paused workflow in the list")
        assert row["agent"] == "approve" and row["question_id"] == question.id
        assert row["id"] == f"{wid}/{question.id}"  # the answer key names its workflow
        assert (row["tool"], row["input"]) == ("touch", {"path": str(log)})
        assert row["shown"] == question.digest and row["expired"] is False
        filtered = await http.get("/api/pending?agent=plain", headers=AUTH)
        assert wid not in {r["session"] for r in filtered.json()["pending"]}

        page = (await http.get(f"/api/sessions/{wid}", headers=AUTH)).json()
        assert page["workflow"]["status"] == "RUNNING" and page["running"] is False
        shown = [(i["id"], i["question_id"]) for i in page["interrupts"]]
        assert shown == [(f"{wid}/{question.id}", question.id)]

        body = {"answers": {question.id: True}, "shown": {question.id: row["shown"]}}
        r = await http.post(f"/api/sessions/{wid}/answers", json=body, headers=AUTH)
        assert r.status_code == 202, r.text
        [taken] = r.json()["recorded"]
        assert (taken["interrupt_id"], taken["answer"], taken["by"]) == (question.id, True, "ana")

        result = await env.agents.result(wid)
        assert result["stop_reason"] == "end_turn" and _runs(log) == 1
        [entry] = result["state"]["audit"]
        assert (entry["by"], entry["answer"], entry["shown"]) == ("ana", True, question.digest)

        again = await http.post(f"/api/sessions/{wid}/answers", json=body, headers=AUTH)
        assert again.status_code == 409 and "closed" in again.json()["error"]
        done = (await http.get(f"/api/sessions/{wid}", headers=AUTH)).json()
        assert done["workflow"]["status"] == "COMPLETED" and done["interrupts"] == []
        assert done["workflow"]["stop_reason"] == "end_turn"
        assert [a["by"] for a in done["audit"]] == ["ana"] and done["messages"]
        await _until(lambda: _gone(http, wid), "the finished workflow to leave the list")
    assert _runs(log) == 1


async def _gone(http: httpx.AsyncClient, workflow_id: str) -> bool:
    return not await _rows(http, workflow_id)


async def test_refused_answers_map_to_http_statuses_and_change_nothing(
    env: Env, tmp_path: Path
) -> None:
    log = tmp_path / "a"
    wid = await env.agents.start("typed", _prompt(("touch", {"path": str(log)})))
    question = await _question(env, wid)
    handle = env.client.get_workflow_handle(wid)
    history = [e async for e in handle.fetch_history_events()]
    url = f"/api/sessions/{wid}/answers"
    async with _inbox(env) as http:
        maybe = {"answers": {question.id: {"approved": "maybe"}}}
        bad = await http.post(url, json=maybe, headers=AUTH)
        assert bad.status_code == 422, bad.text
        assert bad.json()["interrupt_id"] == question.id and bad.json()["path"] == ["approved"]
        stale = {"answers": {question.id: {"approved": True}}, "shown": {question.id: "0" * 64}}
        r = await http.post(url, json=stale, headers=AUTH)
        assert r.status_code == 422 and "shown" in r.json()["error"], r.text
        r = await http.post(url, json={"answers": {"v1:nope": True}}, headers=AUTH)
        assert r.status_code == 409 and "v1:nope" in r.json()["error"], r.text
        for path in ("/api/sessions/no-such-workflow", "/api/sessions/no-such-workflow/answers"):
            if path.endswith("answers"):
                r = await http.post(path, json={"answers": {question.id: True}}, headers=AUTH)
            else:
                r = await http.get(path, headers=AUTH)
            assert r.status_code == 404 and "no-such-workflow" in r.json()["error"], r.text
        # Refused Updates leave no trace in the workflow: nothing ran, nothing changed.
        assert [e async for e in handle.fetch_history_events()] == history
        assert _runs(log) == 0 and await env.agents.pending(wid) == [question]

        good = {"answers": {question.id: {"approved": True, "note": "fine"}}}
        assert (await http.post(url, json=good, headers=AUTH)).status_code == 202
        result = await env.agents.result(wid)
        assert result["stop_reason"] == "end_turn" and _runs(log) == 1


async def test_a_second_answer_while_the_first_applies_gets_409(env: Env, tmp_path: Path) -> None:
    log = tmp_path / "s"
    wid = await env.agents.start("approve", _prompt(("slow", {"path": str(log), "seconds": 2})))
    question = await _question(env, wid)
    body = {"answers": {question.id: True}}
    async with _inbox(env) as http:
        first = await http.post(f"/api/sessions/{wid}/answers", json=body, headers=AUTH)
        assert first.status_code == 202, first.text
        second = await http.post(f"/api/sessions/{wid}/answers", json=body, headers=AUTH)
        assert second.status_code == 409, second.text
        result = await env.agents.result(wid)
    assert result["stop_reason"] == "end_turn" and _runs(log) == 1
    assert [e["by"] for e in result["state"]["audit"]] == ["ana"]


def _csrf(html: str, action: str = "") -> str:
    at = html.index(f'action="{action}') if action else 0
    match = re.search(r'name="csrf" value="([^"]+)"', html[at:])
    assert match, html
    return match.group(1)


async def test_the_html_form_answers_through_the_update(env: Env, tmp_path: Path) -> None:
    log = tmp_path / "a"
    wid = await env.agents.start("approve", _prompt(("touch", {"path": str(log)})))
    question = await _question(env, wid)
    async with _inbox(env) as http:
        login = await http.get("/login")
        r = await http.post("/login", data={"token": TOKEN, "csrf": _csrf(login.text)})
        assert r.status_code == 303, r.text

        async def listed() -> bool:
            return wid in (await http.get("/")).text

        await _until(listed, "the paused workflow on the list page")
        page = await http.get(f"/sessions/{wid}")
        assert page.status_code == 200 and "workflow <strong>RUNNING</strong>" in page.text
        at = page.text.index(f'name="interrupt_id" value="{question.id}"')
        shown = re.search(r'name="shown" value="([^"]+)"', page.text[at:])
        assert shown and shown.group(1) == question.digest
        form = {
            "csrf": _csrf(page.text, "/sessions/"),
            "interrupt_id": question.id,
            "shown": shown.group(1),
            "answer": "true",
        }
        forged = await http.post(f"/sessions/{wid}/answer", data={**form, "csrf": "forged"})
        assert forged.status_code == 403 and await env.agents.pending(wid) == [question]
        r = await http.post(f"/sessions/{wid}/answer", data=form)
        assert r.status_code == 303, r.text
        after = await http.get(r.headers["location"])
        assert "the workflow carries the run on" in after.text
        result = await env.agents.result(wid)
        assert result["stop_reason"] == "end_turn" and _runs(log) == 1
        assert [e["by"] for e in result["state"]["audit"]] == ["ana"]
        again = await http.post(f"/sessions/{wid}/answer", data=form)
        assert again.status_code == 409 and "No pending question" in again.text
        done = await http.get(f"/sessions/{wid}")
        assert "The run ended (end_turn)" in done.text and "ana answered approve" in done.text


async def test_event_streams_share_one_poller_of_temporal(env: Env, tmp_path: Path) -> None:
    from interlude.server import create_app
    from interlude.temporal import TemporalInbox

    class Counting(TemporalInbox):
        calls = 0

        async def pending(self, **filters: Any) -> Any:
            Counting.calls += 1
            return await super().pending(**filters)

    wid = await env.agents.start("approve", _prompt(("touch", {"path": str(tmp_path / "a")})))
    await _question(env, wid)
    backend = Counting(env.client, task_queue=env.task_queue)
    await _until(lambda: backend.pending(), "the paused workflow in the listing")
    Counting.calls = 0
    asgi = create_app(backend, tokens={TOKEN: "ana"}, poll=0.25, stream_seconds=1.5)
    transport = httpx.ASGITransport(app=asgi)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        streams = await asyncio.gather(*(http.get("/events", headers=AUTH) for _ in range(4)))
    for stream in streams:
        assert stream.status_code == 200
        [data] = re.findall(r"event: pending\ndata: (.*)\n", stream.text)
        assert json.loads(data)["count"] == 1
    # Four streams over 1.5 s at one poll every 0.25 s: one poller, not one per stream.
    assert 1 <= Counting.calls <= 1.5 / 0.25 + 2, Counting.calls


def test_serve_with_temporal_refuses_a_worker_and_create_app_too(temporal_address: str) -> None:
    from interlude.errors import ConfigurationError
    from interlude.server import create_app
    from interlude.temporal import TemporalInbox

    env = {"PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "interlude", "--temporal", temporal_address, "serve", "--worker"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done
    [line] = done.stderr.splitlines()
    assert line.startswith("interlude: error: serve --worker") and "temporal-worker" in line
    with pytest.raises(ConfigurationError, match="temporal-worker"):
        create_app(TemporalInbox(temporal_address), tokens={TOKEN: "ana"}, worker=True)


def test_the_store_inbox_does_not_import_temporalio(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from interlude.server import create_app\n"
        f"create_app('sqlite:///{tmp_path}/s.db', tokens={{'{TOKEN}': 'ana'}})\n"
        "assert 'temporalio' not in sys.modules, 'temporalio was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


async def test_interlude_serve_on_temporal_answers_a_workflow(env: Env, tmp_path: Path) -> None:
    """``interlude --temporal ADDR serve``, as a process of its own on a free port:
    the API shows the workflow, an answer posted to it runs the tool once."""
    import os
    import signal

    log = tmp_path / "a"
    wid = await env.agents.start("approve", _prompt(("touch", {"path": str(log)})))
    question = await _question(env, wid)
    port = free_port()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("INTERLUDE_")}
    environ |= {"INTERLUDE_TOKENS": f"{TOKEN}=ana"}
    argv = ["--temporal", env.address, "serve", "--task-queue", env.task_queue]
    serve = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "interlude", *argv, "--json", "--port", str(port)],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert serve.stdout is not None
        line = await asyncio.wait_for(serve.stdout.readline(), 30)
        info = json.loads(line)
        assert info["temporal"] == env.address and info["token"] is None, info
        async with httpx.AsyncClient(base_url=info["url"], timeout=30) as http:

            async def up() -> bool:
                try:
                    return (await http.get("/openapi.json")).status_code == 200
                except httpx.TransportError:
                    return False

            await _until(up, "interlude serve to listen")
            page = (await http.get(f"/api/sessions/{wid}", headers=AUTH)).json()
            shown = [(i["id"], i["question_id"]) for i in page["interrupts"]]
            assert shown == [(f"{wid}/{question.id}", question.id)], page
            body = {"answers": {shown[0][0]: True}}  # the key it was shown (a plain id also goes)
            r = await http.post(f"/api/sessions/{wid}/answers", json=body, headers=AUTH)
            assert r.status_code == 202, r.text
        result = await env.agents.result(wid)
        assert result["stop_reason"] == "end_turn" and _runs(log) == 1
    finally:
        serve.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(serve.communicate(), 30)
    assert serve.returncode == 0 and b"Traceback" not in err, err.decode()


async def test_no_worker_on_the_queue_gives_504_not_a_hang(env: Env, tmp_path: Path) -> None:
    from interlude.server import create_app
    from interlude.temporal import AgentClient, TemporalInbox

    nobody = AgentClient(env.client, task_queue=f"{env.task_queue}-nobody")
    wid = await nobody.start("approve", _prompt(("touch", {"path": str(tmp_path / "a")})))
    backend = TemporalInbox(env.client, query_timeout=1.0, answer_timeout=1.0)
    asgi = create_app(backend, tokens={TOKEN: "ana"})
    transport = httpx.ASGITransport(app=asgi)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            r = await http.get(f"/api/sessions/{wid}", headers=AUTH)
            assert r.status_code == 504 and "temporal-worker" in r.json()["error"], r.text
            body = {"answers": {"v1:any": True}}
            r = await http.post(f"/api/sessions/{wid}/answers", json=body, headers=AUTH)
            # who may answer is checked against the pending query first: it times out, and
            # nothing is sent
            assert r.status_code == 504 and "nothing was sent" in r.json()["error"], r.text
    finally:
        await env.client.get_workflow_handle(wid).terminate("test over")
