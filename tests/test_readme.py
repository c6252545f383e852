"""The README's code runs as written, the demo runs, and the quick-start commands match CI."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CI_RUN = ROOT / ".ci" / "run"
DEMO = ROOT / "examples" / "demo.py"

DEMO_COMMAND = (
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[cli]' && .venv/bin/interlude demo"
)
TEST_COMMAND = (
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev]' && .venv/bin/python -m pytest -q"
)

_FENCE = re.compile(r"^```(\w*)[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def _blocks(language: str) -> list[tuple[int, str]]:
    """(line number, code) of each fenced block in the README tagged ``language``."""
    text = README.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, m.start()) + 1, m.group(2))
        for m in _FENCE.finditer(text)
        if m.group(1) == language
    ]


PYTHON_BLOCKS = _blocks("python")


def test_readme_has_python_examples() -> None:
    assert len(PYTHON_BLOCKS) >= 6


@pytest.mark.parametrize(
    "code",
    [code for _, code in PYTHON_BLOCKS],
    ids=[f"block{i}-line{line}" for i, (line, _) in enumerate(PYTHON_BLOCKS)],
)
def test_readme_python_block_runs(code: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "assert " in code, "every README example shows its outcome with asserts"
    # The provider examples build agents (no call is made): give them the keys they read.
    for name, value in {
        "OPENAI_API_KEY": "sk-test",
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
    }.items():
        monkeypatch.setenv(name, value)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    exec(compile(code, str(README), "exec"), namespace)


def test_readme_quick_start_commands() -> None:
    commands = [code.strip() for _, code in _blocks("bash")]
    assert commands[0] == DEMO_COMMAND  # the first command is the demo
    follow_up = commands[1].splitlines()  # then pending and answer, from new processes
    assert follow_up[0] == ".venv/bin/interlude pending"
    assert follow_up[1].startswith(".venv/bin/interlude answer ")
    assert TEST_COMMAND in commands


def test_the_readme_s_next_commands_work_as_written_after_a_fresh_demo(tmp_path: Path) -> None:
    """A fresh clone's first demo is demo-1 and its question's id is deterministic: the
    commands the README shows for it run as they are."""
    demo = subprocess.run(
        [sys.executable, "-m", "interlude", "demo"], cwd=tmp_path, capture_output=True, text=True
    )
    assert demo.returncode == 0, demo.stderr
    for line in [code.strip() for _, code in _blocks("bash")][1].splitlines():
        argv = line.split()
        assert argv[0] == ".venv/bin/interlude", line
        ran = subprocess.run(
            [sys.executable, "-m", "interlude", *argv[1:]],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        assert ran.returncode == 0, f"{line}\n{ran.stdout}\n{ran.stderr}"


def test_readme_shows_the_demo_output_as_the_demo_prints_it(tmp_path: Path) -> None:
    shown = _blocks("text")[0][1]
    proc = subprocess.run(
        [sys.executable, "-m", "interlude", "demo"], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    printed = proc.stdout
    for line in shown.splitlines():  # each shown line (ids and long values elided) is printed
        stable = line.split("demo-")[0].split("...")[0].split("[...]")[0].rstrip()
        assert stable in printed, f"README shows {line!r}, the demo prints:\n{printed}"


def test_ci_runs_the_readme_test_command() -> None:
    script = CI_RUN.read_text(encoding="utf-8")
    assert TEST_COMMAND in script.splitlines()
    assert "INTERLUDE_REQUIRE_SERVICES=1" in script
    assert CI_RUN.stat().st_mode & 0o111, ".ci/run must be executable"


def test_demo_runs() -> None:
    proc = subprocess.run(
        [sys.executable, str(DEMO)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "stop reason: interrupt" in lines
    assert "interrupt name: approve" in lines
    assert 'tool input: {"path": "/tmp/old.log"}' in lines
    assert "deleted so far: []" in lines
    assert "stop reason: end_turn" in lines
    assert "final reply: Done: /tmp/old.log is gone." in lines
    assert "tool result: success - deleted /tmp/old.log" in lines
    assert "deleted: ['/tmp/old.log']" in lines
    assert any(
        re.fullmatch(r"interrupt id: v1:before_tool_call:call-1:[0-9a-f-]{36}", x) for x in lines
    )
