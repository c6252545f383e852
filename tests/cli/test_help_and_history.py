"""What ``interlude --help`` says about ``--app``, ``--temporal`` and ``--dbos`` is what the
commands do; every command names its arguments the same way; ``history`` sums up a tool's JSON
result (issue 35). Run in this process, through ``interlude.cli.main``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from interlude import Agent, ToolUse, tool
from interlude.cli import main
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel

BAD_APP = "no_such_module_here:app"
DBOS_URL = "postgresql://postgres@127.0.0.1:1/none"


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as done:
        main([*argv, "--help"])
    assert done.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse's line wrapping undone


def _names(text: str) -> list[str]:
    return re.split(r", | and ", text)


def _commands(capsys: pytest.CaptureFixture[str]) -> list[str]:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    return re.findall(r"^    ([a-z-]+)\s", out, re.MULTILINE)


@pytest.fixture
def demo_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A store holding demo session ``s``, paused on its question; its URL and the question."""
    for name in (
        "INTERLUDE_APP",
        "INTERLUDE_TEMPORAL",
        "INTERLUDE_DBOS",
        "INTERLUDE_STORE",
        "INTERLUDE_TOKENS",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["--store", url, "--json", "demo", "--session", "s"]) == 0
    return url, "v1:before_tool_call:call_delete:5cf56bed-067e-5438-a1ef-dbfa3405e45d"


def _argv(command: str, question: str) -> list[str]:
    """A command line of ``command`` that gets as far as what ``--app`` is for."""
    return {
        "run": ["run", "demo", "s2", "hi"],
        "answer": ["answer", "s", question, "true"],
        "expire": ["expire", "s"],
        "recover": ["recover", "s"],
        "fork": ["fork", "s", "--at", "m0"],
        "undo": ["undo", "s", "--to", "m0"],
        "move": ["move", "s", "--to", "sqlite:///moved.db"],
        "discard": ["discard", "s"],
        "serve": ["serve", "--port", "1"],
        "mcp-serve": ["mcp-serve"],
        "worker": ["worker", "--once"],
        "temporal-worker": ["--temporal", "127.0.0.1:1", "temporal-worker"],
        "dbos-worker": ["--dbos", DBOS_URL, "dbos-worker"],
        "pending": ["pending"],
        "show": ["show", "s"],
        "history": ["history", "s"],
        "demo": ["demo"],
        "sessions": ["sessions"],
        "delete": ["delete", "no-such-session"],
        "policy": ["policy", "check", "no-such-policy.toml"],
    }[command]


