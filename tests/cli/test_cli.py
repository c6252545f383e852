"""The ``interlude`` command, driven as a user drives it: each command as a process of its own
would run it (in this process, through ``interlude.cli.main``: see ``running``), and as real
processes where the test is about a process (the console script, a kill, a race).

Every test runs in its own ``tmp_path`` (the default store, ``.interlude/demo.db``, lands
there).
"""

from __future__ import annotations

import json
import os
import re
import runpy
import shlex
import shutil
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.models.openai_server import OpenAIServer, error_reply, tool_reply
from tests.support import postgres
from tests.support.cli import (
    CLI,
    INTERRUPT_KEYS,
    Ran,
    as_a_process,
    cli_env,
    run,
    run_many,
    run_processes,
)

from .running import start_user_session, user_env

PATHS = [f"/var/log/app/app-2026-0{i}.log" for i in range(1, 4)]
RESULT_KEYS = {"session", "stop_reason", "reply", "interrupts"}
SHOW_KEYS = {"session", "messages", "paused", "interrupts", "state", "version"}
UNREACHABLE = "postgresql://postgres@127.0.0.1:1/test"


# --- what commands say --------------------------------------------------------------------


def assert_one_line_error(ran: Ran, *fragments: str) -> None:
    """A failed command: non-zero exit, one clear line on stderr, and nothing on stdout but,
    for an answer that got as far as running, the line saying which question it answered."""
    assert ran.returncode != 0, str(ran)
    assert all(line.startswith("answering ") for line in ran.stdout.splitlines()), str(ran)
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected a one-line error\n{ran}"
    assert "Traceback" not in ran.stderr, str(ran)
    for fragment in fragments:
        assert fragment.lower() in lines[0].lower(), f"{fragment!r} not in the error\n{ran}"


def assert_json_error(ran: Ran, session: str | None, *fragments: str) -> dict[str, Any]:
    """A failed ``--json`` command: the one stderr line, and the same error as JSON on stdout."""
    assert ran.returncode != 0, str(ran)
    assert "Traceback" not in ran.stderr, str(ran)
    [line] = ran.stderr.strip().splitlines()
    doc = json.loads(ran.stdout)
    assert doc == {"error": doc["error"], "session": session} | (
        {"code": doc["code"]} if "code" in doc else {}  # a refused answer's code
    ), str(ran)
    assert doc["error"] in line, str(ran)
    for fragment in fragments:
        assert fragment.lower() in doc["error"].lower(), f"{fragment!r} not in the error\n{ran}"
    return doc


def printed_commands(stdout: str) -> list[list[str]]:
    """The ``interlude ...`` commands an output tells the user to run, as argv lists."""
    commands = []
    for line in stdout.splitlines():
        if line.strip().startswith("interlude "):
            argv = shlex.split(line.strip())
            commands.append(argv[1:])
    return commands


def snapshot(
    cwd: Path, session: str, store: Sequence[str] = (), env: dict[str, str] | None = None
) -> tuple[Any, Any]:
    """What ``show --json`` and ``pending --json`` say (ages, which tick, left out)."""
    shown, pending = run_many(
        cwd, ["show", session, "--json", *store], ["pending", "--json", *store], env=env
    )
    entries = pending.json()
    for entry in entries:
        entry.pop("age_seconds")
    return shown.json(), entries


def demo_json(cwd: Path, *store: str) -> dict[str, Any]:
    result = run(cwd, "demo", "--json", *store).json()
    assert result["stop_reason"] == "interrupt", result
    return result


