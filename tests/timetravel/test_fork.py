"""Forking a recorded run at each of its checkpoints: nothing before the fork point is done
again, the parent does not change, and a past question can be answered the other way."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from interlude import Agent, RunFinished
from interlude.errors import StateIntegrityError, UnknownCheckpointError
from interlude.sessions import FileStore, MemoryStore
from tests.sessions import stores
from tests.sessions.stores import KINDS
from tests.support.processes import ROOT

from . import tt_agent
from .tt_agent import RUNS, Calls, build


@pytest.fixture(autouse=True)
def _no_runs() -> None:
    RUNS.clear()


def recorded(store: Any = None, session_id: str | None = None, **kw: Any) -> tuple[Agent, str]:
    """A run that looked a file up, asked to delete it, was approved by ana, and deleted it."""
    RUNS.clear()
    calls = Calls()
    agent = build(calls.model, store, session_id, **kw)
    paused = agent("Free some disk space")
    (question,) = paused.interrupts
    assert str(agent.resume({question.id: True}, by="ana")).startswith("Finished: success")
    assert RUNS == ["lookup old.log", "delete /var/log/old.log"] and calls.count == 3
    RUNS.clear()
    return agent, question.id


def stored(store: Any, session_id: str) -> Any:
    return asyncio.run(store.load(session_id))


def test_the_checkpoints_of_a_run() -> None:
    agent, question = recorded()
    points = agent.checkpoints()
    assert [(p.id, p.kind) for p in points] == [
        ("m0", "prompt"),
        ("m1", "model_reply"),
        ("m2", "tool_result"),
        ("m3", "model_reply"),
        (question, "question"),
        (f"answer:{question}", "answer"),
        ("m4", "tool_result"),
        ("m5", "model_reply"),
    ]
    answer = points[5]
    assert answer.when is not None and answer.summary == "ana answered approve: true"
    assert points[3].summary == 'delete({"path": "/var/log/old.log"})'
    with pytest.raises(AttributeError):
        points[0].id = "x"  # type: ignore[misc]


@pytest.mark.parametrize("at", ["m0", "m1", "m2", "m3", "question", "m4", "m5"])
def test_a_fork_at_any_checkpoint_calls_no_model_and_runs_no_tool(at: str) -> None:
    store = MemoryStore()
    parent, question = recorded(store, "s")
    before = stored(store, "s")
    exported = parent.export_state()
    point = question if at == "question" else at
    failing = Calls(fail=True)
    parent.model = failing.model  # any call during the fork fails the test
    fork = parent.fork(at=point, session_id="f", by="bo")
    assert RUNS == [] and failing.count == 0
    assert stored(store, "s") == before and parent.export_state() == exported
    keep = {"m0": 1, "m1": 2, "m2": 3, "m3": 4, "question": 4, "m4": 5, "m5": 6}[at]
    assert fork.messages == parent.messages[:keep]
    (link,) = [e for e in fork.audit if e.name == "fork"]
    assert link.answer["session"] == "s" and link.answer["checkpoint"] == point
    assert link.by == "bo" and fork.checkpoints()[0].kind == "fork"
    assert fork.is_paused == (at == "question")


def test_a_past_approval_answered_the_other_way_while_the_parent_keeps_its_result() -> None:
    store = MemoryStore()
    parent, question = recorded(store, "s")
    before = stored(store, "s")
    fork = parent.fork(at=question, session_id="declined")
    assert [q.id for q in fork.interrupts] == [question]  # asked again, same id
    calls = Calls()
    fork.model = calls.model
    done = fork.resume({question: False}, by="bo")
    assert str(done) == "Finished: error: not approved"
    assert RUNS == [] and calls.count == 1  # only the call after the fork point
    assert stored(store, "s") == before
    assert str(parent.messages[-1].content[0].text).startswith("Finished: success")
    trail = [(e.name, e.by) for e in fork.audit]
    assert trail == [("fork", "unknown"), ("approve", "bo")]


def test_a_tool_that_ran_in_the_parent_runs_again_only_when_a_person_says_so() -> None:
    parent, question = recorded()
    calls = Calls()
    # Approved again: the delete ran in the parent, so the fork asks before running it.
    again = parent.fork(at=question)
    again.model = calls.model
    guard = again.resume({question: True})
    (ask,) = guard.interrupts
    assert ask.name == "ran_in_parent" and ask.tool_use.name == "delete" and RUNS == []
    assert ask.response_schema == {"enum": ["rerun", "reuse", "fail"]}
    reused = again.resume({ask.id: "reuse"})
    assert str(reused) == "Finished: success: deleted /var/log/old.log" and RUNS == []
    rerun = parent.fork(at=question)
    rerun.model = calls.model
    (ask,) = rerun.resume({question: True}).interrupts
    assert str(rerun.resume({ask.id: "rerun"})).startswith("Finished: success") and RUNS == [
        "delete /var/log/old.log"
    ]
    # At a model reply: its calls ran in the parent too (recover carries the fork on).
    RUNS.clear()
    at_reply = parent.fork(at="m1")
    at_reply.model = calls.model
    (ask,) = at_reply.recover().interrupts
    assert (ask.name, ask.tool_use.name, RUNS) == ("ran_in_parent", "lookup", [])
    failed = at_reply.resume({ask.id: "fail"})  # the model sees an error; it asks on
    assert [q.name for q in failed.interrupts] == ["approve"] and RUNS == []
    assert at_reply.messages[2].content[0].status == "error"


def test_an_unknown_checkpoint_is_refused_and_nothing_is_made() -> None:
    store = MemoryStore()
    parent, _ = recorded(store, "s")
    with pytest.raises(UnknownCheckpointError, match="m0, m1"):
        parent.fork(at="m99", session_id="f")
    assert asyncio.run(store.list_sessions()) == ["s"]


@pytest.fixture(params=KINDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return stores.store_url(request.param, tmp_path, request.addfinalizer)


CHILD = """
import json, sys
from interlude.sessions import open_store
from tests.timetravel.tt_agent import Calls, build
url, fork_id, answer = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
calls = Calls()
fork = build(calls.model, open_store(url), fork_id)
(question,) = fork.interrupts
print(json.dumps({"text": str(fork.resume({question.id: answer}, by="cy")), "calls": calls.count}))
"""


def test_a_fork_made_in_one_process_is_answered_in_another(store_url: str, tmp_path: Path) -> None:
    from interlude.sessions import open_store

    if store_url.startswith("file://"):
        FileStore(tmp_path / "sessions")  # the folder exists
    store = open_store(store_url)
    parent, question = recorded(store, "s")
    before = stored(store, "s")
    parent.fork(at=question, session_id="s-declined", by="bo")
    runs = tmp_path / "runs.txt"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, store_url, "s-declined", "false"],
        cwd=ROOT,
        env={**os.environ, "INTERLUDE_TEST_RUNS": str(runs)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"text": "Finished: error: not approved", "calls": 1}
    assert not runs.exists()
    assert stored(store, "s") == before
    fork = stored(store, "s-declined")
    assert [a["by"] for a in fork.audit] == ["bo", "cy"]


def test_a_fork_of_a_signed_session_is_signed() -> None:
    store = MemoryStore()
    key = "k" * 32
    parent, question = recorded(store, "s", signing_key=key)
    parent.fork(at=question, session_id="f")
    raw = store._sessions["f"]
    pause = json.loads(raw.pause)
    assert pause["signature"].startswith("hmac-sha256")
    pause["step"]["calls"][0]["tool_use"]["input"]["path"] = "/etc/passwd"
    raw.pause = json.dumps(pause)
    with pytest.raises(StateIntegrityError):
        build(Calls().model, store, "f", signing_key=key).interrupts  # noqa: B018


def test_replay_gives_the_recorded_events_with_no_call() -> None:
    calls = Calls()
    agent = build(calls.model)

    async def streamed(go: Any) -> list[Any]:
        return [event async for event in go]

    first = asyncio.run(streamed(agent.stream_async("Free some disk space")))
    (question,) = agent.interrupts
    second = asyncio.run(streamed(agent.resume_stream_async({question.id: True})))
    assert calls.count == 3
    RUNS.clear()
    replayed = agent.replay()
    assert calls.count == 3 and RUNS == []
    # The record keeps every event but a past pause's own (its question and end): those are
    # the first stream's last two; the rest is the same, event for event.
    original = [*first[:-2], *second]
    assert [type(e).__name__ for e in first[-2:]] == ["InterruptRaised", "RunFinished"]
    assert replayed[:-1] == original[:-1]
    end, was = replayed[-1], original[-1]
    assert isinstance(end, RunFinished) and isinstance(was, RunFinished)
    assert (end.result.stop_reason, end.result.message) == (
        was.result.stop_reason,
        was.result.message,
    )
    paused = tt_agent.build(Calls().model)
    events = asyncio.run(streamed(paused.stream_async("Free some disk space")))
    assert paused.replay()[:-1] == events[:-1]  # a pause open now: its question is replayed


def test_a_fork_in_a_later_round_finds_the_calls_the_model_gave_the_same_ids() -> None:
    # The model reuses its tool-use ids each round ("t1", "t2"): the loop runs the second
    # round's calls as "t1#2", "t2#2"; a fork at the second round's question stands there.
    calls = Calls()
    agent = build(calls.model, MemoryStore(), "s")
    asked = []
    for prompt in ("first", "second", "third"):
        (question,) = agent(prompt).interrupts
        asked.append(question.id)
        agent.resume({question.id: True}, by="ana")
    RUNS.clear()
    assert asked[1].startswith("v1:before_tool_call:t2#2:")
    fork = agent.fork(at=asked[1], session_id="f")
    assert [q.id for q in fork.interrupts] == [asked[1]] and len(fork.messages) == 10
    later = Calls()
    fork.model = later.model
    assert str(fork.resume({asked[1]: False})) == "Finished: error: not approved"
    assert RUNS == [] and later.count == 1


def test_a_tool_result_of_structured_data_is_summed_up_in_the_history() -> None:
    """A tool that returns a list (or an object) is a JSON block, not text: its checkpoint's
    summary shows the data, not an empty ``success:`` (issue 35, item 15)."""
    from interlude import Agent, ToolUse, tool
    from interlude.testing import ScriptedModel

    @tool
    def find() -> list[dict[str, object]]:
        """Find tickets."""
        return [{"id": 7, "title": "printer"}, {"id": 9, "title": "vpn"}]

    agent = Agent(ScriptedModel([[ToolUse("t1", "find", {})], "ok"]), tools=[find])
    agent("go")
    [result] = [c for c in agent.checkpoints() if c.kind == "tool_result"]
    assert result.summary.startswith('success: [{"id": 7, "title": "printer"}')
