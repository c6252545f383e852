"""Every command the CLI prints as a next step works when run exactly as printed (issue 35).

A flow is started with ``interlude`` commands (run as a process would run them, in this
process: see ``tests.support.cli``); then every line of its output that begins with
``interlude `` is split as a shell would (``shlex.split``) and run as it is, a process found
on PATH, in a copy of the folder as it was when the line was printed (so that two hints of one
output do not race for the same question), and so on for the lines those runs print. Each must
succeed and do what it says. To keep the process count low, a hint already followed from the
same kind of command (the same command suggesting the same command, with the same answer) is
not followed again.
"""

from __future__ import annotations

import json
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.cli import Ran, cli_env, processes, run

from .running import user_env

STORE = "sqlite:///elsewhere/sessions.db"  # relative: a copy of the folder has its own store
APP = "user_agent:app"


def hints(stdout: str) -> list[list[str]]:
    """The commands an output tells the user to run (``interlude`` left out), as argv."""
    return [
        shlex.split(line.strip())[1:]
        for line in stdout.splitlines()
        if line.strip().startswith("interlude ")
    ]


def as_printed(jobs: list[tuple[Path, list[str]]], env: dict[str, str]) -> list[Ran]:
    """Each ``interlude ARGS`` line, as printed, run in its folder by a process of its own (the
    ``interlude`` that PATH finds), all at the same time."""
    return processes([(cwd, ["interlude", *argv]) for cwd, argv in jobs], env=env)


@dataclass
class Flow:
    """A folder (``base``) where commands run one after another, each output kept with a copy
    of the folder as that command left it; then the hints followed from there. A ``user``
    flow's folder holds the user's own agent module (``--app user_agent:app``)."""

    root: Path
    user: bool = False
    env: dict[str, str] = field(default_factory=dict)
    outputs: list[tuple[str, Ran, Path]] = field(default_factory=list)
    followed: dict[tuple[str, str, str], tuple[list[str], Ran]] = field(default_factory=dict)
    copies: int = 0

    def __post_init__(self) -> None:
        self.base.mkdir()
        self.env = user_env(self.base) if self.user else cli_env()

    @property
    def base(self) -> Path:
        return self.root / "base"

    def _copy(self, folder: Path) -> Path:
        self.copies += 1
        target = self.root / f"copy-{self.copies}"
        shutil.copytree(folder, target, symlinks=True)
        return target

    def step(self, *argv: str) -> Ran:
        """Run a command in the base folder; its hints are followed later, from this state."""
        ran = run(self.base, *argv, env=self.env).ok()
        self.outputs.append((argv[0], ran, self._copy(self.base)))
        return ran

    def follow(self, max_depth: int = 4) -> None:
        """Run every hint printed so far, then the hints those print, each in a copy of the
        folder its output came from."""
        level = self.outputs
        for _ in range(max_depth):
            jobs: list[tuple[str, list[str], Path]] = []
            for kind, ran, folder in level:
                for argv in hints(ran.stdout):
                    key = (kind, argv[0], _answer_kind(argv))
                    if key in self.followed or any(j[0] == key for j in jobs):
                        continue
                    jobs.append((key, argv, self._copy(folder)))  # type: ignore[arg-type]
            if not jobs:
                return
            results = as_printed([(folder, argv) for _, argv, folder in jobs], self.env)
            level = []
            for (key, argv, folder), ran in zip(jobs, results, strict=True):
                assert ran.returncode == 0, f"the hint {shlex.join(argv)} failed:\n{ran}"
                _does_what_it_says(argv, ran)
                self.followed[key] = (argv, ran)  # type: ignore[index]
                level.append((argv[0], ran, folder))

    def kinds(self) -> set[tuple[str, str]]:
        return {(printer, hinted) for printer, hinted, _ in self.followed}

    def answers(self) -> set[str]:
        return {answer for _, hinted, answer in self.followed if hinted == "answer"}


def _answer_kind(argv: list[str]) -> str:
    """The answer a hinted ``answer`` gives (what makes two answer hints differ)."""
    return argv[-1] if argv[0] == "answer" else ""


def _does_what_it_says(argv: list[str], ran: Ran) -> None:
    out = ran.stdout
    command = argv[0]
    if command == "pending":
        assert "SESSION" in out.splitlines()[0] and "No interrupts" not in out, ran
    elif command in ("answer", "expire", "recover"):
        assert f"session {_session_of(argv)}: resumed" in out, ran
        if command == "answer":
            assert out.startswith("answering "), ran
            assert f"id: {argv[-2]}" not in out, f"the question is still pending\n{ran}"
    elif command == "fork":
        assert f"session {_session_of(argv)}: forked at " in out, ran
    elif command == "run":
        assert "The run ended" in out or "Paused:" in out, ran
    else:
        pytest.fail(f"a hint of a command this test does not know: {shlex.join(argv)}")


