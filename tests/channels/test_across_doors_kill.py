"""A SIGKILL after the answer is recorded still runs the tool once, whatever the door (issue 39).

The question is asked in this process; a person answers it through one door of a real
``interlude serve --mcp`` (links and Slack's actions open too), which is SIGKILLed once the
answer is in the store; ``interlude worker --once`` then carries the session on in a fresh
process. Every run of the tool is a line in a file, with the pid of the process that ran it.

- The doors that only record (the inbox's JSON API, a one-time link, a Slack click) answer,
  and the serving process is killed: nothing of the run was theirs, and the worker, a third
  process, runs the tool once.
- The doors whose serving process records the answer and then carries the run on itself
  (an MCP client's form, AG-UI and A2A's ``SendMessage``: ``Operator.answer``; A2A's
  ``SendStreamingMessage``: ``Operator.answer_stream``) are held at a gate and killed there
  (``tests/channels/across_app.py``): right after the answer was recorded, before anything of
  it applied (``recorded``); once the hook had the answer back, the resume under way
  (``applying``): the worker runs the tool once. Killed inside the tool's body (``tool``), the
  call is in doubt: the worker asks about it and never runs it a second time; an operator's
  answer (the result it had) then ends the run, the body still started once in all.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from interlude import Inbox, Text
from tests.doors.answering import Outcome
from tests.doors.served import TOKENS
from tests.support import Started, free_port, started, wait_for
from tests.support.processes import ROOT

from .across import ANA, World, answer_via, doors_env, require_doors
from .across_app import POINTS, effects
from .slack_api import SlackApi, loopback_slack

APP = "tests.channels.across_app:app"
RECORDING = ["inbox", "link", "slack"]
"""Doors that record the answer and leave the run to a worker."""
CARRYING = ["mcp", "ag-ui", "a2a", "a2a-stream"]
"""Doors whose serving process records the answer, then carries the run on itself."""
CASES = [(door, "answered") for door in RECORDING] + [
    (door, point) for door in CARRYING for point in POINTS
]


@pytest.fixture(scope="module")
def slack() -> Iterator[tuple[SlackApi, str]]:
    require_doors()
    with loopback_slack() as found:
        yield found


@dataclass
class Setting:
    """One test's store, effects file, gates folder, and the environment its processes share."""

    base: Path
    api_url: str
    db: Path = field(init=False)
    runs: Path = field(init=False)
    gates: Path = field(init=False)

    def __post_init__(self) -> None:
        self.db = self.base / "kill.db"
        self.runs = self.base / "runs.txt"
        self.gates = self.base / "gates"
        self.gates.mkdir()

    @property
    def store_url(self) -> str:
        return f"sqlite:///{self.db}"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("INTERLUDE_")}
        return {
            **env,
            **doors_env(self.api_url),
            "ACROSS_EFFECTS": str(self.runs),
            "ACROSS_GATES": str(self.gates),
            "ACROSS_DB": str(self.db),
            "NO_COLOR": "1",
        }

    def interlude(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``interlude --store STORE --app APP ARGS... --json`` in a fresh process."""
        argv = [sys.executable, "-m", "interlude", "--store", self.store_url, "--app", APP]
        return subprocess.run(
            [*argv, *args, "--json"],
            cwd=ROOT,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def serve(self) -> AbstractContextManager[Started]:
        """``interlude serve --mcp`` of the App on the store, with every door open."""
        tokens = self.base / "tokens.json"
        tokens.write_text(json.dumps(TOKENS))
        port = free_port()
        argv = [sys.executable, "-m", "interlude", "--store", self.store_url, "--app", APP]
        argv += ["serve", "--mcp", "--port", str(port), "--tokens", str(tokens)]
        return started(argv, port=port, env=self.env(), what="interlude serve --mcp")


class InFlight:
    """An answer sent in a thread: the door's reply, or what the connection raised when the
    server died under it."""

    def __init__(self, send: Callable[[], Outcome]) -> None:
        self.got: list[Outcome | BaseException] = []

        def run() -> None:
            try:
                self.got.append(send())
            except BaseException as exc:  # the server was killed mid-answer
                self.got.append(exc)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def result(self, what: str) -> Outcome | BaseException:
        self.thread.join(120)
        assert not self.thread.is_alive(), f"{what}: still waiting for the door's reply"
        return self.got[0]


def _ask(setting: Setting, session: str) -> str:
    """Start ``session`` of ``mover`` in this process, up to its question: the question's id."""
    from .across_app import app

    opened = app.start("mover", session, setting.store_url)
    try:
        result = opened(session)
        assert result.stop_reason == "interrupt", result.stop_reason
        (question,) = result.interrupts
        return str(question.id)
    finally:
        opened.close()  # type: ignore[union-attr]


def _answers(setting: Setting, session: str) -> tuple[list[Any], list[Any]]:
    """(who answered what, as recorded and waiting; as applied: the audit trail)."""
    view = Inbox(setting.store_url).session(session)
    return [(r.by, r.answer) for r in view.recorded], [(e.by, e.answer) for e in view.audit]


def _due(setting: Setting, session: str) -> bool:
    """Whether a worker would take ``session`` now: an answer waits in the queue, or the run
    claim of the killed process has run out."""
    from interlude.sessions import SQLiteStore

    with SQLiteStore(setting.db) as store:
        recorded = asyncio.run(store.recorded_answers(session))
        stored = asyncio.run(store.load(session))
    assert stored is not None
    claim = stored.claim
    if recorded:
        return True
    return claim is not None and float(claim["expires_at"]) <= time.time()


def _kill(server: Started) -> None:
    os.kill(server.process.pid, signal.SIGKILL)
    assert server.process.wait(60) == -signal.SIGKILL


@pytest.mark.parametrize(("door", "point"), CASES)
def test_a_sigkill_after_the_answer_is_recorded_still_runs_the_tool_once(
    door: str, point: str, tmp_path: Path, slack: tuple[SlackApi, str]
) -> None:
    api, api_url = slack
    setting = Setting(tmp_path, api_url)
    session = f"kill-{door}-{point}"
    iid = _ask(setting, session)
    hold = setting.gates / f"{session}.{point}"
    held = hold.with_name(hold.name + ".held")
    if point in POINTS:
        hold.touch()

    try:
        with setting.serve() as server:
            world = World(server.url, setting.db, api, api_url)
            answering = InFlight(lambda: answer_via(world, door, ANA, "mover", session, iid, True))
            if point in POINTS:
                wait_for(held.exists, what=f"the server at {point}", process=server.process)
                assert held.read_text() == str(server.process.pid)
            else:
                answered = answering.result("the answer")
                assert isinstance(answered, Outcome) and answered.taken, str(answered)
            waiting, applied = _answers(setting, session)
            assert (waiting or applied) == [("ana", True)], (waiting, applied)
            if point == "recorded":  # nothing of it applied yet
                assert (waiting, applied) == ([("ana", True)], [])
            _kill(server)
    finally:
        hold.unlink(missing_ok=True)  # (a failed test's server is let go, then stopped)
    cut = answering.result("the answer cut off by the kill")
    if point in POINTS:
        assert not (isinstance(cut, Outcome) and cut.taken), str(cut)
    served_runs = effects(setting.runs, session)
    assert served_runs == ([("start", server.process.pid)] if point == "tool" else [])

    wait_for(lambda: _due(setting, session), what="the killed run due for a worker", every=0.1)
    worker = setting.interlude("worker", "--once")
    assert worker.returncode == 0, worker.stderr
    assert json.loads(worker.stdout)["handled"] == 1, worker.stdout
    view = Inbox(setting.store_url).session(session)

    if point != "tool":
        runs = effects(setting.runs, session)
        assert [kind for kind, _ in runs] == ["start", "done"], runs  # once
        assert runs[0][1] not in (os.getpid(), server.process.pid)  # by the worker
        assert not view.interrupts and view.recorded == []
        assert [(e.by, e.answer) for e in view.audit] == [("ana", True)]
    else:  # killed in the body: in doubt, asked, never run again
        assert effects(setting.runs, session) == served_runs
        (doubt,) = view.interrupts
        assert doubt.name == "in_doubt", doubt
        result = {"result": f"moved {session}"}  # the operator checked: it had moved
        settled = setting.interlude("answer", session, doubt.id, json.dumps(result), "--by", "dee")
        assert settled.returncode == 0, settled.stderr
        assert effects(setting.runs, session) == served_runs  # the body started once in all
        view = Inbox(setting.store_url).session(session)
        assert [(e.by, e.answer) for e in view.audit] == [("ana", True), ("dee", result)]

    again = setting.interlude("worker", "--once")
    assert json.loads(again.stdout)["handled"] == 0, again.stdout
    final = view.messages[-1]
    assert (final.role, final.content) == (
        "assistant",
        [Text(f"finished: success: moved {session}")],
    )
    assert [kind for kind, _ in effects(setting.runs, session)].count("start") == 1