def test_the_app_help_names_every_command_that_honours_it(
    demo_store: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, question = demo_store
    everything = _commands(capsys)
    said = _help(capsys)
    found = re.search(r"run sessions: (.+?) build agents with it; (.+?) name it in the", said)
    assert found, said
    builds, names = _names(found.group(1)), _names(found.group(2))
    ignores = [c for c in everything if c not in builds + names]
    assert set(builds + names) <= set(everything) and ignores == ["demo", "sessions", "delete"]

    for command in builds + names:  # each imports the --app: a bad one is reported
        code = main(["--store", url, *_argv(command, question), "--app", BAD_APP])
        err = capsys.readouterr().err
        assert code == 1 and "no_such_module_here" in err, f"{command}: {err}"
    for command in ignores:  # each says it ignores it, and runs as without it
        main(["--store", url, *_argv(command, question), "--app", BAD_APP])
        err = capsys.readouterr().err
        assert f"ignores --app {BAD_APP}" in err and "cannot import" not in err, f"{command}: {err}"


def test_the_temporal_help_names_every_command_that_takes_it(
    demo_store: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, question = demo_store
    everything = _commands(capsys)
    said = _help(capsys)
    found = re.search(r"Temporal server: (.+?) then work on agent workflows", said)
    assert found, said
    taking = _names(found.group(1))
    assert taking == [
        "demo",
        "pending",
        "answer",
        "show",
        "undo",
        "recover",
        "serve",
        "temporal-worker",
        "move",
    ]
    for command in everything:
        if command in taking:
            continue
        argv = [a for a in _argv(command, question) if a not in ("--temporal", "127.0.0.1:1")]
        argv = [a for a in argv if a not in ("--dbos", DBOS_URL)]
        assert main(["--store", url, "--temporal", "127.0.0.1:9", *argv]) == 1
        err = capsys.readouterr().err
        where = "DBOS (--dbos)" if command == "dbos-worker" else "a session store"
        assert f"--temporal works with {found.group(1)}; {command} works on {where}" in err


def test_the_dbos_help_names_every_command_that_takes_it(
    demo_store: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, question = demo_store
    everything = _commands(capsys)
    said = _help(capsys)
    found = re.search(r"DBOS system database: (.+?) then work on the agent runs", said)
    assert found, said
    taking = _names(found.group(1))
    assert taking == ["demo", "run", "pending", "answer", "show", "serve", "dbos-worker", "move"]
    for command in everything:
        if command in taking:
            continue
        argv = [a for a in _argv(command, question) if a not in ("--temporal", "127.0.0.1:1")]
        assert main(["--store", url, "--dbos", DBOS_URL, *argv]) == 1
        err = capsys.readouterr().err
        where = "Temporal (--temporal)" if command == "temporal-worker" else "a session store"
        assert f"--dbos works with {found.group(1)}; {command} works on {where}" in err


def test_the_cli_page_describes_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z-]+)[ `]", page, re.MULTILINE)
    assert rows == _commands(capsys)


def _positionals(capsys: pytest.CaptureFixture[str], command: str) -> list[str]:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    if "positional arguments:" not in out:
        return []
    section = out.split("positional arguments:\n", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^  (\S+)", section, re.MULTILINE)


def test_every_command_names_its_arguments_alike(capsys: pytest.CaptureFixture[str]) -> None:
    seen: dict[str, set[str]] = {}
    for command in _commands(capsys):
        for name in _positionals(capsys, command):
            seen.setdefault(name, set()).add(command)
    # one name per thing, in capitals as options' values are: no `session` / `interrupt_id`
    assert set(seen) == {"AGENT", "SESSION", "PROMPT", "QUESTION", "ANSWER", "ACTION"}, seen
    assert seen["ACTION"] == {"policy"}  # policy check / policy replay
    assert seen["SESSION"] == {
        "run",
        "answer",
        "expire",
        "recover",
        "show",
        "history",
        "fork",
        "undo",
        "move",
        "discard",
        "delete",
    }
    assert seen["QUESTION"] == seen["ANSWER"] == {"answer"}
    assert "--at CHECKPOINT" in _help(capsys, "fork") and "--by NAME" in _help(capsys, "fork")


@tool
def list_logs(directory: str) -> list[dict[str, object]]:
    """List log files.

    Args:
        directory: Where.
    """
    return [{"name": f"{directory}/{i}.log", "mb": i} for i in range(3)]


@tool
def one_log() -> list[str]:
    """The newest log."""
    return ["/var/log/a.log"]


def test_history_sums_up_a_json_list_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    turns = [
        [ToolUse("t1", "list_logs", {"directory": "/var/log"}), ToolUse("t2", "one_log", {})],
        "done",
    ]
    with SQLiteStore(tmp_path / "s.db") as store:
        Agent(ScriptedModel(turns), tools=[list_logs, one_log], session=store, session_id="s")(
            "look"
        )
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["--store", url, "history", "s"]) == 0
    [row] = [line for line in capsys.readouterr().out.splitlines() if "tool_result" in line]
    summary = row.split("tool_result", 1)[1].strip()
    assert summary.startswith('success: [3 items: {"name": "/var/log/0.log"'), row
    assert summary.endswith('; success: [1 item: "/var/log/a.log"]'), row
    assert main(["--store", url, "--json", "history", "s"]) == 0
    points = json.loads(capsys.readouterr().out)["checkpoints"]
    [result] = [p for p in points if p["kind"] == "tool_result"]
    assert result["summary"] == summary
