"""The ``interlude`` command against Temporal (``--temporal HOST:PORT``), against the real dev
server: each command runs in this process as a process of its own would
(:func:`tests.support.cli.run`); the worker is ``interlude temporal-worker`` in a process of its
own."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import wait_for
from tests.support.cli import CLI, INTERRUPT_KEYS, Ran, cli_env, run
from tests.support.processes import ROOT

PENDING_KEYS = {"session", *INTERRUPT_KEYS, "short_id", "raised_at", "age_seconds"}
FOLDER = Path(tempfile.gettempdir())
"""Where the commands run (they keep nothing in their folder: the sessions are workflows)."""


def one_line_error(ran: Ran, *parts: str) -> str:
    """The command failed with exit 1 and one ``interlude: error:`` line holding ``parts``."""
    assert ran.returncode == 1, str(ran)
    lines = ran.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("interlude: error: "), str(ran)
    for part in parts:
        assert part in lines[0], str(ran)
    return lines[0]


def _env(**extra: str) -> dict[str, str]:
    """A user's environment (:func:`tests.support.cli.cli_env`) without any of the project's
    variables, then ``extra``."""
    env = {k: v for k, v in cli_env().items() if not k.startswith("INTERLUDE_")}
    return {**env, **extra}


def cli(*args: str, env: dict[str, str] | None = None) -> Ran:
    return run(FOLDER, *args, env=env or _env())


@pytest.fixture(scope="module")
def queue(temporal_address: str) -> Iterator[str]:
    """``interlude temporal-worker`` for tests/temporal/agents.py on a task queue of its own,
    stopped by Ctrl-C (SIGINT) at the end: it must exit 0."""
    name = f"cli-{uuid.uuid4().hex[:8]}"
    argv = [*CLI, "--temporal", temporal_address, "temporal-worker"]
    argv += ["--app", "tests.temporal.agents:app", "--task-queue", name]
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # printed once the worker polls
    if "Ctrl-C stops" not in line:
        proc.kill()
        _, err = proc.communicate(timeout=10)
        pytest.fail(f"the worker did not start: {line!r}\n{err}")
    assert f"task queue {name}" in line and "--app tests.temporal.agents:app" in line, line
    yield name
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("the worker did not stop on Ctrl-C")
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err


def _start(address: str, task_queue: str, agent: str, log: Path) -> str:
    async def start() -> str:
        from temporalio.client import Client

        from interlude.temporal import AgentClient

        client = await Client.connect(address)
        prompt = json.dumps([["touch", {"path": str(log)}]])
        return await AgentClient(client, task_queue=task_queue).start(agent, prompt)

    return asyncio.run(start())


def _listed(address: str, workflow_id: str, *more: str, env: dict[str, str] | None = None) -> Any:
    """``pending --json``'s rows of ``workflow_id``, once it lists them (search attributes are
    eventually consistent)."""
    flags = [] if env is not None else ["--temporal", address]
    mine: list[Any] = []

    def listed() -> bool:
        rows = cli(*flags, "pending", "--json", *more, env=env).json()
        mine[:] = [r for r in rows if r["session"] == workflow_id]
        return bool(mine)

    wait_for(listed, what=f"{workflow_id} listed by `interlude pending`", every=0.2)
    return mine


def _runs(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_pending_answer_and_show_against_workflows(
    temporal_address: str, queue: str, tmp_path: Path
) -> None:
    at = ["--temporal", temporal_address]
    log = tmp_path / "touched"
    wid = _start(temporal_address, queue, "approve", log)

    [row] = _listed(temporal_address, wid, "--task-queue", queue)
    assert set(row) == PENDING_KEYS
    assert row["name"] == "approve" and row["tool"] == "touch"
    assert row["input"] == {"path": str(log)} and row["source"] == "before_tool_call"
    assert row["shown"].startswith("sha256:") and row["age_seconds"] >= 0
    # $INTERLUDE_TEMPORAL instead of the option, without the task queue filter (workflows other
    # tests left paused may be named on stderr: their workers are gone)
    [same] = _listed(temporal_address, wid, env=_env(INTERLUDE_TEMPORAL=temporal_address))
    assert same["id"] == row["id"]

    table = cli(*at, "pending", "--task-queue", queue)
    assert table.returncode == 0, str(table)
    assert row["short_id"] in table.stdout and wid in table.stdout
    # the command to answer it, ready to run
    told = f" answer --temporal {temporal_address} {wid} {row['short_id']} true\n"
    assert told in table.stdout, table.stdout

    shown = cli(*at, "show", wid)
    assert shown.returncode == 0, str(shown)
    assert "Paused, waiting on 1 question(s):" in shown.stdout and row["id"] in shown.stdout
    paused = cli(*at, "show", wid, "--json").json()
    assert paused["paused"] is True and paused["workflow"]["status"] == "RUNNING"
    assert [i["id"] for i in paused["interrupts"]] == [row["id"]]

    bad = cli(*at, "answer", wid, "v1:nope", "true")
    one_line_error(bad, f"session {wid!r} has no pending interrupt 'v1:nope'", row["short_id"])
    not_json = cli(*at, "answer", wid, row["short_id"], "yes please")
    one_line_error(not_json, "is not JSON")
    assert _runs(log) == 0

    done = cli(*at, "answer", wid, row["short_id"], "true", "--by", "ana", "--json").json()
    assert done == {"session": wid, "stop_reason": "end_turn", "reply": "Done.", "interrupts": []}
    assert _runs(log) == 1

    finished = cli(*at, "show", wid, "--json").json()
    assert finished["workflow"]["status"] == "COMPLETED" and finished["paused"] is False
    assert finished["stop_reason"] == "end_turn" and finished["agent"] == "approve"
    [entry] = finished["audit"]
    assert entry["by"] == "ana" and entry["answer"] is True and entry["interrupt_id"] == row["id"]
    assert "touched" in json.dumps(finished["messages"])
    human = cli(*at, "show", wid)
    assert "The run ended (end_turn)." in human.stdout and "ana answered approve" in human.stdout

    again = cli(*at, "answer", wid, row["id"], "true")
    one_line_error(again, f"session {wid!r} has no pending interrupt", "COMPLETED")
    assert _runs(log) == 1


def test_a_refused_answer_changes_nothing(
    temporal_address: str, queue: str, tmp_path: Path
) -> None:
    at = ["--temporal", temporal_address]
    log = tmp_path / "touched"
    wid = _start(temporal_address, queue, "typed", log)
    [row] = _listed(temporal_address, wid, "--task-queue", queue, "--name", "approve")
    assert row["response_schema"] is not None

    refused = cli(*at, "answer", wid, row["id"], '{"approved": "maybe"}', "--json")
    one_line_error(
        refused, f"session {wid!r}: the answer was refused (AnswerValidationError", "unchanged"
    )
    assert json.loads(refused.stdout)["session"] == wid
    stale = cli(*at, "answer", wid, row["id"], '{"approved": true}', "--shown", "sha256:0")
    one_line_error(stale, "the answer was refused")
    still = cli(*at, "show", wid, "--json").json()
    assert still["paused"] is True and [i["id"] for i in still["interrupts"]] == [row["id"]]
    assert _runs(log) == 0

    shown = row["shown"]
    ok = cli(*at, "answer", wid, row["id"], '{"approved": true}', "--shown", shown, "--json")
    assert ok.json()["stop_reason"] == "end_turn"
    assert _runs(log) == 1


def test_errors_are_one_line(temporal_address: str) -> None:
    one_line_error(cli("--temporal", "127.0.0.1:1", "pending"), "cannot reach Temporal at")
    one_line_error(
        cli("--temporal", temporal_address, "show", "no-such-workflow"),
        "no workflow 'no-such-workflow' on Temporal at",
    )
    one_line_error(
        cli("--temporal", temporal_address, "answer", "no-such-workflow", "x", "true"),
        "no workflow 'no-such-workflow'",
    )
    one_line_error(
        cli("--temporal", temporal_address, "sessions"),
        "--temporal works with demo, pending, answer, show, undo, recover, serve, "
        "temporal-worker and move",
    )
    one_line_error(cli("temporal-worker"), "temporal-worker needs --temporal")
