"""``interlude --dbos URL``: a worker started as the real command (``dbos-worker``), runs started,
listed and answered from other ``interlude`` processes; refused answers print one line, exit
non-zero and change nothing; the commands that work on a store refuse ``--dbos``. ``--dbos``
alone takes the ``--store``'s PostgreSQL URL: ``demo`` runs there from nothing but the server,
and the next steps it prints (a worker, ``pending``, ``answer``) work as printed."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from interlude.cli import main
from tests.support import Started, started, wait_for
from tests.support.cli import CLI, cli_env
from tests.support.postgres import DSN

from .agents import runs
from .support import paused, prompt, session

APP = "tests.dbos.agents:app"


@pytest.fixture(scope="module")
def cli_worker(dbos_url: str) -> Iterator[Started]:
    """``interlude --dbos URL dbos-worker --app tests.dbos.agents:app``, once it serves."""
    argv = [*CLI, "--dbos", dbos_url, "--json", "dbos-worker", "--app", APP]
    with started([*argv, "--executor-id", f"cli-{uuid.uuid4().hex[:6]}"]) as running:
        wait_for(
            lambda: '"worker"' in running.output(),
            what="interlude dbos-worker",
            process=running.process,
        )
        yield running


def interlude(url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """``interlude --dbos URL ARGV...`` as a process of its own."""
    return subprocess.run(
        [*CLI, "--dbos", url, *argv], capture_output=True, text=True, timeout=120, check=False
    )


def _store_pending_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> set[str]:
    """The keys of a row of ``pending --json`` on a store (the demo's paused session)."""
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    assert main(["--store", url, "--json", "demo", "--session", "d"]) == 0
    capsys.readouterr()
    assert main(["--store", url, "--json", "pending"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    return set(row)


def test_run_pending_and_answer_from_other_processes_run_the_tool_once(
    dbos_url: str, cli_worker: Started, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from interlude.dbos import result

    path, sid = str(tmp_path / "touch"), session()
    ran = interlude(
        dbos_url, "--json", "run", "--app", APP, "approve", sid, prompt(("touch", {"path": path}))
    )
    assert ran.returncode == 0, ran.stderr
    started_run = json.loads(ran.stdout)
    assert (started_run["session"], started_run["stop_reason"]) == (sid, "interrupt")
    [asked] = started_run["interrupts"]

    listed = interlude(dbos_url, "pending", "--json")
    assert listed.returncode == 0, listed.stderr
    [row] = [r for r in json.loads(listed.stdout) if r["session"] == sid]
    assert row["id"] == asked["id"] and row["name"] == "approve"
    assert (row["tool"], row["input"]) == ("touch", {"path": path})
    assert set(row) == _store_pending_keys(tmp_path, capsys)  # as it lists stored ones
    assert runs(path) == 0

    answered = interlude(dbos_url, "answer", sid, row["short_id"], "true", "--by", "ana")
    assert answered.returncode == 0, answered.stderr
    assert (
        f"session {sid}: resumed" in answered.stdout
        and "The run ended (end_turn)" in answered.stdout
    )
    out = result_of(dbos_url, sid, result)
    assert out["answered"] == {asked["id"]: "ana"} and runs(path) == 1

    again = interlude(dbos_url, "answer", sid, asked["id"], "false", "--by", "eve")
    assert again.returncode == 1 and again.stdout == ""
    [line] = again.stderr.splitlines()
    assert line.startswith(f"interlude: error: session '{sid}': the answer was refused")
    assert "AlreadyAnsweredError" in line and "(by ana)" in line
    assert runs(path) == 1

    shown = interlude(dbos_url, "show", sid, "--json")
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    assert view["workflow"]["status"] == "SUCCESS" and view["stop_reason"] == "end_turn"
    assert [a["by"] for a in view["audit"]] == ["ana"] and view["messages"]
    assert [
        r
        for r in json.loads(interlude(dbos_url, "pending", "--json").stdout)
        if r["session"] == sid
    ] == []


def result_of(url: str, sid: str, result: object) -> dict[str, object]:
    import asyncio

    assert callable(result)
    got = asyncio.run(result(url, sid))
    assert isinstance(got, dict)
    return got


def test_a_refused_answer_prints_one_line_exits_non_zero_and_changes_nothing(
    dbos_url: str, cli_worker: Started, tmp_path: Path
) -> None:
    import asyncio

    path, sid = str(tmp_path / "touch"), session()
    assert (
        interlude(
            dbos_url, "run", "--app", APP, "typed", sid, prompt(("touch", {"path": path}))
        ).returncode
        == 0
    )
    [question] = asyncio.run(paused(dbos_url, sid))

    refused = interlude(dbos_url, "--json", "answer", sid, question.interrupt.id, '"yes"')
    assert refused.returncode == 1
    [line] = refused.stderr.splitlines()
    assert line.startswith(f"interlude: error: session '{sid}': the answer was refused")
    assert "AnswerValidationError" in line and line.endswith("the session is unchanged")
    assert json.loads(refused.stdout)["code"] == "invalid_answer"
    [still] = asyncio.run(paused(dbos_url, sid))
    assert still.interrupt.id == question.interrupt.id and runs(path) == 0

    unknown = interlude(dbos_url, "answer", "no-such-session", "abc", "true")
    assert unknown.returncode == 1
    assert unknown.stderr.splitlines() == [
        "interlude: error: no session 'no-such-session' on DBOS at " + dbos_url
    ]

    ok = interlude(
        dbos_url, "answer", sid, question.interrupt.id, '{"approved": true}', "--by", "bo"
    )
    assert ok.returncode == 0, ok.stderr
    assert runs(path) == 1


@pytest.fixture
def fresh_url(dbos_url: str) -> Iterator[str]:
    """A new, empty database on the test server (no DBOS tables, no worker of another test
    polling its queue): what a fresh clone's ``--store postgresql://...`` names."""
    import psycopg

    name = f"interlude_demo_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, query = DSN.partition("?")
    try:
        yield f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")
    finally:
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _user_env() -> dict[str, str]:
    env = cli_env()
    env.pop("INTERLUDE_DBOS", None)
    return env


def _as_printed(line: str) -> subprocess.CompletedProcess[str]:
    """A next step the CLI printed (``interlude ...``), run as it is."""
    argv = shlex.split(line.strip())
    assert argv[0] == "interlude", line
    return subprocess.run(
        [*CLI, *argv[1:]], capture_output=True, text=True, timeout=120, check=False, env=_user_env()
    )


def test_demo_on_the_stores_postgresql_then_pending_answer_and_show_as_printed(
    fresh_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = _user_env()
    demo = subprocess.run(
        [*CLI, "--store", fresh_url, "--dbos", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert demo.returncode == 0 and demo.stderr == "", demo.stderr
    assert "session: demo-1" in demo.stdout and "Paused: 1 question(s)" in demo.stdout
    steps = [line for line in demo.stdout.splitlines() if line.startswith("  interlude ")]
    worker_step, pending_step, answer_step = steps
    lead = f"  interlude --store '{fresh_url}' --dbos "
    assert re.fullmatch(re.escape(lead) + r"dbos-worker --executor-id demo-worker-\w+", worker_step)
    assert pending_step == lead + "pending"
    assert re.fullmatch(re.escape(lead) + r"answer demo-1 v1:\S+ true", answer_step), answer_step

    listed = _as_printed(pending_step + " --json")  # as a store's pending --json lists them
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)
    assert (row["session"], row["name"], row["tool"]) == ("demo-1", "approve", "delete_files")
    assert set(row) == _store_pending_keys(tmp_path, capsys)

    argv = [*shlex.split(worker_step)[1:], "--json"]
    with started([*CLI, *argv], env=env) as running:
        wait_for(
            lambda: '"worker"' in running.output(), what="dbos-worker", process=running.process
        )
        answered = _as_printed(answer_step + " --by ana")
        assert answered.returncode == 0, answered.stderr
        assert "session demo-1: resumed" in answered.stdout
        assert "assistant: Done: I deleted the three old log files" in answered.stdout

    shown = subprocess.run(
        [*CLI, "--store", fresh_url, "--dbos", "show", "demo-1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert shown.returncode == 0, shown.stderr
    assert "run SUCCESS" in shown.stdout and "The run ended (end_turn)." in shown.stdout
    assert "-> delete_files" in shown.stdout and "ana answered approve: true" in shown.stdout


def test_commands_that_work_on_a_store_refuse_dbos_and_it_goes_with_one_engine(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("INTERLUDE_DBOS", "INTERLUDE_TEMPORAL"):
        monkeypatch.delenv(name, raising=False)
    url = "postgresql://postgres@127.0.0.1:1/none"
    for argv in (["sessions"], ["expire", "s"], ["history", "s"], ["temporal-worker"]):
        assert main(["--dbos", url, *argv]) == 1
        [line] = capsys.readouterr().err.splitlines()
        assert line.startswith(
            "interlude: error: --dbos works with demo, run, pending, answer, show, serve, "
            f"dbos-worker and move; {argv[0]} works on "
        ), line
    assert main(["--dbos", url, "--temporal", "127.0.0.1:1", "pending"]) == 1
    assert "give one of them" in capsys.readouterr().err
    assert main(["--dbos", "sqlite:///x.db", "pending"]) == 1
    assert "--dbos takes a PostgreSQL URL" in capsys.readouterr().err
    assert main(["dbos-worker"]) == 1
    assert "dbos-worker needs --dbos URL" in capsys.readouterr().err
    monkeypatch.setenv("INTERLUDE_TEMPORAL", "127.0.0.1:1")  # --dbos given wins over it
    assert main(["--dbos", "sqlite:///x.db", "pending"]) == 1
    assert "--dbos takes a PostgreSQL URL" in capsys.readouterr().err


def test_dbos_alone_takes_the_stores_postgresql_url_and_refuses_another_store(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("INTERLUDE_DBOS", "INTERLUDE_TEMPORAL", "INTERLUDE_STORE"):
        monkeypatch.delenv(name, raising=False)
    for argv in (
        ["--store", "sqlite:///x.db", "--dbos", "demo"],
        ["--dbos", "pending", "--store", "file:///tmp/x"],
        ["pending", "--dbos"],  # the default store: the demo's SQLite file
    ):
        assert main(argv) == 1, argv
        [line] = capsys.readouterr().err.splitlines()
        assert line.startswith(
            "interlude: error: --dbos without a URL takes the --store's PostgreSQL URL, and the "
            "store is "
        ), line
    url = "postgresql://postgres@127.0.0.1:1/none"
    assert main(["--store", url, "--dbos", "sessions"]) == 1  # the store's URL, taken as given
    assert "--dbos works with demo, run" in capsys.readouterr().err
    assert main(["--store", url, "--json", "--dbos", "show", "s"]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("interlude: error: DBOS at " + url), line
    monkeypatch.setenv("INTERLUDE_STORE", url)  # the store from $INTERLUDE_STORE
    assert main(["--dbos", "sessions"]) == 1
    assert "--dbos works with demo, run" in capsys.readouterr().err
