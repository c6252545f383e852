"""The MCP door as a user runs it: ``interlude serve --mcp`` (streamable HTTP next to the
inbox) and ``interlude mcp-serve`` (stdio, started by the client) as real processes, driven
by the official ``mcp`` client; questions answered in the client's form, or left in the store
and answered through another door (the command line, another process). A tool runs once:
each run is a line in the file $MCP_APP_RUNS names, with the pid of the process that ran it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="serving agents over MCP needs the [mcp] extra")

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import ElicitResult

from interlude import Inbox
from tests.support.ports import free_port
from tests.support.processes import ROOT, started

from . import mcp_app
from .mcp_clients import ANA, CANCEL, Person, accept, connected

APP = "tests.channels.mcp_app:app"


def _runs(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _cli(store: str, *argv: str, runs: Path) -> subprocess.CompletedProcess[str]:
    """``interlude --store STORE --app APP ARGV`` in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "interlude", "--store", store, "--app", APP, *argv],
        cwd=ROOT,
        env={**_env(runs)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _env(runs: Path) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("INTERLUDE_")}
    return {**env, "MCP_APP_RUNS": str(runs)}


@asynccontextmanager
async def stdio(
    store: str, runs: Path, person: Any = None, *options: str
) -> AsyncIterator[ClientSession]:
    """A client session with ``interlude mcp-serve``, started as the client's subprocess."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "interlude", "--store", store, "--app", APP, "mcp-serve", *options],
        cwd=ROOT,
        env={"MCP_APP_RUNS": str(runs), "PYTHONPATH": str(ROOT)},
    )
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, elicitation_callback=person) as session,
    ):
        await session.initialize()
        yield session


def test_serve_mcp_serves_the_apps_agents_next_to_the_inbox(tmp_path: Path) -> None:
    store, runs, port = f"sqlite:///{tmp_path / 's.db'}", tmp_path / "runs", free_port()
    argv = [sys.executable, "-m", "interlude", "--store", store, "--app", APP]
    env = {**_env(runs), "INTERLUDE_TOKENS": f"{ANA}=ana:ops"}
    person = Person(accept(approve=True))

    async def call(url: str) -> Any:
        async with connected(url, ANA, person) as session:
            return await session.call_tool("payments", {"prompt": "Pay acme"})

    serve = [*argv, "serve", "--mcp", "--port", str(port)]
    with started(serve, port=port, env=env) as server:
        result = asyncio.run(call(server.url))
        data = result.structured_content
        assert data is not None and data["status"] == "completed", (result, server.output())
        assert "MCP endpoint: " in server.output()
    [ran] = _runs(runs)
    assert ran == {"run": "pay 120 to acme", "pid": server.process.pid}
    assert person.forms[0].message.startswith("May the agent run pay")


def test_mcp_serve_asks_over_stdio_as_the_person_it_runs_for(tmp_path: Path) -> None:
    store, runs = f"sqlite:///{tmp_path / 's.db'}", tmp_path / "runs"

    async def calls() -> list[Any]:
        person = Person(accept(answer=True), accept(approve=True))
        async with stdio(store, runs, person, "--by", "ana", "--group", "ops") as session:
            assert [t.name for t in (await session.list_tools()).tools] == [
                "payments",
                "deploys",
                "tickets",
            ]
            deployed = await session.call_tool("deploys", {"prompt": "Ship it"})
            paid = await session.call_tool("payments", {"prompt": "Pay acme"})
        return [deployed.structured_content, paid.structured_content]

    deployed, paid = asyncio.run(calls())
    assert deployed["status"] == paid["status"] == "completed"
    assert [r["run"] for r in _runs(runs)] == ["deploy prod", "pay 120 to acme"]
    for data in (deployed, paid):
        agent = mcp_app.app.open(data["session_id"], store)
        assert [e.by for e in agent.audit] == ["ana"]


def test_a_stdio_client_without_forms_leaves_the_question_to_the_command_line(
    tmp_path: Path,
) -> None:
    store, runs = f"sqlite:///{tmp_path / 's.db'}", tmp_path / "runs"

    async def call() -> Any:
        async with stdio(store, runs, None, "--by", "ana") as session:
            return await session.call_tool("payments", {"prompt": "Pay acme"})

    result = asyncio.run(call())
    data = result.structured_content
    assert data is not None and data["status"] == "paused" and _runs(runs) == []
    [question] = data["questions"]
    assert data["inbox"] is None and question["id"] in result.content[0].text

    answered = _cli(
        store, "answer", data["session_id"], question["id"], "true", "--by", "bo", runs=runs
    )
    assert answered.returncode == 0, answered.stderr
    [ran] = _runs(runs)  # once, in the command's process
    assert ran["run"] == "pay 120 to acme"


def test_a_stdio_client_that_goes_away_leaves_the_session_paused(tmp_path: Path) -> None:
    store, runs = f"sqlite:///{tmp_path / 's.db'}", tmp_path / "runs"
    asked = asyncio.Event()

    async def walks_away(params: Any) -> ElicitResult:
        asked.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def call() -> None:
        async with stdio(store, runs, Person(walks_away), "--by", "ana") as session:
            await session.call_tool("payments", {"prompt": "Pay acme"})

    async def go_away() -> None:
        task = asyncio.create_task(call())
        await asked.wait()
        task.cancel()  # the client closes the server's stdin with the form open
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go_away())
    [pending] = Inbox(store).pending()
    assert _runs(runs) == []
    answered = _cli(store, "answer", pending.session_id, pending.interrupt.id, "true", runs=runs)
    assert answered.returncode == 0, answered.stderr
    assert [r["run"] for r in _runs(runs)] == ["pay 120 to acme"]


def test_a_dismissed_form_leaves_the_question_to_any_other_door(tmp_path: Path) -> None:
    store, runs = f"sqlite:///{tmp_path / 's.db'}", tmp_path / "runs"

    async def call() -> Any:
        async with stdio(store, runs, Person(CANCEL), "--by", "ana") as session:
            return await session.call_tool("tickets", {"prompt": "Seats for Hamlet"})

    data = asyncio.run(call()).structured_content
    assert data is not None and data["status"] == "paused"
    assert any("dismissed" in note for note in data["notes"]) and _runs(runs) == []
    [question] = data["questions"]
    answered = _cli(store, "answer", data["session_id"], question["id"], "3", runs=runs)
    assert answered.returncode == 0, answered.stderr
    assert [r["run"] for r in _runs(runs)] == ["book 3 for Hamlet"]
