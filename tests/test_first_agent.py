"""docs/first-agent.md runs as written: its ``myapp.py`` saved in a fresh folder, then its
shell commands in order (with this installation as the folder's ``.venv``, the venv not
activated): the session started from the shell pauses, the answer runs the refund once, and
``show`` prints the audit trail with its chain verified."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "first-agent.md"
_FENCE = re.compile(r"^```(\w*)[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def _blocks(kind: str) -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    return [m.group(2) for m in _FENCE.finditer(text) if m.group(1) == kind]


def test_the_first_agent_guide_runs_as_written(tmp_path: Path) -> None:
    [code] = _blocks("python")
    install, start, answer = _blocks("bash")
    assert install.strip().endswith("pip install -q -e '../interlude[cli,server]'")
    (tmp_path / "myapp.py").write_text(code, encoding="utf-8")
    (tmp_path / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INTERLUDE_", "OPENAI_"))}
    env.update(NO_COLOR="1", TERM="dumb", PYTHONUNBUFFERED="1")
    env.pop("VIRTUAL_ENV", None)

    def sh(line: str) -> str:
        ran = subprocess.run(
            ["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert ran.returncode == 0, f"{line}\n{ran.stdout}\n{ran.stderr}"
        return ran.stdout

    checked = sh(".venv/bin/python myapp.py")  # the page's own quick check
    assert checked == ""
    started, listed = (sh(line) for line in start.strip().splitlines())
    assert "Paused: 1 question(s)" in started and "approve_refund" in started, started
    answer_line, show_line = answer.strip().splitlines()
    iid = answer_line.split()[4]
    assert iid in started and "order-42" in listed and "approve_refund" in listed, listed
    answered = sh(answer_line)
    assert "The run ended (end_turn)." in answered, answered
    shown = sh(show_line)
    assert "refunded 1999 cents on order 42" in shown, shown
    assert "ana answered approve_refund: true" in shown and "chain: verified" in shown, shown
