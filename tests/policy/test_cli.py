"""``interlude policy check`` and ``interlude policy replay``, run as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from interlude import Agent, ToolUse, tool
from interlude.policy import Policy, Rule
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel
from tests.support.cli import run

GOOD = """\
version = "candidate"

[[rules]]
tool = "pay"
when = "input.amount > 100"
then = "deny"

[[rules]]
tool = "pay"
then = "allow"
"""

APP = """\
from interlude import Agent, App, AgentSession, tool
from interlude.testing import ScriptedModel

app = App()


@tool
def pay(amount: int) -> str:
    \"\"\"Pay.\"\"\"
    return "paid"


@app.agent("payer")
def build(session: AgentSession) -> Agent:
    return Agent(ScriptedModel(["ok"]), tools=[pay], session=session.store, session_id=session.id)
"""


def test_check_passes_a_good_file_and_reports_a_bad_one(tmp_path: Path) -> None:
    (tmp_path / "good.toml").write_text(GOOD, encoding="utf-8")
    (tmp_path / "myapp.py").write_text(APP, encoding="utf-8")
    ok = run(tmp_path, "policy", "check", "good.toml", "--app", "myapp:app").ok()
    assert "2 rules against 1 tools of myapp:app: no problems" in ok.stdout
    (tmp_path / "bad.toml").write_text(
        GOOD + '\n[[rules]]\ntool = "pay"\nthen = "ask"\n\n[[rules]]\ntool = "refund"\n'
        'when = "inptu.amount > 1"\nthen = "ask"\n',
        encoding="utf-8",
    )
    bad = run(tmp_path, "policy", "check", "bad.toml", "--app", "myapp:app", "--json")
    assert bad.returncode == 1, str(bad)
    problems = json.loads(bad.stdout)["problems"]
    assert len(problems) == 3, problems
    assert "rule 2" in problems[0] and "unreachable" in problems[0]
    assert "reads 'inptu'" in problems[1] and "covers no tool" in problems[2]


def test_check_names_a_broken_file_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "broken.toml").write_text('[[rules]]\ntool = "pay"\nthen = "perhaps"\n')
    ran = run(tmp_path, "policy", "check", "broken.toml")
    assert ran.returncode == 1 and "Traceback" not in ran.stderr
    assert "broken.toml" in ran.stderr and "rules[0]" in ran.stderr and "perhaps" in ran.stderr


def test_replay_prints_what_would_change_and_json_for_scripts(tmp_path: Path) -> None:
    runs: list[int] = []

    @tool
    def pay(amount: int) -> str:
        """Pay."""
        runs.append(amount)
        return "paid"

    store = SQLiteStore(tmp_path / "s.db")
    for i, amount in enumerate((5, 500, 50)):
        agent = Agent(
            ScriptedModel([[ToolUse("c1", "pay", {"amount": amount})], "ok"]),
            tools=[pay],
            policy=Policy([Rule(tool="pay", then="allow")], version="live"),
            session=store,
            session_id=f"s{i}",
        )
        agent("go")
    store.close()
    assert runs == [5, 500, 50]
    (tmp_path / "candidate.toml").write_text(GOOD, encoding="utf-8")
    url = f"sqlite:///{tmp_path / 's.db'}"
    text = run(tmp_path, "policy", "replay", "--policy", "candidate.toml", "--store", url).ok()
    assert "3 calls in 3 sessions: the policy would allow 2, ask 0, deny 1" in text.stdout
    assert "s1 c1 pay: ran unasked, would deny" in text.stdout
    assert "1 change(s), 0 not judged" in text.stdout

    def replayed(*extra: str) -> Any:
        argv = ["policy", "replay", "--policy", "candidate.toml", "--store", url, "--json"]
        return run(tmp_path, *argv, *extra).ok().json()

    data = replayed()
    assert data["policy"] == "candidate" and data["calls"] == 3
    assert data["would"] == {"allow": 2, "ask": 0, "deny": 1}
    assert [c["session_id"] for c in data["changes"]] == ["s1"]
    later = replayed("--since", "2100-01-01")
    assert later["calls"] == 0 and later["skipped"] == 3
    recent = replayed("--since", "1d")
    assert recent["calls"] == 3
    assert runs == [5, 500, 50]  # nothing ran again
    wrong = run(
        tmp_path,
        "policy",
        "replay",
        "--policy",
        "candidate.toml",
        "--store",
        url,
        "--since",
        "last tuesday",
    )
    assert wrong.returncode == 1 and "--since takes an ISO date" in wrong.stderr
