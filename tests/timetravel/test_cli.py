"""``interlude history`` lists a session's checkpoints; ``interlude fork`` makes a session
standing at one, which ``interlude answer`` then answers the other way."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import Ran, cli_env, run

from .test_fork import recorded


def cli(*args: str, runs: Path) -> Ran:
    """``interlude ARGS...`` as user "dee" (run in this process, in the folder of ``runs``,
    as a process of its own would run; ``--app tests.timetravel.tt_app:app`` is found from
    the repository)."""
    return run(runs.parent, *args, env=cli_env(INTERLUDE_TEST_RUNS=str(runs), USER="dee"))


def test_history_then_fork_then_answer_the_other_way(tmp_path: Path) -> None:
    from interlude.sessions import SQLiteStore

    url = f"sqlite:///{tmp_path / 's.db'}"
    store = SQLiteStore(tmp_path / "s.db")
    _, question = recorded(store, "s")
    store.close()
    runs = tmp_path / "runs.txt"

    listed = cli("--store", url, "--json", "history", "s", runs=runs)
    assert listed.returncode == 0, listed.stderr
    points = json.loads(listed.stdout)["checkpoints"]
    assert [p["kind"] for p in points] == [
        "prompt",
        "model_reply",
        "tool_result",
        "model_reply",
        "question",
        "answer",
        "tool_result",
        "model_reply",
    ]
    assert points[4]["id"] == question
    text = cli("--store", url, "history", "s", runs=runs).stdout
    assert "8 checkpoints" in text and "ana answered approve: true" in text

    app = "tests.timetravel.tt_app:app"
    made = cli(
        "--store",
        url,
        "--app",
        app,
        "--json",
        "fork",
        "s",
        "--at",
        question,
        "--as",
        "s-2",
        runs=runs,
    )
    assert made.returncode == 0, made.stderr
    fork = json.loads(made.stdout)
    assert fork["fork"] == "s-2" and [q["id"] for q in fork["pending"]] == [question]
    answered = cli("--store", url, "--app", app, "answer", "s-2", question, "false", runs=runs)
    assert answered.returncode == 0, answered.stderr
    assert "not approved" in answered.stdout
    assert not runs.exists()  # nothing ran again: not the lookup, not the delete
    again = cli("--store", url, "history", "s-2", runs=runs).stdout
    assert "forked from 's'" in again and "dee answered approve: false" in again
    missing = cli("--store", url, "--app", app, "fork", "s", "--at", "m42", runs=runs)
    assert missing.returncode != 0 and "no checkpoint 'm42'" in missing.stderr
