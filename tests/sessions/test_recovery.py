"""A process that dies while resuming: what it had finished before the pause is kept."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from interlude import ToolResult, ToolUse
from tests.support.processes import ROOT

from .recovery_agent import build


def test_results_finished_before_the_pause_survive_a_crash_during_the_resume(
    tmp_path: Path,
) -> None:
    db, log = str(tmp_path / "s.db"), str(tmp_path / "log")
    first = build(db, log, [[ToolUse("t1", "record", {"item": "a"}), ToolUse("t2", "boom", {})]])
    paused = first("go")  # t1 runs (concurrent executor); t2 waits for approval
    assert paused.stop_reason == "interrupt" and Path(log).read_text() == "a\n"
    child = textwrap.dedent(
        f"""
        from tests.sessions.recovery_agent import build
        agent = build({db!r}, {log!r}, ["never"])
        agent.resume({{{paused.interrupts[0].id!r}: True}})  # boom: the process dies here
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", child], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -9, proc.stderr

    recovered = build(db, log, ["carrying on"])  # the dead claimant is known gone at once
    assert recovered.needs_recovery
    asked = recovered.recover()  # t1 is kept; t2 started and never returned: in doubt
    [question] = asked.interrupts
    assert question.source == "in_doubt" and question.tool_use is not None
    assert question.tool_use.name == "boom" and isinstance(question.reason, dict)
    assert "may or may not have had effects" in str(question.reason["message"])
    assert str(recovered.resume({question.id: "fail"})) == "carrying on"
    t1, t2 = recovered.messages[2].content
    assert isinstance(t1, ToolResult) and isinstance(t2, ToolResult)
    assert (t1.status, t1.text) == ("success", "recorded a")  # kept, not "not finished"
    assert t2.status == "error" and "may have had effects" in t2.text
    assert Path(log).read_text() == "a\n"  # nothing ran twice
