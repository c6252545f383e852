"""An approved call with an edit, its process killed (SIGKILL) inside the tool body: recovery
in another process asks about the edited call (the one that ran), never the model's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

CHILD = Path(__file__).with_name("kill_child.py")


def _run(db: Path, log: Path, *args: str, kill: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KILL_IN_BODY": "1" if kill else "0"}
    return subprocess.run(
        [sys.executable, str(CHILD), str(db), str(log), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def _out(run: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_a_kill_in_an_edited_call_leaves_the_edit_in_doubt(tmp_path: Path) -> None:
    db, log = tmp_path / "s.db", tmp_path / "paid.log"
    [question] = _out(_run(db, log, "prompt"))["questions"]
    edit = {"approve": True, "input": {"amount": 8, "to": "bob"}}
    killed = _run(db, log, "answer", json.dumps({question["id"]: edit}), kill=True)
    assert killed.returncode == -signal.SIGKILL
    assert log.read_text().splitlines() == ["8 bob"]  # the edit ran once, then the kill

    stopped = _out(_run(db, log, "recover"))
    [doubt] = stopped["questions"]
    assert doubt["name"] == "in_doubt"
    assert doubt["tool_use"]["input"] == {"amount": 8, "to": "bob"}  # what ran, not the 10

    done = _out(_run(db, log, "settle", json.dumps({doubt["id"]: {"result": "paid 8 to bob"}})))
    assert done["stop_reason"] == "end_turn"
    assert log.read_text().splitlines() == ["8 bob"]  # not run again: the person said it ran
    assert done["results"][0].startswith("[approved with edited input")
