"""The README's code runs as written, the demo runs, and the quick-start commands match CI."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import free_port, wait_for, wait_for_port
from tests.support.processes import ROOT

README = ROOT / "README.md"
CI_RUN = ROOT / ".ci" / "run"
DEMO = ROOT / "examples" / "demo.py"

DEMO_COMMAND = (
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[cli,server]' "
    "&& .venv/bin/interlude demo"
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


TOUR = ROOT / "docs" / "tour.md"
"""The README's tour: its examples, run here (with the provider keys they read) rather than
by test_docs."""


def _tour_blocks() -> list[tuple[int, str]]:
    text = TOUR.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, m.start()) + 1, m.group(2))
        for m in _FENCE.finditer(text)
        if m.group(1) == "python"
    ]


PYTHON_BLOCKS = _blocks("python") + _tour_blocks()


def test_readme_has_python_examples() -> None:
    assert len(PYTHON_BLOCKS) >= 6
    assert "(docs/tour.md)" in README.read_text(encoding="utf-8")  # the README links its tour


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
    # dont_inherit: the block runs as a user module would, without this file's __future__ flags
    exec(compile(code, str(README), "exec", dont_inherit=True), namespace)


def test_readme_quick_start_commands() -> None:
    commands = [code.strip() for _, code in _blocks("bash")]
    assert commands[0] == DEMO_COMMAND  # the first command is the demo
    follow_up = commands[1].splitlines()  # then pending and answer, from new processes
    assert follow_up[0] == ".venv/bin/interlude pending"
    assert follow_up[1].startswith(".venv/bin/interlude answer ")
    assert TEST_COMMAND in commands


def _a_fresh_clone_s_folder(tmp_path: Path) -> dict[str, str]:
    """Make ``tmp_path`` look like a fresh clone after the demo command's install: ``.venv``
    is this test run's venv, not activated (its bin is not on PATH). Returns that environment."""
    (tmp_path / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k not in ("INTERLUDE_STORE", "VIRTUAL_ENV")}
    venv_bin = os.path.join(sys.prefix, "bin")
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if p and os.path.abspath(p) != venv_bin
    )
    env.update(NO_COLOR="1", TERM="dumb")
    return env


def _shell(line: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_readme_s_commands_work_as_written_after_a_fresh_demo(tmp_path: Path) -> None:
    """A fresh clone's first demo is demo-1 and its question's id is deterministic: the demo
    suggests exactly the commands the README shows (`.venv/bin/interlude`, since the venv is
    not activated), and they run as written in a shell."""
    env = _a_fresh_clone_s_folder(tmp_path)
    demo = _shell(".venv/bin/interlude demo", tmp_path, env)
    assert demo.returncode == 0, demo.stderr
    readme_lines = [code.strip() for _, code in _blocks("bash")][1].splitlines()
    suggested = [line.strip() for line in demo.stdout.splitlines() if line.startswith("  .venv/")]
    assert suggested == readme_lines[:2], demo.stdout
    for line in readme_lines:
        ran = _shell(line, tmp_path, env)
        assert ran.returncode == 0, f"{line}\n{ran.stdout}\n{ran.stderr}"
    shown = _shell(readme_lines[-1], tmp_path, env).stdout
    assert "Done: I deleted the three old log files" in shown and "Not paused." in shown, shown


def test_readme_shows_the_demo_output_as_the_demo_prints_it(tmp_path: Path) -> None:
    shown = _blocks("text")[0][1]
    proc = _shell(".venv/bin/interlude demo", tmp_path, _a_fresh_clone_s_folder(tmp_path))
    assert proc.returncode == 0, proc.stderr
    printed = proc.stdout
    for line in shown.splitlines():  # each shown line (long values elided) is printed
        stable = line.split("...")[0].split("[...]")[0].rstrip()
        assert stable in printed, f"README shows {line!r}, the demo prints:\n{printed}"


def test_the_cli_suggests_commands_the_way_it_was_started(tmp_path: Path) -> None:
    """`python -m interlude` with the venv not activated suggests that same form; an activated
    venv (its bin first on PATH) suggests plain `interlude`."""
    env = _a_fresh_clone_s_folder(tmp_path)
    as_module = _shell(".venv/bin/python -m interlude demo", tmp_path, env)
    assert "  .venv/bin/python -m interlude pending" in as_module.stdout.splitlines()
    env["PATH"] = os.pathsep.join([os.path.join(sys.prefix, "bin"), env["PATH"]])
    activated = _shell("interlude demo", tmp_path, env)
    assert "  interlude pending" in activated.stdout.splitlines(), activated.stdout
    shown = _shell("interlude show demo-2", tmp_path, env)
    assert shown.returncode == 0, shown.stderr


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


def test_the_readme_s_browser_command_serves_the_inbox_and_its_worker_answers(
    tmp_path: Path,
) -> None:
    """The README's inbox line, in a folder like a fresh clone (plus a free port): the token it
    prints opens the API, an answer given there is applied by the worker in that process."""
    import json
    import urllib.request

    pytest.importorskip("uvicorn")
    env = _a_fresh_clone_s_folder(tmp_path)
    line = [code.strip() for _, code in _blocks("bash")][2]
    assert line == ".venv/bin/interlude demo && .venv/bin/interlude serve --worker", line
    port = free_port()
    proc = subprocess.Popen(
        ["bash", "-c", f"{line} --port {port}"],
        cwd=tmp_path,
        env={**env, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        token = None
        assert proc.stdout is not None
        for out in proc.stdout:
            if "token for " in out:
                token = out.split(":", 1)[1].strip()
            if "Ctrl-C stops" in out:
                break
        assert token, "serve printed no token"

        def call(path: str, body: object = None) -> tuple[int, object]:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}{path}",
                data=None if body is None else json.dumps(body).encode(),
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read())

        wait_for_port(port, what="the server (it listens shortly after it says so)")
        status, pending = call("/api/pending")
        assert status == 200
        (question,) = pending["pending"] if isinstance(pending, dict) else pending
        status, _ = call(
            f"/api/sessions/{question['session']}/answers", {"answers": {question["id"]: True}}
        )
        assert status == 202
        views: list[Any] = []

        def carried_on() -> bool:  # the worker in the serving process carries the session on
            views.append(call(f"/api/sessions/{question['session']}")[1])
            return not views[-1]["interrupts"] and bool(views[-1]["audit"])

        wait_for(carried_on, what="the worker to carry the answered session on", every=0.05)
        view = views[-1]
        assert view["audit"][0]["answer"] is True and not view["interrupts"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
