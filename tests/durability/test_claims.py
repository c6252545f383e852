"""Run claims: a live run is never taken over, a dead one is recoverable, every exit lets go.

"A tool that runs 3x the lease is not taken over": a child process runs a tool on a 1 s lease
while this process keeps trying to run or recover the same session; the tool ends when this
process has seen it run three leases, its claim renewed and ten takeovers refused.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from interlude import Agent, ToolResult, ToolUse, tool
from interlude.errors import SessionConflictError
from interlude.hooks import (
    AfterModelCallEvent,
    AfterToolCallEvent,
    BeforeInvocationEvent,
    BeforeToolCallEvent,
    HookEvent,
)
from interlude.sessions import SessionUpdate, SQLiteStore, StoredSession
from interlude.testing import ScriptedModel
from tests.support import wait_for

from .ctrl_c_agent import slow_agent

HERE = Path(__file__).resolve().parent
LEASE = 1.0  # renewed every third: a renewal may come 0.6 s late on a busy machine
LEASES = 3  # the tool runs at least this many leases


def load(db: Path, session_id: str) -> StoredSession | None:
    with SQLiteStore(db) as store:
        return asyncio.run(store.load(session_id))


def tool_results(stored: StoredSession) -> list[dict[str, Any]]:
    return [
        block
        for m in stored.messages
        if isinstance(m, dict)
        for block in m.get("content", [])
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


# --- a long tool is not taken over ----------------------------------------------------------


def refused(attempt: Callable[[], object], owner: str) -> bool:
    """``attempt`` is refused: True when for ``owner``'s claim, False when a renewal of the
    claim was saved between the attempt's load and its own claim (refused all the same, as
    stale; on a busy machine that happens)."""
    with pytest.raises(SessionConflictError) as info:
        attempt()
    message = str(info.value)
    if "another agent saved it first" in message:
        return False
    assert owner in message, message
    return True


def test_a_tool_running_three_leases_is_not_taken_over(tmp_path: Path, assert_valid: Any) -> None:
    db, session_id = tmp_path / "c.db", "slow"
    log, intruder_log = tmp_path / "tool.log", tmp_path / "intruder.log"
    stop = tmp_path / "stop"  # the tool works until it exists
    argv = [sys.executable, str(HERE / "ctrl_c_agent.py"), str(db), session_id, str(log)]
    child = subprocess.Popen(
        [*argv, str(LEASE), str(stop)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for(lambda: log.exists() and log.read_text(), what="the tool to start", process=child)
        began = time.monotonic()
        owner = f"{socket.gethostname()}:{child.pid}"
        expiries: list[float] = []
        tries = 0
        while True:
            read_from = time.time()
            stored = load(db, session_id)
            read_by = time.time()
            assert stored is not None
            if stored.claim is None:
                break  # the run is over
            claim = stored.claim
            assert claim["pid"] == child.pid and claim["owner"] == owner, claim
            expires_at = claim["expires_at"]
            assert isinstance(expires_at, float)
            assert read_from < expires_at <= read_by + LEASE + 0.05, "the claim lapsed while it ran"
            expiries.append(expires_at)
            # A fresh agent on the session, as another worker would build it.
            intruder = slow_agent(str(db), session_id, str(intruder_log), LEASE)
            if not intruder.needs_recovery:  # the run ended between the two loads
                assert not intruder.is_paused
                break
            recovering = refused(intruder.recover, owner)
            starting = refused(partial(intruder, "start something else"), owner)
            tries += recovering and starting  # refused for the owner's claim, both times
            ran = time.monotonic() - began
            if tries >= 10 and len(set(expiries)) >= 4 and ran >= LEASES * LEASE:
                stop.touch()  # seen long enough: the tool may end
            assert ran < 120, f"the tool still runs after {ran:.0f} s: {tries} tries, {expiries}"
            time.sleep(0.05)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    print(f"\n{tries} takeover attempts refused; the claim was renewed {len(set(expiries))} times")
    assert child.returncode == 0, err
    assert json.loads(out) == {"stop_reason": "end_turn", "reply": "done"}, out
    assert tries >= 10, f"only {tries} takeover attempts refused for the claim during the tool"
    assert expiries == sorted(expiries), "the claim's expiry went backwards"
    renewals = len(set(expiries))
    assert renewals >= 4 and expiries[-1] - expiries[0] >= LEASE, (
        f"the claim was not renewed while the tool ran: {expiries}"
    )
    stored = load(db, session_id)
    assert stored is not None and stored.claim is None and stored.pause is None
    [result] = tool_results(stored)
    assert result["tool_use_id"] == "t_slow" and result["status"] == "success", result
    assert "worked until told to stop" in json.dumps(result)
    assert log.read_text().split() == ["start", str(child.pid), "end", str(child.pid)]
    assert not intruder_log.exists(), "another process ran the tool"
    after = slow_agent(str(db), session_id, str(intruder_log), LEASE)
    assert not after.needs_recovery and not after.is_paused
    assert_valid(after)


# --- claims left by runs that stopped ------------------------------------------------------


class Recorder:
    """An agent whose tool records each run and whose after-tool hook can copy the stored
    session mid-run (journal and claim as a run that stopped there would leave them)."""

    def __init__(self, db: Path, log: Path) -> None:
        self.db, self.log = db, log
        self.snapshot: StoredSession | None = None

    def build(self, session_id: str, turns: list[Any], *, snapshot: bool = False) -> Agent:
        store = SQLiteStore(self.db)

        @tool
        def record(item: str) -> str:
            """Record an item.

            Args:
                item: What to record.
            """
            with self.log.open("a") as f:
                f.write(f"{item}\n")
            return f"recorded {item}"

        async def copy_session(event: AfterToolCallEvent) -> None:
            if snapshot and self.snapshot is None:
                self.snapshot = await store.load(session_id)

        agent = Agent(
            ScriptedModel(turns),
            tools=[record],
            session=store,
            session_id=session_id,
            session_lease=LEASE,
        )
        agent.hooks.add_callback(AfterToolCallEvent, copy_session)
        return agent


@pytest.fixture
def stopped(tmp_path: Path) -> Iterator[tuple[Recorder, StoredSession]]:
    """A stored session as a run leaves it when its process stops in the after-tool hooks:
    the journal (the tool's result kept) and the run's claim."""
    recorder = Recorder(tmp_path / "s.db", tmp_path / "log")
    agent = recorder.build(
        "origin", [[ToolUse("t1", "record", {"item": "a"})], "done"], snapshot=True
    )
    assert str(agent("go")) == "done"
    snap = recorder.snapshot
    assert snap is not None and snap.claim is not None and snap.claim["pid"] == os.getpid()
    assert snap.pause is not None and snap.pause["interrupts"] == []  # a journal
    yield recorder, snap


def plant(db: Path, session_id: str, snap: StoredSession, **claim: Any) -> dict[str, Any]:
    """Store a copy of ``snap`` as ``session_id``, with its claim changed by ``claim``."""
    assert snap.claim is not None
    planted = {**snap.claim, **claim}
    update = SessionUpdate(
        expected_version=0,
        first_index=0,
        new_messages=snap.messages,
        pause=snap.pause,
        pending=[],
        tools=snap.tools,
        format_version=snap.format_version,
        state=snap.state,
        claim=planted,
    )
    with SQLiteStore(db) as store:
        asyncio.run(store.save(session_id, update))
    return planted


def assert_recovered(recorder: Recorder, session_id: str, assert_valid: Any) -> None:
    agent = recorder.build(session_id, ["done"])
    assert agent.needs_recovery
    result = agent.recover()
    assert result.stop_reason == "end_turn" and str(result) == "done"
    assert_valid(agent)
    results = [b for m in agent.messages for b in m.content if isinstance(b, ToolResult)]
    assert [(r.status, r.text) for r in results] == [("success", "recorded a")]
    assert recorder.log.read_text() == "a\n", "the tool ran again"
    stored = load(recorder.db, session_id)
    assert stored is not None and stored.claim is None and stored.pause is None


def test_a_claim_from_another_machine_holds_until_it_expires(
    stopped: tuple[Recorder, StoredSession], assert_valid: Any
) -> None:
    recorder, snap = stopped
    owner = "elsewhere:4242"
    foreign = {"machine": "elsewhere/boot/ns", "owner": owner, "pid": 4242, "since": time.time()}
    plant(recorder.db, "foreign", snap, **foreign, expires_at=time.time() + 600)
    for _ in range(3):  # its process cannot be checked from here: it holds
        agent = recorder.build("foreign", ["taken over"])
        assert agent.needs_recovery
        with pytest.raises(SessionConflictError, match=owner):
            agent.recover()
        with pytest.raises(SessionConflictError, match=owner):
            agent("start something else")
    # The same claim once its lease has run out (by 20 ms), as a copy of the session.
    plant(recorder.db, "foreign-lapsed", snap, **foreign, expires_at=time.time() - 0.02)
    assert_recovered(recorder, "foreign-lapsed", assert_valid)  # right after it ran out


def test_a_claim_of_a_dead_process_on_this_machine_is_recoverable_at_once(
    stopped: tuple[Recorder, StoredSession], assert_valid: Any
) -> None:
    recorder, snap = stopped
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # reaped: its pid names no process
    plant(
        recorder.db,
        "dead",
        snap,
        pid=gone.pid,
        owner=f"{socket.gethostname()}:{gone.pid}",
        since=time.time(),
        expires_at=time.time() + 600,
    )
    assert_recovered(recorder, "dead", assert_valid)


def test_a_claim_of_a_live_process_on_this_machine_holds_until_it_dies(
    stopped: tuple[Recorder, StoredSession], assert_valid: Any
) -> None:
    recorder, snap = stopped
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        owner = f"{socket.gethostname()}:{alive.pid}"
        plant(
            recorder.db,
            "alive",
            snap,
            pid=alive.pid,
            owner=owner,
            since=time.time(),
            expires_at=time.time() + 600,
        )
        agent = recorder.build("alive", ["taken over"])
        with pytest.raises(SessionConflictError, match=owner):
            agent.recover()
    finally:
        alive.kill()
        alive.wait()
    assert_recovered(recorder, "alive", assert_valid)


# --- every exit lets go of the claim --------------------------------------------------------


class Boom(Exception):
    pass


RAISING: dict[str, type[HookEvent]] = {
    "before_invocation": BeforeInvocationEvent,
    "before_tool": BeforeToolCallEvent,
    "after_tool": AfterToolCallEvent,
    "after_model": AfterModelCallEvent,
}


def _probing_agent(
    db: Path, session_id: str, seen: list[dict[str, Any] | None], turns: list[Any]
) -> Agent:
    """An agent whose tool notes the stored claim while it runs (a run does hold one)."""
    store = SQLiteStore(db)

    @tool
    async def probe() -> str:
        """Look at the stored session."""
        stored = await store.load(session_id)
        seen.append(None if stored is None else stored.claim)
        return "probed"

    return Agent(ScriptedModel(turns), tools=[probe], session=store, session_id=session_id)


@pytest.mark.parametrize("where", list(RAISING))
def test_a_run_that_raises_lets_go_of_its_claim(
    tmp_path: Path, where: str, assert_valid: Any
) -> None:
    db, session_id = tmp_path / "r.db", f"raise-{where}"
    seen: list[dict[str, Any] | None] = []
    agent = _probing_agent(db, session_id, seen, [[ToolUse("t1", "probe", {})], "done"])
    claims: list[dict[str, Any] | None] = []

    async def boom(event: HookEvent) -> None:
        with SQLiteStore(db) as store:
            stored = await store.load(session_id)
        claims.append(None if stored is None else stored.claim)
        raise Boom(where)

    agent.hooks.add_callback(RAISING[where], boom)
    with pytest.raises(Boom):
        agent("go")
    assert claims and claims[0] is not None and claims[0]["pid"] == os.getpid(), (
        "the run held no claim when the hook raised"
    )
    assert all(c is not None for c in seen)
    stored = load(db, session_id)
    assert stored is not None and stored.claim is None, f"claim left: {stored}"
    fresh = _probing_agent(db, session_id, [], ["fine"])
    assert not fresh.needs_recovery and not fresh.is_paused
    assert_valid(fresh)
    assert str(fresh("again")) == "fine"  # the session takes a new run at once


def test_a_resumed_run_that_raises_lets_go_of_its_claim(tmp_path: Path) -> None:
    db, session_id = tmp_path / "r.db", "raise-on-resume"
    seen: list[dict[str, Any] | None] = []

    def build() -> Agent:
        agent = _probing_agent(db, session_id, seen, [[ToolUse("t1", "probe", {})], "done"])

        def ask(event: BeforeToolCallEvent) -> None:
            if event.interrupt("approve") == "boom":
                raise Boom("after the answer")

        agent.hooks.add_callback(BeforeToolCallEvent, ask)
        return agent

    [question] = build()("go").interrupts
    with pytest.raises(Boom):
        build().resume({question.id: "boom"})
    stored = load(db, session_id)
    assert stored is not None and stored.claim is None, f"claim left: {stored}"
    fresh = build()
    assert not fresh.needs_recovery


@pytest.mark.parametrize("resumed", [False, True], ids=["prompt", "resume"])
async def test_a_cancelled_run_lets_go_of_its_claim(
    tmp_path: Path, resumed: bool, assert_valid: Any
) -> None:
    db, session_id = tmp_path / "k.db", "cancelled"
    started = asyncio.Event()
    claims: list[dict[str, Any] | None] = []

    def build() -> Agent:
        store = SQLiteStore(db)

        @tool
        async def wait() -> str:
            """Wait a long time."""
            stored = await store.load(session_id)
            claims.append(None if stored is None else stored.claim)
            started.set()
            await asyncio.sleep(30)
            return "waited"

        agent = Agent(
            ScriptedModel([[ToolUse("t1", "wait", {})], "done"]),
            tools=[wait],
            session=store,
            session_id=session_id,
        )
        if resumed:
            agent.hooks.add_callback(BeforeToolCallEvent, lambda e: e.interrupt("approve"))
        return agent

    agent = build()
    if resumed:
        [question] = (await agent.invoke_async("go")).interrupts
        agent = build()
        task = asyncio.ensure_future(agent.resume_async({question.id: True}))
    else:
        task = asyncio.ensure_future(agent.invoke_async("go"))
    await asyncio.wait_for(started.wait(), 10)
    assert claims and claims[0] is not None and claims[0]["pid"] == os.getpid()
    agent.cancel()
    result = await asyncio.wait_for(task, 10)
    assert result.stop_reason == "cancelled"
    with SQLiteStore(db) as store:
        stored = await store.load(session_id)
    assert stored is not None and stored.claim is None and stored.pause is None, stored
    assert_valid(agent)
    [closed] = [b for m in agent.messages for b in m.content if isinstance(b, ToolResult)]
    assert closed.status == "error" and "may have had effects" in closed.text
