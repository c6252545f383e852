"""``interlude move``: a paused demo session moved between stores from the command line, the
old store refusing an answer with where the session went, the new one carrying it on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from interlude.cli import main

QUESTION = "v1:before_tool_call:call_delete:5cf56bed-067e-5438-a1ef-dbfa3405e45d"


@pytest.fixture
def stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    for name in ("INTERLUDE_APP", "INTERLUDE_TEMPORAL", "INTERLUDE_STORE", "INTERLUDE_TOKENS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    old, new = f"sqlite:///{tmp_path / 'old.db'}", f"sqlite:///{tmp_path / 'new.db'}"
    assert main(["--store", old, "--json", "demo", "--session", "s"]) == 0
    return old, new


def test_move_then_answer_in_the_new_store(
    stores: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = stores
    capsys.readouterr()
    assert main(["--store", old, "--json", "move", "s", "--to", new, "--by", "ana"]) == 0
    moved = json.loads(capsys.readouterr().out)
    assert moved == {"session": "s", "from": old, "to": new, "interrupts": [QUESTION]}

    assert main(["--store", old, "answer", "s", QUESTION, "true"]) == 1
    err = capsys.readouterr().err
    assert f"was moved to {new}" in err, err
    assert main(["--store", old, "--json", "answer", "s", QUESTION, "true"]) == 1
    assert json.loads(capsys.readouterr().out)["code"] == "moved"

    assert main(["--store", new, "--json", "answer", "s", QUESTION, "true", "--by", "bo"]) == 0
    capsys.readouterr()
    assert main(["--store", new, "--json", "show", "s"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [(e["name"], e["by"]) for e in shown["audit"]] == [("moved", "ana"), ("approve", "bo")]
    assert main(["--store", old, "show", "s"]) == 0
    assert f"ana moved this session from {old} to {new}" in capsys.readouterr().out


def test_move_refuses_what_cannot_move(
    stores: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = stores
    assert main(["--store", old, "move", "s", "--to", old]) == 1
    assert "same place" in capsys.readouterr().err
    assert main(["--store", old, "move", "nope", "--to", new]) == 1
    assert "no session 'nope'" in capsys.readouterr().err
    assert main(["--store", old, "move", "s", "--to", "dbos:sqlite:///x"]) == 1
    assert "PostgreSQL URL" in capsys.readouterr().err