def _session_of(argv: list[str]) -> str:
    """The SESSION positional of a hinted command (the first argument not an option)."""
    rest = argv[1:]
    while rest and rest[0].startswith("--"):
        rest = rest[2:]
    return rest[0]


def test_every_hint_of_the_demo_flow_works_as_printed(tmp_path: Path) -> None:
    """The built-in demo app and the default store: no flag in any hint."""
    flow = Flow(tmp_path)
    demo = flow.step("demo", "--session", "s")
    [answer] = [h for h in hints(demo.stdout) if h[0] == "answer"]
    assert answer[-1] == "true" and "--store" not in answer and "--app" not in answer
    flow.step("show", "s")  # paused: how to answer
    flow.step(*answer)  # the delete runs; the session ends
    history = flow.step("history", "s")
    assert "success: [3 items: " in history.stdout, history  # list_files gave a JSON list
    flow.step("fork", "s", "--at", "m5", "--as", "s-end")  # at the final reply: a new prompt
    flow.follow()

    assert flow.kinds() >= {
        ("demo", "pending"),
        ("demo", "answer"),
        ("pending", "answer"),  # by the short id the table shows
        ("show", "answer"),
        ("history", "fork"),  # by a question's short id
        ("fork", "answer"),
        ("fork", "run"),
        ("answer", "answer"),  # the fork asks first before running the delete again
    }, sorted(flow.followed)
    # That question takes "rerun", "reuse" or "fail", not true: the hint gives one of those.
    assert '"rerun"' in flow.answers(), sorted(flow.followed)


def test_every_hint_with_a_store_and_an_app_works_as_printed(tmp_path: Path) -> None:
    """A user's own app and a --store: every hint names both, and works."""
    flow = Flow(tmp_path, user=True)
    where = ["--store", STORE, "--app", APP]
    started = flow.step("run", *where, "user", "s", "Tell Ana and Bob.")
    flow.step("show", "s", *where)
    # Without --app, nothing is suggested that would fail: the missing --app is said instead.
    bare_pending = run(flow.base, "pending", "--store", STORE, env=flow.env)
    assert hints(bare_pending.ok().stdout) == [], bare_pending
    assert "agent 'user' is not in the built-in demo app" in bare_pending.stdout
    for _ in range(2):  # Ana's email, then Bob's
        [answer] = [h for h in hints(started.stdout) if h[0] == "answer"]
        started = flow.step(*answer)
    flow.step("history", "s", *where)
    forked = flow.step("fork", "s", "--at", "m0", "--as", "s-start", *where, "--by", "ana")
    assert "recover" in forked.stdout
    flow.step("show", "s-start", *where)  # it stands before the model call: recover
    flow.follow()

    assert flow.kinds() >= {
        ("run", "pending"),
        ("run", "answer"),
        ("pending", "answer"),
        ("show", "answer"),
        ("history", "fork"),
        ("fork", "answer"),
        ("fork", "recover"),
        ("show", "recover"),
        ("answer", "answer"),
    }, sorted(flow.followed)
    assert '"rerun"' in flow.answers()
    for argv, _ in flow.followed.values():
        assert argv[1:3] == ["--store", STORE], argv
        assert argv[3:5] == ["--app", APP], argv

    bare_show = run(flow.base, "show", "s-start", "--store", STORE, env=flow.env)
    assert hints(bare_show.ok().stdout) == [] and "add --app MODULE:ATTR" in bare_show.stdout


def test_fork_takes_short_ids_and_records_who_forked(tmp_path: Path) -> None:
    flow = Flow(tmp_path)
    started = json.loads(flow.step("demo", "--session", "s", "--json").stdout)
    question = started["interrupts"][0]["id"]
    [row] = json.loads(flow.step("pending", "--json").stdout)
    made = [
        json.loads(flow.step("fork", "s", "--at", at, "--as", new, "--by", "bo", "--json").stdout)
        for at, new in [(row["short_id"], "by-short"), (f"s/{question}", "by-key")]
    ]
    assert [m["at"] for m in made] == [question, question]  # as answer takes them
    shown = json.loads(flow.step("show", "by-short", "--json").stdout)
    [link] = shown["audit"]
    assert link["name"] == "fork" and link["by"] == "bo"
    text = flow.step("show", "by-short").stdout
    assert f'bo forked this session from "s" at "{question}"' in text, text
    refused = run(flow.base, "fork", "s", "--at", "nope", env=flow.env)
    assert refused.returncode == 1 and "interlude history s" in refused.stderr, refused
