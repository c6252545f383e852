"""The endpoint driven by the official AG-UI client (@ag-ui/client under Node) against
``interlude serve --app``: the asking and the answering runs in different processes (client and
server both), refusals as the client reports them, and a server killed while a resume runs its
tool."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.live import free_port, wait_for

from .conftest import ANA, BO, ran

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def serve(tmp_path: Path, runs: Path) -> Callable[..., Any]:
    """Starts ``interlude serve --app tests.agui.agui_app:app`` on one SQLite file; each call
    is a new server process (a context manager yielding its /ag-ui/ops URL and process)."""
    import asyncio

    from interlude.sessions import SQLiteStore

    made = SQLiteStore(tmp_path / "agui.db")  # serve opens a store that exists
    asyncio.run(made.list_sessions())
    made.close()
    store = f"sqlite:///{tmp_path / 'agui.db'}"

    @contextmanager
    def start(**env: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
        port = free_port()
        environ = {
            **os.environ,
            **env,
            "INTERLUDE_TOKENS": f"{ANA}=ana,{BO}=bo",
            "INTERLUDE_TEST_RUNS": str(runs),
        }
        cmd = [sys.executable, "-m", "interlude", "serve", "--store", store, "--port", str(port)]
        process = subprocess.Popen(
            [*cmd, "--app", "tests.agui.agui_app:app"],
            cwd=ROOT,
            env=environ,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        base = f"http://127.0.0.1:{port}"

        def up() -> bool:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            try:
                return httpx.get(f"{base}/healthz").status_code in (200, 503)
            except httpx.TransportError:
                return False

        try:
            wait_for(up, what="interlude serve to listen", timeout=30)
            yield f"{base}/ag-ui/ops", process
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                process.wait(15)

    return start


def answers(pending: list[dict[str, Any]], **given: Any) -> dict[str, Any]:
    return {q["id"]: {"status": "resolved", "payload": given[q["reason"]]} for q in pending}


def test_the_client_pauses_and_another_process_answers(serve: Any, drive: Any, runs: Path) -> None:
    with serve() as (url, _):
        first = drive(url, "t1", prompt="both")
    assert first["error"] is None and first["events"][-1] == "RUN_FINISHED"
    pending = first["pending"]
    assert [q["reason"] for q in pending] == ["approve", "refund"]
    assert [q["toolCallId"] for q in pending] == ["c1", "c2"]
    assert ran(runs) == []
    with serve() as (url, _):  # another server process, another client process
        given = answers(pending, approve=True, refund={"approve": True, "cap": 900})
        second = drive(url, "t1", pending=pending, responses=given)
    assert second["error"] is None and second["pending"] == []
    assert second["result"] == "Done: success: deployed web; success: refunded 500"
    assert second["events"].count("TOOL_CALL_RESULT") == 2
    assert sorted(ran(runs)) == ["deploy web", "refund A-1 500"]


def test_the_client_sees_refusals_and_nothing_runs(serve: Any, drive: Any, runs: Path) -> None:
    with serve() as (url, _):
        pending = drive(url, "t1", prompt="deploy")["pending"]
        forged = [{**pending[0], "id": "v1:before_tool_call:c1:not-asked"}]
        unknown = drive(url, "t1", pending=forged, responses=answers(forged, approve=True))
        assert unknown["error"]["code"] == "UnknownInterruptError", unknown
        mistyped = drive(url, "t1", pending=pending, responses=answers(pending, approve="yes"))
        assert mistyped["error"]["code"] == "AnswerValidationError", mistyped
        done = drive(url, "t1", pending=pending, responses=answers(pending, approve=True))
        assert done["error"] is None and done["result"] == "Done: success: deployed web"
        again = drive(url, "t1", pending=pending, responses=answers(pending, approve=True))
        assert "already answered (by ana)" in again["error"]["message"], again
    assert ran(runs) == ["deploy web"]


def test_a_server_killed_while_a_resume_runs_the_tool_runs_it_once(
    serve: Any, drive: Any, runs: Path, tmp_path: Path, ag_ui_client: Path
) -> None:
    gate = tmp_path / "gate"
    with serve(INTERLUDE_TEST_GATE=str(gate)) as (url, process):
        pending = drive(url, "t1", prompt="slow")["pending"]
        command = {
            "url": url,
            "token": ANA,
            "threadId": "t1",
            "pending": pending,
            "responses": answers(pending, approve=True),
        }
        import json

        client = subprocess.Popen(
            ["node", str(ag_ui_client / "drive.mjs"), json.dumps(command)],
            cwd=ag_ui_client,
            stdout=subprocess.PIPE,
            text=True,
        )
        wait_for(Path(f"{gate}.entered").exists, what="the resumed tool to start")
        process.send_signal(signal.SIGKILL)  # mid-tool: the answer is in, the tool started
        process.wait(10)
        out, _ = client.communicate(timeout=30)
        assert json.loads(out.strip().splitlines()[-1])["error"] is not None
    assert ran(runs) == []
    gate.write_text("open")
    with serve(INTERLUDE_TEST_GATE=str(gate)) as (url, _):
        # A run with no prompt and no resume shows where the thread stands: the stopped run is
        # recovered, and the call that was running when the server died is in doubt: it is
        # not run again unless a person says so.
        state = drive(url, "t1")
        (doubt,) = state["pending"]
        assert doubt["reason"] == "in_doubt" and doubt["toolCallId"] == "c1", doubt
        assert ran(runs) == []
        given = {doubt["id"]: {"status": "resolved", "payload": "rerun"}}
        done = drive(url, "t1", pending=state["pending"], responses=given)
        assert done["error"] is None and done["result"] == "Done: success: migrated users"
    assert ran(runs) == ["migrate users"]