def blocks(show: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [b for m in show["messages"] for b in m["content"] if b["type"] == kind]


def all_text(show: dict[str, Any]) -> str:
    return json.dumps(show["messages"])


# --- stores -------------------------------------------------------------------------------


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A postgresql:// store URL on a schema of its own, dropped afterwards."""
    postgres.require_postgres()
    schema = postgres.unique_schema()
    try:
        yield postgres.schema_url(schema)
    finally:
        postgres.drop_schema(schema)


@pytest.fixture(params=["sqlite-default", "file", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    """The ``--store`` arguments of a store (none: the default SQLite file)."""
    if request.param == "sqlite-default":
        return []
    if request.param == "file":
        return ["--store", f"file:///{tmp_path / 'sessions'}"]  # four slashes: absolute
    return ["--store", request.getfixturevalue("postgres_url")]


# --- tests --------------------------------------------------------------------------------


def test_console_script_runs_help(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "interlude"
    assert script.exists(), f"the console script is not installed at {script}"
    [helped] = run_processes(tmp_path, [str(script), "--help"])
    helped.ok()
    for command in ("demo", "pending", "answer", "show"):
        assert command in helped.stdout, helped
    assert not (tmp_path / ".interlude").exists()


def test_newcomer_flow_demo_pending_answer_show(tmp_path: Path, store: list[str]) -> None:
    # 1. The demo pauses before the risky tool and says how to carry on.
    demo = run(tmp_path, "demo", *store).ok()
    assert "Paused" in demo.stdout, demo
    assert "delete_files" in demo.stdout, demo
    session = re.search(r"session: (\S+)", demo.stdout)
    assert session, demo
    session_id = session.group(1)
    if store:
        assert store[1] in demo.stdout, demo
        assert not (tmp_path / ".interlude").exists(), "a --store run touched the default store"
    else:
        assert ".interlude/demo.db" in demo.stdout, demo
        assert (tmp_path / ".interlude" / "demo.db").is_file()
    told = printed_commands(demo.stdout)
    told_pending = [c for c in told if c[0] == "pending"]
    told_answer = [c for c in told if c[0] == "answer"]
    assert len(told_pending) == 1 and len(told_answer) == 1, demo
    assert session_id in told_answer[0] and told_answer[0][-1] == "true", demo
    interrupt_id = told_answer[0][-2]

    # 2. Another process lists it: as a table (what the demo said to run) and as JSON.
    table, listed = run_many(tmp_path, told_pending[0], ["pending", "--json", *store])
    table.ok()
    [entry] = listed.json()
    assert entry["session"] == session_id and entry["id"] == interrupt_id
    row = next(line for line in table.stdout.splitlines() if session_id in line)
    assert row.split()[:2] == [entry["short_id"], session_id], table  # the id to copy first
    assert "approve" in row and "delete_files" in row and PATHS[0] in row, table
    assert re.search(r"\s\d+s\s", row), f"no age like '0s' in {row!r}"
    assert entry["name"] == "approve" and entry["tool"] == "delete_files"
    assert entry["input"] == {"paths": PATHS}

    # 3. Another process answers it, exactly as the demo said: the delete runs.
    answered = run(tmp_path, *told_answer[0]).ok()
    assert "deleted 3 file(s)" in answered.stdout, answered
    assert "Done:" in answered.stdout, answered
    assert "Paused" not in answered.stdout, answered

    # 4. The session is finished and nothing is pending.
    shown, shown_json, after = run_many(
        tmp_path,
        ["show", session_id, *store],
        ["show", session_id, "--json", *store],
        ["pending", "--json", *store],
    )
    shown.ok()
    assert "Free some disk space" in shown.stdout, shown
    assert "Done:" in shown.stdout and "Not paused" in shown.stdout, shown
    data = shown_json.json()
    assert data["session"] == session_id and data["paused"] is False
    assert data["interrupts"] == []
    results = {b["tool_use_id"]: b["status"] for b in blocks(data, "tool_result")}
    assert results == {"call_list": "success", "call_delete": "success"}
    assert data["messages"][-1]["role"] == "assistant"
    assert data["messages"][-1]["content"][0]["text"].startswith("Done:")
    assert after.json() == []


def test_decline_and_json_shapes(tmp_path: Path) -> None:
    started = demo_json(tmp_path)
    assert set(started) == RESULT_KEYS
    assert started["session"].startswith("demo-") and isinstance(started["reply"], str)
    [interrupt] = started["interrupts"]
    assert set(interrupt) == INTERRUPT_KEYS
    assert interrupt["name"] == "approve" and interrupt["source"] == "before_tool_call"
    assert interrupt["tool"] == "delete_files" and interrupt["input"] == {"paths": PATHS}
    assert isinstance(interrupt["reason"], dict)
    session, iid = started["session"], interrupt["id"]

    before, pending = snapshot(tmp_path, session)
    assert set(before) >= SHOW_KEYS
    assert before["session"] == session and before["paused"] is True
    assert isinstance(before["version"], int) and isinstance(before["state"], dict)
    assert before["interrupts"] == started["interrupts"]
    assert [m["role"] for m in before["messages"]] == ["user", "assistant", "user", "assistant"]
    [entry] = pending
    assert set(entry) == {*INTERRUPT_KEYS, "session", "raised_at", "short_id"}

    declined = run(tmp_path, "answer", session, iid, "false", "--json").json()
    assert set(declined) == RESULT_KEYS
    assert declined["session"] == session and declined["stop_reason"] == "end_turn"
    assert declined["interrupts"] == []
    assert "left the files alone" in declined["reply"], declined
    assert "declined: false" in declined["reply"] and "False" not in declined["reply"], declined

    after, pending = snapshot(tmp_path, session)
    assert after["paused"] is False and after["interrupts"] == []
    assert after["version"] > before["version"]
    results = {b["tool_use_id"]: b["status"] for b in blocks(after, "tool_result")}
    assert results == {"call_list": "success", "call_delete": "error"}
    assert "deleted 3 file(s)" not in all_text(after), "the declined tool ran"
    assert pending == []

    # Answering again: a clear error, and still nothing deleted.
    again = run(tmp_path, "answer", session, iid, "true")
    assert_one_line_error(again, session)
    assert snapshot(tmp_path, session) == (after, [])


NOW = 1_900_000_000.0
"""The epoch second the ``pending`` commands of a test run at (their clock is set to it):
a question's age is then what the test made it, however long the machine takes."""


def test_pending_lists_sessions_and_filters(tmp_path: Path) -> None:
    env = user_env(tmp_path)
    # A user's session paused two hours ago (on send_email), then two demo sessions, 20 s and
    # 10 s ago.
    old = start_user_session(tmp_path, "old-email", env, at=NOW - 7200)
    assert old["stop_reason"] == "interrupt"
    assert old["interrupts"][0]["raised_at"] == NOW - 7200
    first_id = run(tmp_path, "demo", "--json", env=env, at=NOW - 20).json()["session"]
    second_id = run(tmp_path, "demo", "--json", at=NOW - 10).json()["session"]
    demos = [first_id, second_id]

    everything = run(tmp_path, "pending", "--json", at=NOW).json()
    assert [e["session"] for e in everything] == ["old-email", *demos]  # oldest first
    for e in everything:
        assert set(e) == {*INTERRUPT_KEYS, "session", "raised_at", "age_seconds", "short_id"}
    assert everything[0]["age_seconds"] == 7200, everything[0]
    assert everything[0]["name"] == "confirm_send" and everything[0]["tool"] == "send_email"
    assert [e["age_seconds"] for e in everything[1:]] == [20, 10]
    for e in everything[1:]:
        assert e["name"] == "approve"
    assert everything[1]["raised_at"] <= everything[2]["raised_at"]

    filters = {
        ("--name", "approve"): demos,
        ("--name", "confirm_send"): ["old-email"],
        ("--name", "nope"): [],
        ("--tool", "delete_files"): demos,
        ("--tool", "send_email"): ["old-email"],
        ("--tool", "list_files"): [],
        ("--older-than", "30s"): ["old-email"],
        ("--older-than", "1h"): ["old-email"],
        ("--older-than", "1d"): [],
        ("--newer-than", "10m"): demos,
        ("--newer-than", "2h"): demos,
        ("--newer-than", "1d"): ["old-email", *demos],
        ("--name", "approve", "--tool", "delete_files", "--newer-than", "1h"): demos,
        ("--name", "approve", "--older-than", "1h"): [],
    }
    commands = [*(["pending", "--json", *f] for f in filters), ["pending"]]
    ran = [run(tmp_path, *command, at=NOW) for command in commands]
    ran.append(run(tmp_path, "pending", "--older-than", "soon"))
    for (flags, expected), got in zip(filters.items(), ran, strict=False):
        assert [e["session"] for e in got.json()] == expected, f"pending {flags}"

    table = ran[-2].ok().stdout
    for session in ["old-email", *demos]:
        assert session in table, table
    old_row = next(line for line in table.splitlines() if " old-email " in line)
    assert old_row.startswith(everything[0]["short_id"]), table
    assert "send_email" in old_row and "ana@example.com" in old_row and " 2h " in old_row
    bad = ran[-1]
    assert bad.returncode != 0 and bad.stdout == "", bad
    assert "duration" in bad.stderr and "Traceback" not in bad.stderr, bad


def test_errors_are_one_line_and_change_nothing(tmp_path: Path) -> None:
    started = demo_json(tmp_path)
    session, iid = started["session"], started["interrupts"][0]["id"]
    before = snapshot(tmp_path, session)

    cases = {  # command -> what its one-line error must name
        ("answer", "no-such-session", iid, "true"): "no-such-session",
        ("answer", session, "v1:no-such-interrupt", "true"): "v1:no-such-interrupt",
        ("answer", session, iid, "yes please"): "JSON",
        ("answer", session, iid, '{"approve": true'): "JSON",
        ("answer", session, iid, "true", "--store", UNREACHABLE): "127.0.0.1",
        ("pending", "--store", UNREACHABLE): "127.0.0.1",
        ("show", session, "--store", UNREACHABLE): "127.0.0.1",
        ("show", "no-such-session"): "no-such-session",
    }
    for ran, named in zip(run_many(tmp_path, *cases), cases.values(), strict=True):
        assert_one_line_error(ran, named)

    assert snapshot(tmp_path, session) == before
    assert before[0]["paused"] is True and len(before[1]) == 1


def test_demo_model_errors(tmp_path: Path) -> None:
    env = cli_env()
    env.pop("OPENAI_API_KEY", None)
    env.pop("OPENAI_BASE_URL", None)
    no_key, unknown = run_many(
        tmp_path,
        ["demo", "--model", "openai:gpt-4.1-mini"],
        ["demo", "--model", "nope:x"],
        env=env,
    )
    assert_one_line_error(no_key, "OPENAI_API_KEY")
    assert_one_line_error(unknown, "nope:x")
    assert run(tmp_path, "pending", "--json").json() == [], "a failed demo left a session"


def test_answer_with_a_user_agent_factory(tmp_path: Path) -> None:
    env = user_env(tmp_path)
    outbox = tmp_path / "outbox.jsonl"
    created = start_user_session(tmp_path, "team-email", env)
    [first] = created["interrupts"]
    assert first["name"] == "confirm_send"
    assert not outbox.exists(), "the email went out before anyone approved it"
    before = snapshot(tmp_path, "team-email", env=env)
    assert before[0]["paused"] is True

    # The session records agent "user", which the built-in demo app lacks: pass --app.
    no_app, no_module, no_attr, not_app, old_flag = run_many(
        tmp_path,
        ["answer", "team-email", first["id"], "true"],
        ["answer", "team-email", first["id"], "true", "--app", "no_such_module:app"],
        ["answer", "team-email", first["id"], "true", "--app", "user_agent:no_such_app"],
        ["answer", "team-email", first["id"], "true", "--app", "user_agent:build"],
        ["answer", "team-email", first["id"], "true", "--agent", "user_agent:build"],
        env=env,
    )
    assert_one_line_error(
        no_app, "team-email", "agent 'user'", "built-in demo app", "'demo'", "--app"
    )
    assert_one_line_error(no_module, "no_such_module")
    assert_one_line_error(no_attr, "no_such_app")
    assert_one_line_error(not_app, "user_agent:build", "not an interlude.App")
    assert_one_line_error(old_flag, "--agent takes an agent name", "--app")
    assert snapshot(tmp_path, "team-email", env=env) == before
    assert not outbox.exists()

    # With --app: Ana's email goes out, and the run pauses again before Bob's.
    approved = run(
        tmp_path,
        "answer",
        "team-email",
        first["id"],
        "true",
        "--app",
        "user_agent:app",
        "--json",
        env=env,
    ).json()
    assert set(approved) == RESULT_KEYS and approved["stop_reason"] == "interrupt"
    [second] = approved["interrupts"]
    assert set(second) == INTERRUPT_KEYS and second["id"] != first["id"]
    assert second["tool"] == "send_email" and second["input"]["to"] == "bob@example.com"
    sent = [json.loads(line) for line in outbox.read_text().splitlines()]
    assert [s["to"] for s in sent] == ["ana@example.com"]
    [entry] = run(tmp_path, "pending", "--json", env=env).json()
    assert (entry["session"], entry["id"]) == ("team-email", second["id"])

    finished = run(
        tmp_path,
        "answer",
        "team-email",
        second["id"],
        "true",
        "--app",
        "user_agent:app",
        "--json",
        env=env,
    ).json()
    assert finished["stop_reason"] == "end_turn" and finished["interrupts"] == []
    assert finished["reply"].startswith("Sent 2 emails"), finished
    sent = [json.loads(line) for line in outbox.read_text().splitlines()]
    assert [s["to"] for s in sent] == ["ana@example.com", "bob@example.com"]
    shown = run(tmp_path, "show", "team-email", "--json", env=env).json()
    assert shown["paused"] is False and shown["interrupts"] == []


def test_next_answer_command_printed_for_a_user_agent_works(tmp_path: Path) -> None:
    """After ``answer --app``, the follow-up command the output suggests (with that --app)
    must work too."""
    env = user_env(tmp_path)
    created = start_user_session(tmp_path, "team-email", env)
    answered = run(
        tmp_path,
        "answer",
        "team-email",
        created["interrupts"][0]["id"],
        "true",
        "--app",
        "user_agent:app",
        env=env,
    ).ok()
    assert "Paused" in answered.stdout and "bob@example.com" in answered.stdout, answered
    [told] = [c for c in printed_commands(answered.stdout) if c[0] == "answer"]
    assert told[1:3] == ["--app", "user_agent:app"], answered
    followed = run(tmp_path, *told, env=env)
    assert followed.returncode == 0, (
        f"the command the answer output suggested fails:\n{answered}\n{followed}"
    )
    assert "Sent 2 emails" in followed.stdout, followed


# --- runs that fail ---------------------------------------------------------------------------


@pytest.fixture
def model_server() -> Iterator[OpenAIServer]:
    """A loopback OpenAI-compatible server for ``demo --model openai:...``."""
    server = OpenAIServer().start()
    yield server
    server.stop()


def _model_env(server: OpenAIServer) -> dict[str, str]:
    return cli_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=server.base_url)


def _list_files() -> Any:
    return tool_reply(("call_list", "list_files", json.dumps({"directory": "/var/log/app"})))


def test_a_failed_demo_run_names_the_session_and_keeps_what_completed(
    tmp_path: Path, model_server: OpenAIServer
) -> None:
    env = _model_env(model_server)
    model = ["--model", "openai:gpt-4.1-mini"]
    # The first model turn lists the files; the second is refused by the server.
    model_server.add(_list_files(), error_reply(400, "the model refused the request"))
    failed = run(tmp_path, "demo", *model, "--session", "demo-failed", env=env)
    assert failed.returncode == 1 and "Traceback" not in failed.stderr, failed
    [line] = failed.stderr.strip().splitlines()
    for fragment in (
        "session 'demo-failed'",
        "the run failed",
        "ModelProviderError",
        "the model refused the request",
        "what completed is saved",
        "`interlude show demo-failed`",
    ):
        assert fragment in line, f"{fragment!r} not in the error\n{failed}"
    assert "session: demo-failed" in failed.stdout, failed

    # The command the error names works, and shows the step that completed.
    told = shlex.split(re.search(r"`(interlude show [^`]+)`", line).group(1))[1:]
    shown, shown_json = run_many(tmp_path, told, [*told, "--json"], env=env)
    assert "list_files" in shown.ok().stdout and "Not paused" in shown.stdout, shown
    data = shown_json.json()
    assert [m["role"] for m in data["messages"]] == ["user", "assistant", "user"]
    assert {b["tool_use_id"]: b["status"] for b in blocks(data, "tool_result")} == {
        "call_list": "success"
    }
    assert data["paused"] is False and data["running"] is None
    assert data["state"]["demo_model"] == "openai:gpt-4.1-mini"

    # With --json: the same line on stderr, and the error as JSON on stdout.
    model_server.add(error_reply(400, "refused again"))
    failed_json = run(tmp_path, "demo", *model, "--json", env=env)
    doc = assert_json_error(failed_json, ANY_SESSION, "the run failed", "refused again")
    session = doc["session"]
    assert session.startswith("demo-") and f"session '{session}'" in doc["error"]
    assert f"`interlude show {session}`" in doc["error"]
    again = run(tmp_path, "show", session, "--json", env=env).json()
    assert [m["role"] for m in again["messages"]] == ["user"]


def test_a_failed_answer_names_the_session(tmp_path: Path, model_server: OpenAIServer) -> None:
    env = _model_env(model_server)
    store = ["--store", f"file:///{tmp_path / 'sessions'}"]
    delete = json.dumps({"paths": PATHS})
    paused = []
    for _ in range(2):
        model_server.add(_list_files(), tool_reply(("call_delete", "delete_files", delete)))
        started = run(
            tmp_path, "demo", "--model", "openai:gpt-4.1-mini", "--json", *store, env=env
        ).json()
        assert started["stop_reason"] == "interrupt", started
        paused.append((started["session"], started["interrupts"][0]["id"]))
    (first, first_iid), (second, second_iid) = paused

    model_server.add(error_reply(400, "no more today"))
    plain = run(tmp_path, "answer", first, first_iid, "true", *store, env=env)
    assert_one_line_error(plain, f"session '{first}'", "the run failed", "no more today")
    assert f"`interlude show --store '{store[1]}' {first}`" in plain.stderr, plain
    model_server.add(error_reply(400, "still no"))
    as_json = run(tmp_path, "answer", second, second_iid, "true", "--json", *store, env=env)
    doc = assert_json_error(as_json, second, "the run failed", "still no")
    assert f"session '{second}'" in doc["error"]

    # The approved tool ran before the model failed: that step is in the session.
    shown = run(tmp_path, "show", first, "--json", *store, env=env).json()
    results = {b["tool_use_id"]: b["status"] for b in blocks(shown, "tool_result")}
    assert results == {"call_list": "success", "call_delete": "success"}
    assert shown["paused"] is False
    again = run(tmp_path, "answer", second, second_iid, "true", "--json", *store, env=env)
    refused = assert_json_error(again, second, "answered already", "the first answer wins")
    assert refused["code"] == "already_answered"


def test_a_failing_agent_factory_is_a_one_line_error(tmp_path: Path) -> None:
    started = demo_json(tmp_path)
    session, iid = started["session"], started["interrupts"][0]["id"]
    before = snapshot(tmp_path, session)
    (tmp_path / "broken_app.py").write_text(  # in the working directory: importable by --app
        "from interlude import App\n"
        "app = App()\n"
        "@app.agent('demo')\n"
        "def build(session):\n"
        "    raise RuntimeError('no model configured')\n"
    )
    (tmp_path / "empty_app.py").write_text("from interlude import App\napp = App()\n")
    plain, as_json, empty, from_env = run_many(
        tmp_path,
        ["answer", session, iid, "true", "--app", "broken_app:app"],
        ["answer", session, iid, "true", "--app", "broken_app:app", "--json"],
        ["answer", session, iid, "true", "--app", "empty_app:app"],
        ["answer", session, iid, "true"],
        env=cli_env(INTERLUDE_APP="broken_app:app"),
    )
    failed = "the factory of agent 'demo' in --app broken_app:app failed: RuntimeError"
    assert_one_line_error(plain, failed, "no model configured")
    assert plain.returncode == 1, plain
    assert_json_error(as_json, session, failed)
    assert_one_line_error(empty, session, "agent 'demo'", "--app empty_app:app does not have")
    assert_one_line_error(from_env, failed)  # $INTERLUDE_APP is --app's default
    assert snapshot(tmp_path, session) == before


def test_every_error_in_json_mode_is_json_on_stdout(tmp_path: Path) -> None:
    (tmp_path / ".interlude").mkdir()
    sqlite3.connect(tmp_path / ".interlude" / "demo.db").close()  # an (empty) store exists
    missing, bad_answer, bad_flag = run_many(
        tmp_path,
        ["show", "no-such-session", "--json"],
        ["answer", "no-such-session", "v1:x", "yes please", "--json"],
        ["pending", "--json", "--older-than", "soon"],
    )
    assert_json_error(missing, None, "no-such-session")
    assert_json_error(bad_answer, None, "JSON")
    assert bad_flag.returncode == 2 and "usage:" in bad_flag.stderr, bad_flag
    assert json.loads(bad_flag.stdout) == {"error": ANY_ERROR, "session": None}
    assert "duration" in json.loads(bad_flag.stdout)["error"]


class _Any:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, str)


ANY_SESSION: Any = _Any()
ANY_ERROR: Any = _Any()


def test_a_run_killed_mid_tool_is_shown_and_recovered(tmp_path: Path) -> None:
    env = user_env(tmp_path)
    first = start_user_session(tmp_path, "crash", env)["interrupts"][0]
    dying = {**env, "USER_AGENT_DIE_AFTER_SENDING": "1"}
    answer = [*CLI, "answer", "crash", first["id"], "true", "--app", "user_agent:app"]
    [killed] = run_processes(tmp_path, answer, env=dying)  # a process: it dies
    assert killed.returncode == -9, str(killed)

    shown = run(tmp_path, "show", "crash", "--json", env=env).json()
    assert shown["stopped"] and not shown["paused"] and shown["running"] is None
    [listed] = run(tmp_path, "sessions", "--json", env=env).json()
    assert (listed["session"], listed["state"], listed["questions"]) == ("crash", "stopped", 0)
    # The recover command show suggests names the --app that has the session's agent.
    told = run(tmp_path, "show", "crash", "--app", "user_agent:app", env=env).ok().stdout
    assert "  interlude recover --app user_agent:app crash" in told.splitlines(), told
    without = run(tmp_path, "show", "crash", env=env).ok().stdout
    assert "interlude recover" not in without and "add --app MODULE:ATTR" in without, without
    refused = run(
        tmp_path, "answer", "crash", first["id"], "true", "--app", "user_agent:app", env=env
    )
    assert_one_line_error(refused, "stopped", "interlude recover --app user_agent:app crash")

    recovered = run(
        tmp_path, "recover", "crash", "--app", "user_agent:app", "--json", env=env
    ).json()
    [doubt] = recovered["interrupts"]
    assert doubt["name"] == "in_doubt" and doubt["input"]["to"] == "ana@example.com"
    # The answer show suggests for it is one it takes ("fail", not true), and works as printed
    # (in a copy of this folder: the answer below is the one this session gets).
    told = run(tmp_path, "show", "crash", "--app", "user_agent:app", env=env).ok().stdout
    [suggested] = [c for c in printed_commands(told) if c[0] == "answer"]
    assert suggested[-2:] == [doubt["id"], '"fail"'], told
    copy = tmp_path.parent / f"{tmp_path.name}-copy"
    shutil.copytree(tmp_path, copy)
    failed = run(copy, *suggested, env=env).ok().stdout
    assert "<- error: the tool call was interrupted" in failed, failed
    given = json.dumps({"result": "sent to ana@example.com"})
    next_q = run(
        tmp_path,
        "answer",
        "crash",
        doubt["id"],
        given,
        "--app",
        "user_agent:app",
        "--json",
        env=env,
    ).json()
    assert [i["name"] for i in next_q["interrupts"]] == ["confirm_send"]  # Bob's email
    assert next_q["interrupts"][0]["input"]["to"] == "bob@example.com"
    outbox = (tmp_path / "outbox.jsonl").read_text().splitlines()
    assert [json.loads(line)["to"] for line in outbox] == ["ana@example.com"]  # sent once
    again = run(tmp_path, "recover", "crash", "--app", "user_agent:app", env=env)
    assert_one_line_error(again, "no stopped run", "paused")


# --- store URLs, missing stores and global options --------------------------------------------


def test_file_urls_are_absolute_and_global_options_go_before_the_command(tmp_path: Path) -> None:
    target = tmp_path / "abs" / "sessions"
    url = f"file://{target}"  # RFC 8089: file:///tmp/... is the absolute path /tmp/...
    started = run(tmp_path, "--store", url, "--json", "demo").json()
    assert target.is_dir(), "the file: URL was not taken as an absolute path"
    assert sorted(os.listdir(tmp_path)) == ["abs"], "the file: URL made a relative folder"
    before_cmd, after_cmd, localhost = run_many(
        tmp_path,
        ["--store", url, "--json", "pending"],
        ["pending", "--store", url, "--json"],
        ["--json", "pending", "--store", f"file://localhost{target}"],
    )
    lists = [r.json() for r in (before_cmd, after_cmd, localhost)]
    for entries in lists:
        for e in entries:
            e.pop("age_seconds")
    assert lists[0] == lists[1] == lists[2]
    [entry] = lists[0]
    assert entry["session"] == started["session"]
    helped = run(tmp_path, "--help").ok().stdout + run(tmp_path, "pending", "--help").ok().stdout
    flat = " ".join(helped.split())
    for fragment in ("three slashes: relative", "four slashes: absolute", "RFC 8089"):
        assert flat.count(fragment) == 1, helped  # explained by `interlude --help` only
    assert "--store URL" in run(tmp_path, "pending", "--help").ok().stdout  # and named there


def test_read_only_commands_never_create_a_store(tmp_path: Path) -> None:
    missing = str(tmp_path / "nonexistent" / "dir" / "x.db")
    commands = [
        ["pending"],
        ["show", "s"],
        ["answer", "s", "i", "true"],
        ["recover", "s"],
        ["sessions"],
        ["discard", "s"],
        ["delete", "s"],
    ]
    stores = {
        missing: "no store at",
        f"sqlite:///{missing}": "no store at",
        f"file://{tmp_path / 'nope'}": "no store at",
        "sqlite:/x.db": "malformed store URL",
        "sqlite:x.db": "malformed store URL",
        "file://elsewhere/x": "host 'elsewhere'",
    }
    cases = [(c, url, fragment) for c in commands for url, fragment in stores.items()]
    cases += [(c, None, "interlude demo") for c in commands]  # the default store, not made yet
    ran = run_many(tmp_path, *([*c, "--store", u] if u else c for c, u, _ in cases))
    for (_, _, fragment), got in zip(cases, ran, strict=True):
        assert_one_line_error(got, fragment)
        assert got.returncode == 1, got
    assert os.listdir(tmp_path) == [], "a read-only command created something"


def test_pending_rows_are_narrow_and_answer_takes_the_short_id(tmp_path: Path) -> None:
    env = user_env(tmp_path)
    long_session = "a-session-with-a-rather-long-name-for-the-table"
    first = start_user_session(tmp_path, long_session, env)["interrupts"][0]
    table, listed = run_many(tmp_path, ["pending"], ["pending", "--json"], env=env)
    [entry] = listed.json()
    assert entry["id"] == first["id"] and entry["input"]["to"] == "ana@example.com"
    rows = [line for line in table.ok().stdout.splitlines() if line]
    assert all(len(line) <= 120 for line in rows), table
    [row] = [line for line in rows if long_session in line]
    short = row.split()[0]
    assert short == entry["short_id"] and len(short) <= 12 and short in entry["short_id"]
    answered = run(
        tmp_path,
        "answer",
        long_session,
        short,
        "true",
        "--app",
        "user_agent:app",
        "--json",
        env=env,
    ).json()
    assert answered["interrupts"][0]["input"]["to"] == "bob@example.com"
    wrong = run(
        tmp_path, "answer", long_session, "0000000", "true", "--app", "user_agent:app", env=env
    )
    assert_one_line_error(wrong, "0000000", "pending:")


# --- sessions, discard, delete ---------------------------------------------------------------


def _claim(tmp_path: Path, session: str, owner: str) -> None:
    """Store a live run claim on ``session``, as another machine's running process would."""
    import asyncio
    import time

    from interlude.sessions import SessionUpdate, SQLiteStore

    store = SQLiteStore(tmp_path / ".interlude" / "demo.db")
    stored = asyncio.run(store.load(session))
    assert stored is not None
    now = time.time()
    update = SessionUpdate(
        expected_version=stored.version,
        first_index=len(stored.messages),
        new_messages=[],
        pause=stored.pause,
        pending=None,
        tools=stored.tools,
        format_version=stored.format_version,
        claim={"owner": owner, "since": now - 30, "expires_at": now + 570, "machine": "m-2"},
    )
    asyncio.run(store.save(session, update))


def test_sessions_discard_and_delete(tmp_path: Path) -> None:
    paused, to_discard, busy = (
        demo_json(tmp_path)["session"],
        demo_json(tmp_path)["session"],
        demo_json(tmp_path)["session"],
    )
    _claim(tmp_path, busy, "worker-7")
    listed, table, shown, shown_json = run_many(
        tmp_path, ["sessions", "--json"], ["sessions"], ["show", busy], ["show", busy, "--json"]
    )
    states = {r["session"]: r for r in listed.json()}
    assert set(states) == {paused, to_discard, busy}
    assert states[paused] == {
        "session": paused,
        "state": "paused",
        "questions": 1,
        "messages": 4,
        "version": states[paused]["version"],
    }
    assert states[busy]["state"] == "running"
    assert re.search(rf"^{paused}\s+paused: 1 question\s+4$", table.ok().stdout, re.M), table
    assert re.search(rf"^{busy}\s+running\s+4$", table.stdout, re.M), table
    # show: the run in progress in words, not a dict
    words = shown.ok().stdout
    assert "held by worker-7" in words and "ago" in words and "runs out" in words, shown
    assert "{" not in words.split("A run is in progress")[1], shown
    assert shown_json.json()["running"]["owner"] == "worker-7"

    # discard drops the pause: the tool call is cancelled, nothing is pending for it
    discarded = run(tmp_path, "discard", to_discard, "--json").json()
    assert discarded["session"] == to_discard and discarded["discarded"] == "pause"
    after = run(tmp_path, "show", to_discard, "--json").json()
    assert after["paused"] is False and after["stopped"] is False
    assert {b["tool_use_id"]: b["status"] for b in blocks(after, "tool_result")} == {
        "call_list": "success",
        "call_delete": "error",
    }
    assert "deleted 3 file(s)" not in all_text(after)
    assert [e["session"] for e in run(tmp_path, "pending", "--json").json()] == [paused, busy]
    again = run(tmp_path, "discard", to_discard)
    assert_one_line_error(again, "no pause")

    # delete: gone without a question; a session a live run holds is refused
    refused_delete, refused_discard, refused_answer, deleted = run_many(
        tmp_path,
        ["delete", busy],
        ["discard", busy],
        ["answer", busy, "x", "true"],
        ["delete", to_discard],
    )
    for refused in (refused_delete, refused_discard, refused_answer):
        assert_one_line_error(refused, busy, "another process", "held by worker-7")
    assert "deleted" in deleted.ok().stdout
    left = {r["session"]: r["state"] for r in run(tmp_path, "sessions", "--json").json()}
    assert left == {paused: "paused", busy: "running"}
    assert_one_line_error(run(tmp_path, "delete", to_discard), "no session")
    assert_one_line_error(run(tmp_path, "show", to_discard), "no session")


def test_the_loser_of_a_race_is_told_nothing_ran_here() -> None:
    """A SessionConflictError from the run (the other process claimed the session first)."""
    from types import SimpleNamespace

    from interlude.cli._main import CliError, _run
    from interlude.cli._render import Output
    from interlude.errors import SessionConflictError

    def lose() -> Any:
        raise SessionConflictError("session 's' is at version 7, not 6: another agent saved it")

    agent: Any = SimpleNamespace(_session=SimpleNamespace(lost=None))
    with pytest.raises(CliError) as raised:
        _run(Output(json_mode=True), lose, "s", "sqlite:///x.db", agent)
    message = str(raised.value)
    assert "another process answered/ran this session first; nothing was run here" in message
    assert "the store failed" not in message
    taken: Any = SimpleNamespace(_session=SimpleNamespace(lost=SessionConflictError("taken")))
    with pytest.raises(CliError) as raised:
        _run(Output(json_mode=True), lose, "s", "sqlite:///x.db", taken)
    assert "nothing was run here" not in str(raised.value)


def test_concurrent_answers_one_wins_and_the_other_says_so(tmp_path: Path) -> None:
    env = user_env(tmp_path)
    iid = start_user_session(tmp_path, "race", env)["interrupts"][0]["id"]
    answer = [*CLI, "answer", "race", iid, "true", "--app", "user_agent:app"]
    ran = run_processes(tmp_path, answer, answer, answer, env=env)  # three processes race
    won = [r for r in ran if r.returncode == 0]
    assert len(won) == 1, "\n".join(map(str, ran))
    for lost in (r for r in ran if r.returncode != 0):
        assert_one_line_error(lost, "race")
        assert "the store failed" not in lost.stderr, lost
    outbox = (tmp_path / "outbox.jsonl").read_text().splitlines()
    assert [json.loads(line)["to"] for line in outbox] == ["ana@example.com"]  # sent once


# --- the code that runs is the operator's, never the store's ----------------------------------


EVIL_MODULE = """
import pathlib
pathlib.Path(__file__).with_name("MARKER").write_text("imported")

def build(*args, **kwargs):
    pathlib.Path(__file__).with_name("MARKER").write_text("called")
"""


def _write_session(db: Path, session: str, *, state: dict[str, Any], agent: str | None) -> str:
    """A session paused on Ana's email whose stored state and agent name are ``state`` and
    ``agent`` (None: none, as an older version saved it). Returns the question's id."""
    from interlude import Agent
    from interlude.hooks import BeforeToolCallEvent
    from interlude.sessions import SQLiteStore
    from interlude.testing import FunctionModel

    from . import user_agent

    with SQLiteStore(db) as store:
        made = Agent(
            FunctionModel(user_agent._reply),
            tools=[user_agent.send_email],
            state=state,
            session=store,
            session_id=session,
            name=agent,
        )
        made.hooks.add_callback(BeforeToolCallEvent, user_agent._confirm_emails)
        [question] = made(user_agent.PROMPT).interrupts
    return question.id


def test_stored_data_never_names_the_code_that_runs(tmp_path: Path) -> None:
    """A session whose stored state names a factory module (the pre-App mechanism), with that
    module planted in the working directory: no command imports it, and the ones that would
    run the session's agent refuse in one line."""
    db = tmp_path / "sessions.db"
    iid = _write_session(
        db, "planted", state={"interlude.factory": "evil_module:build"}, agent=None
    )
    (tmp_path / "evil_module.py").write_text(EVIL_MODULE)
    store = ["--store", f"sqlite:///{db}"]
    answer, as_json, recover, discard, shown, pending = run_many(
        tmp_path,
        ["answer", "planted", iid, "true", *store],
        ["answer", "planted", iid, "true", "--json", *store],
        ["recover", "planted", *store],
        ["discard", "planted", *store],
        ["show", "planted", *store],
        ["pending", *store],
    )
    for refused in (answer, recover, discard):
        assert refused.returncode == 1, refused
        assert_one_line_error(refused, "'planted'", "records no agent name", "older version")
        assert_one_line_error(refused, "--app", "--agent NAME")
    assert_json_error(as_json, "planted", "records no agent name")
    assert "(no agent name, " in shown.ok().stdout, shown  # read-only commands still read it
    assert "planted" in pending.ok().stdout, pending
    assert not (tmp_path / "MARKER").exists(), "a module named in stored data was imported"
    assert run(tmp_path, "show", "planted", "--json", *store).json()["agent"] is None

    # The operator's app may adopt the session (--agent NAME): then its own code runs.
    adopted = run(
        tmp_path,
        "answer",
        "planted",
        iid,
        "true",
        "--app",
        "user_agent:app",
        "--agent",
        "user",
        "--json",
        *store,
        env=user_env(tmp_path),
    ).json()
    assert adopted["interrupts"][0]["input"]["to"] == "bob@example.com"
    assert run(tmp_path, "show", "planted", "--json", *store).json()["agent"] == "user"
    assert not (tmp_path / "MARKER").exists()


def test_an_agent_name_the_app_lacks_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    iid = _write_session(db, "named-evil", state={}, agent="evil")
    (tmp_path / "evil.py").write_text(EVIL_MODULE)
    store = ["--store", f"sqlite:///{db}"]
    app = ["--app", "user_agent:app"]
    answer, recover, with_app, mismatch = run_many(
        tmp_path,
        ["answer", "named-evil", iid, "true", *store],
        ["recover", "named-evil", *store],
        ["answer", "named-evil", iid, "true", *app, *store],
        ["answer", "named-evil", iid, "true", *app, "--agent", "user", *store],
        env=user_env(tmp_path),
    )
    for refused in (answer, recover):
        assert refused.returncode == 1, refused
        assert_one_line_error(
            refused, "'named-evil'", "agent 'evil'", "built-in demo app", "'demo'", "--app"
        )
    assert_one_line_error(with_app, "agent 'evil'", "--app user_agent:app", "'user'")
    assert_one_line_error(mismatch, "records agent 'evil', not --agent 'user'")
    assert not (tmp_path / "MARKER").exists(), "a module named in stored data was imported"


AUDIT_LINE = re.compile(
    r"^  \d{4}-\d\d-\d\d \d\d:\d\d:\d\d  ana answered approve: true  \(shown (\S+)\)$", re.M
)


def test_answers_are_audited_with_who_gave_them(tmp_path: Path) -> None:
    import getpass

    first = demo_json(tmp_path)
    second = demo_json(tmp_path)
    by_flag, by_default = run_many(
        tmp_path,
        ["answer", first["session"], first["interrupts"][0]["id"], "true", "--by", "ana"],
        ["answer", second["session"], second["interrupts"][0]["id"], "false"],
    )
    by_flag.ok()
    by_default.ok()
    shown, shown_json, other = run_many(
        tmp_path,
        ["show", first["session"]],
        ["show", first["session"], "--json"],
        ["show", second["session"], "--json"],
    )
    data = shown_json.json()
    assert data["agent"] == "demo"
    [entry] = data["audit"]
    assert entry["by"] == "ana" and entry["answer"] is True and entry["name"] == "approve"
    assert entry["interrupt_id"] == first["interrupts"][0]["id"] and not entry["expired"]
    text = shown.ok().stdout
    assert "(agent demo, version" in text, shown
    line = AUDIT_LINE.search(text)
    assert line and entry["shown"].startswith(line.group(1)), shown
    [declined] = other.json()["audit"]
    assert declined["by"] == getpass.getuser() and declined["answer"] is False


def test_cli_errors_are_in_the_error_tree() -> None:
    from interlude.cli._main import CliError
    from interlude.errors import InterludeError

    assert issubclass(CliError, InterludeError)


DEADLINE_APP = '''
from interlude import Agent, AgentSession, App, ToolResult, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.testing import FunctionModel

app = App()


@tool
def pay(to: str, cents: int) -> str:
    """Pay someone.

    Args:
        to: Who.
        cents: How much.
    """
    with open("paid.txt", "a") as f:
        f.write(f"{to} {cents}\\n")
    return "paid"


def reply(request):
    if any(isinstance(b, ToolResult) for b in request.messages[-1].content):
        return "finished"
    return [ToolUse("p1", "pay", {"to": "ana", "cents": 10})]


def ask(event: BeforeToolCallEvent) -> None:
    if event.interrupt("approve", "pay?", expires_in=EXPIRES, default=False) is not True:
        event.cancel("not approved")


@app.agent("payer")
def build(session: AgentSession) -> Agent:
    agent = Agent(FunctionModel(reply), tools=[pay], session=session.store, session_id=session.id)
    agent.hooks.add_callback(BeforeToolCallEvent, ask)
    return agent
'''


def _deadline_session(tmp_path: Path, expires: float) -> dict[str, str]:
    (tmp_path / "deadline_app.py").write_text(DEADLINE_APP.replace("EXPIRES", repr(expires)))
    (tmp_path / ".interlude").mkdir()
    env = cli_env(INTERLUDE_APP="deadline_app:app")
    with as_a_process(tmp_path, env):  # the operator's own program starts the session
        app = runpy.run_path("deadline_app.py")["app"]
        opened = app.start("payer", "s1", "sqlite:///.interlude/demo.db")
        try:
            assert opened("pay ana").stop_reason == "interrupt"
        finally:
            opened.close()
    return env


def test_a_changed_pending_index_cannot_make_a_person_approve_a_decoy(tmp_path: Path) -> None:
    """The pending index is not what an answer applies to: `answer` says which question it
    answers from the session's pause, and `--shown` refuses when that is not what was seen."""
    import sqlite3

    env = _deadline_session(tmp_path, 3600)
    db = tmp_path / ".interlude" / "demo.db"
    with sqlite3.connect(db) as conn:  # someone who can write the store edits the index only
        (data,) = conn.execute("SELECT data FROM pending").fetchone()
        decoy = json.loads(data)
        decoy["tool_use"]["input"]["cents"] = 1
        conn.execute("UPDATE pending SET data = ?", (json.dumps(decoy),))
    (listed,) = json.loads(run(tmp_path, "pending", "--json", env=env).ok().stdout)
    assert listed["input"] == {"to": "ana", "cents": 1}  # the index shows the decoy
    refused = run(
        tmp_path, "answer", "s1", listed["id"], "true", "--shown", listed["shown"], env=env
    )
    assert_one_line_error(refused, "is not the one that was shown", "nothing was answered")
    assert 'pay {"to": "ana", "cents": 10}' in refused.stdout  # it said what was pending
    assert not (tmp_path / "paid.txt").exists()
    shown = json.loads(run(tmp_path, "show", "s1", "--json", env=env).ok().stdout)
    (real,) = shown["interrupts"]
    run(tmp_path, "answer", "s1", real["id"], "true", "--shown", real["shown"], env=env).ok()
    assert (tmp_path / "paid.txt").read_text() == "ana 10\n"


def test_an_expired_question_is_refused_then_settled_by_expire(tmp_path: Path) -> None:
    env = _deadline_session(tmp_path, 0)  # the deadline is when it is asked: already passed
    table = run(tmp_path, "pending", env=env).ok().stdout
    assert "[expired " in table and "settle with expire]" in table
    (listed,) = json.loads(run(tmp_path, "pending", "--json", env=env).ok().stdout)
    late = run(tmp_path, "answer", "s1", listed["id"], "true", env=env)
    assert_one_line_error(late, "expired", "refused")
    done = run(tmp_path, "expire", "s1", env=env).ok().stdout
    assert "The run ended (end_turn)" in done
    assert not (tmp_path / "paid.txt").exists()  # the default (False) declined it
    audit = json.loads(run(tmp_path, "show", "s1", "--json", env=env).ok().stdout)["audit"]
    assert [(e["by"], e["answer"], e["expired"]) for e in audit] == [("expiry", False, True)]


def test_show_prints_a_reply_holding_a_lone_surrogate(tmp_path: Path) -> None:
    """A model's reply can hold a lone surrogate ("\\ud800" in its JSON): show escapes it."""
    from interlude import Agent, ToolUse
    from interlude.sessions import SQLiteStore
    from interlude.testing import ScriptedModel

    db = tmp_path / "s.db"
    with SQLiteStore(db) as store:
        Agent(ScriptedModel(["plain \ud800 text"]), session=store, session_id="s1")("Hi")
        turns = [[ToolUse("f1", "final_result", {"result": "x\udfff"})]]
        model = ScriptedModel(turns, native_output=False)
        Agent(model, session=store, session_id="s2")("Hi", output_type=str)
    url = f"sqlite:///{db}"
    shown = run(tmp_path, "show", "--store", url, "s1").ok()
    assert "plain \\ud800 text" in shown.stdout
    data = run(tmp_path, "show", "--store", url, "--json", "s1").json()
    assert data["messages"][-1]["content"][0]["text"] == "plain \ud800 text"
    assert "x\\udfff" in run(tmp_path, "show", "--store", url, "s2").ok().stdout


def test_a_signed_agent_of_an_app_without_a_name_is_answered_from_the_cli(
    tmp_path: Path,
) -> None:
    """The factory gives no name=: the app's name for the agent is what the pause is signed
    and checked with, in the process that started the run and in the CLI that answers it."""
    env = {**user_env(tmp_path), "USER_AGENT_SIGNING_KEY": "k" * 32}
    outbox = tmp_path / "outbox.jsonl"
    created = start_user_session(tmp_path, "signed", env)
    [first] = created["interrupts"]
    answered = run(
        tmp_path, "answer", "signed", first["id"], "true", "--app", "user_agent:app", env=env
    )
    assert answered.returncode == 0, str(answered)
    assert [json.loads(line)["to"] for line in outbox.read_text().splitlines()] == [
        "ana@example.com"
    ]
    shown = run(tmp_path, "show", "signed", "--json", env=env)
    assert shown.returncode == 0, str(shown)


def test_an_answer_with_a_duplicate_key_is_refused(tmp_path: Path) -> None:
    ran = run(tmp_path, "answer", "any", "v1:x", '{"approve": false, "approve": true}')
    assert_one_line_error(ran, "'approve' appears twice")


def test_show_checks_the_audit_chain_and_delete_keeps_a_trail_unless_told(
    tmp_path: Path,
) -> None:
    first = demo_json(tmp_path)
    run(tmp_path, "answer", first["session"], first["interrupts"][0]["id"], "true").ok()
    shown = run(tmp_path, "show", first["session"], "--json").json()
    [entry] = shown["audit"]
    assert entry["chain"].startswith("sha256:") and shown["audit_chain"] == "verified"
    db = tmp_path / ".interlude" / "demo.db"
    with sqlite3.connect(db) as conn:  # a store writer changes who answered
        (data,) = conn.execute("SELECT entry FROM audit").fetchone()
        conn.execute(
            "UPDATE audit SET entry = ?", (data.replace('"by":', '"by": "mallory", "x":'),)
        )
    tampered = run(tmp_path, "show", first["session"])
    assert "chain: broken at entry 1" in tampered.ok().stdout, str(tampered)

    refused = run(tmp_path, "delete", first["session"])
    assert_one_line_error(refused, "audit trail", "--with-audit")
    assert run(tmp_path, "show", first["session"], "--json").json()["audit"]
    run(tmp_path, "delete", first["session"], "--with-audit").ok()
    assert run(tmp_path, "show", first["session"]).returncode != 0


def test_run_starts_a_session_of_your_own_agent_and_carries_it_on(tmp_path: Path) -> None:
    env = user_env(tmp_path)
    app = ["--app", "user_agent:app"]
    started = run(tmp_path, "run", "user", "mine", "Tell Ana and Bob.", *app, "--json", env=env)
    [first] = started.json()["interrupts"]
    again = run(tmp_path, "run", "user", "mine", "And Carl?", *app, env=env)
    assert_one_line_error(again, "mine", "waits on questions")
    run(tmp_path, "answer", "mine", first["id"], "true", *app, env=env).ok()
    shown = run(tmp_path, "show", "mine", "--json", env=env).json()
    [second] = shown["interrupts"]
    run(tmp_path, "answer", "mine", second["id"], "true", *app, env=env).ok()
    more = run(tmp_path, "run", "user", "mine", "Anything else?", *app, "--json", env=env).json()
    assert more["stop_reason"] == "end_turn"
    unknown = run(tmp_path, "run", "nobody", "x", "hi", *app, env=env)
    assert_one_line_error(unknown, "no agent 'nobody'", "--app")


def test_a_command_s_help_shows_its_own_options_and_an_example(tmp_path: Path) -> None:
    helped = run(tmp_path, "answer", "--help").ok().stdout
    assert "--by NAME" in helped and "example:\n  interlude answer" in helped
    assert "--store STORE" not in helped  # the global options are named once, not explained
    assert "--store URL, --app MODULE:ATTR" in helped


def test_demo_says_it_ignores_an_app_and_suggests_commands_that_work(tmp_path: Path) -> None:
    env = user_env(tmp_path)
    ran = run(tmp_path, "demo", "--app", "user_agent:app", env=env).ok()
    assert "ignores --app user_agent:app" in ran.stderr
    assert "--app" not in ran.stdout  # its suggested answer command runs the demo's agent
    missing = run(tmp_path, "pending", "--store", "sqlite:///elsewhere.db")
    assert_one_line_error(missing, "check --store")
