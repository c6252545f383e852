"""Claims and processes: one run at a time, racing resumers, runs killed mid-way."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from ..._messages import ToolUse
from ...errors import SessionConflictError
from ...sessions import SessionStore, open_store
from ._base import StoreHooks, _close
from ._support import _runs, _text, _update, build_agent

__all__ = ["ProcessChecks"]

_CHILD = textwrap.dedent(
    """
    import json, os, signal, sys, time
    from pathlib import Path
    from interlude.sessions import open_store
    from interlude.testing.conformance import build_agent
    from interlude.errors import SessionConflictError

    mode, url, sid, counter, arg = sys.argv[1:6]
    store = open_store(url)
    if mode == "die-mid-run":
        from interlude.hooks import BeforeToolCallEvent
        agent = build_agent(store, sid, [[__TOOL_USE__]], Path(counter))
        die = lambda event: os.kill(os.getpid(), signal.SIGKILL)  # noqa: E731
        agent.hooks.add_callback(BeforeToolCallEvent, die)
        agent("record it")
    if mode == "pause-and-die":
        agent = build_agent(store, sid, [[__TOOL_USE__]], Path(counter))
        result = agent("record it")
        print(json.dumps({"stop": result.stop_reason}), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    agent = build_agent(store, sid, ["done"], Path(counter))
    iid = agent.interrupts[0].id
    barrier = Path(arg)
    (barrier / str(os.getpid())).touch()
    deadline = time.time() + 20
    while len(list(barrier.iterdir())) < 2 and time.time() < deadline:
        time.sleep(0.005)
    try:
        outcome = agent.resume({iid: True}).stop_reason
    except SessionConflictError as exc:
        outcome = "conflict"
    print(json.dumps({"outcome": outcome}), flush=True)
    """
)

_SAVER = textwrap.dedent(
    """
    import asyncio, os, sys, time
    from interlude.errors import SessionConflictError
    from interlude.sessions import SessionUpdate, open_store

    async def main():
        url, barrier, who = sys.argv[1:4]
        store = open_store(url)
        seen = await store.load("race")
        open(os.path.join(barrier, who), "w").close()
        deadline = time.time() + 30
        while len(os.listdir(barrier)) < 2 and time.time() < deadline:
            time.sleep(0.002)
        update = SessionUpdate(expected_version=seen.version, first_index=len(seen.messages),
                               new_messages=[{"role": "user", "content": [{"type": "text",
                               "text": who}]}], pause=None, pending=[], tools=[],
                               format_version=1)
        try:
            await store.save("race", update)
            print("won")
        except SessionConflictError:
            print("lost")

    asyncio.run(main())
    """
)
"""A process that loads session ``race``, says so in the barrier folder, waits for the other
process to say so too, then saves one message over the version it loaded."""


class ProcessChecks(StoreHooks):
    """Run claims, fresh agents resuming, and several agents or processes on one session."""

    def test_claim_round_trip(self, tmp_path: Path) -> None:
        store = self.store_for(SessionStore, tmp_path)
        claim = {"owner": "host:1", "token": "t1", "since": 1.5, "expires_at": 2.5}
        pause = {"p": 1}
        asyncio.run(store.save("s1", _update(0, 0, [_text(0)], pause=pause, claim=claim)))
        got = asyncio.run(store.load("s1"))
        assert got is not None and got.claim == claim and got.pause == pause
        other = {"owner": "host:2", "token": "t2", "since": 3.0, "expires_at": None}
        asyncio.run(store.save("s1", _update(1, 1, [], pause=pause, claim=other)))
        got = asyncio.run(store.load("s1"))
        assert got is not None and got.claim == other and got.pause == pause  # replaced
        try:  # a conflicting save leaves the stored claim as it was
            asyncio.run(store.save("s1", _update(1, 1, [], claim={"owner": "late"})))
        except SessionConflictError:
            pass
        else:
            raise AssertionError("a stale save was accepted")
        got = asyncio.run(store.load("s1"))
        assert got is not None and got.version == 2 and got.claim == other
        asyncio.run(store.save("s1", _update(2, 1, [], pause=pause)))  # claim=None clears it
        got = asyncio.run(store.load("s1"))
        assert got is not None and got.claim is None and got.pause == pause
        asyncio.run(store.save("s2", _update(0, 0, [_text(0)])))  # never claimed
        got = asyncio.run(store.load("s2"))
        assert got is not None and got.claim is None

    def test_fresh_agent_resumes_once(self, tmp_path: Path) -> None:
        store = self.store_for(SessionStore, tmp_path)
        counter = tmp_path / "runs"
        first = build_agent(store, "s1", [[ToolUse("t1", "record", {"item": "a"})]], counter)
        paused = first("record a")
        assert paused.stop_reason == "interrupt"
        fresh = build_agent(store, "s1", ["done"], counter)
        assert fresh.is_paused and [i.id for i in fresh.interrupts] == [paused.interrupts[0].id]
        assert fresh.interrupts[0].tool_use == ToolUse("t1", "record", {"item": "a"})
        assert str(fresh.resume({paused.interrupts[0].id: True})) == "done"
        assert _runs(counter) == ["a"]
        again = build_agent(store, "s1", [], counter)
        assert not again.is_paused
        assert [m.role for m in again.messages] == ["user", "assistant", "user", "assistant"]
        assert again.messages == fresh.messages

    def test_two_resumers_exactly_one_proceeds(self, tmp_path: Path) -> None:
        store = self.store_for(SessionStore, tmp_path)
        counter = tmp_path / "runs"
        paused = build_agent(store, "race", [[ToolUse("t1", "record", {"item": "a"})]], counter)(
            "go"
        )
        iid = paused.interrupts[0].id
        url = self.store_url(tmp_path)
        if url is None:  # one process: two agents racing on one event loop
            a = build_agent(store, "race", ["done"], counter)
            b = build_agent(store, "race", ["done"], counter)

            async def both() -> list[Any]:
                return list(
                    await asyncio.gather(
                        a.resume_async({iid: True}),
                        b.resume_async({iid: True}),
                        return_exceptions=True,
                    )
                )

            outcomes = [
                "conflict" if isinstance(o, SessionConflictError) else o.stop_reason
                for o in asyncio.run(both())
            ]
        else:
            barrier = tmp_path / "barrier"
            barrier.mkdir()
            procs = [_child("race", url, "race", counter, str(barrier)) for _ in range(2)]
            outcomes = [json.loads(_finish(p))["outcome"] for p in procs]
        assert sorted(outcomes) == ["conflict", "end_turn"], outcomes
        assert _runs(counter) == ["a"]
        final = build_agent(store, "race", [], counter)
        assert not final.is_paused and str(final.messages[-1].text) == "done"

    def test_killed_right_after_a_pause_resumes_elsewhere(self, tmp_path: Path) -> None:
        url = self.store_url(tmp_path)
        if url is None:
            import pytest

            pytest.skip("this store lives in one process")
        store = self.store_for(SessionStore, tmp_path)
        counter = tmp_path / "runs"
        proc = _child("pause-and-die", url, "killed", counter, "-")
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == -9, proc.returncode
        assert json.loads(out.splitlines()[0]) == {"stop": "interrupt"}
        fresh = build_agent(store, "killed", ["done"], counter)
        assert fresh.is_paused
        assert fresh.resume({fresh.interrupts[0].id: True}).stop_reason == "end_turn"
        assert _runs(counter) == ["a"]

    def test_a_run_in_progress_keeps_other_agents_out(self, tmp_path: Path) -> None:
        from ...hooks import BeforeToolCallEvent

        store = self.store_for(SessionStore, tmp_path)
        counter = tmp_path / "runs"
        seen: list[str] = []
        agent = build_agent(store, "busy", [[ToolUse("t1", "record", {"item": "a"})]], counter)

        def meanwhile(event: BeforeToolCallEvent) -> None:  # mid-run: another agent loads
            other = build_agent(store, "busy", ["hi"], counter)
            try:
                other("a second run")
            except SessionConflictError as exc:
                seen.append(str(exc))

        agent.hooks.add_callback(BeforeToolCallEvent, meanwhile)
        assert agent("go").stop_reason == "interrupt"
        assert len(seen) == 1 and "busy" in seen[0] and "being run" in seen[0], seen
        later = build_agent(store, "busy", ["done"], counter)
        assert later.is_paused  # the first run's pause, untouched by the refused one
        assert later.resume({later.interrupts[0].id: True}).stop_reason == "end_turn"
        assert _runs(counter) == ["a"]

    def test_a_run_killed_mid_step_is_recovered(self, tmp_path: Path) -> None:
        url = self.store_url(tmp_path)
        if url is None:
            import pytest

            pytest.skip("this store lives in one process")
        store = self.store_for(SessionStore, tmp_path)
        counter = tmp_path / "runs"
        proc = _child("die-mid-run", url, "died", counter, "-")  # killed in a before-tool hook
        proc.communicate(timeout=60)
        assert proc.returncode == -9, proc.returncode
        # On the same machine a dead claimant is known at once; elsewhere after the lease.
        recovered = build_agent(store, "died", ["hello"], counter)
        assert recovered.needs_recovery and not recovered.is_paused
        assert [m.role for m in recovered.messages] == ["user", "assistant"]
        paused = recovered.recover()  # the hooks that were running run again
        assert paused.stop_reason == "interrupt" and paused.interrupts[0].name == "approve"
        assert _runs(counter) == []  # nothing had run
        final = recovered.resume({paused.interrupts[0].id: True})
        assert str(final) == "hello" and _runs(counter) == ["a"]
        assert [m.role for m in build_agent(store, "died", [], counter).messages] == [
            "user",
            "assistant",
            "user",
            "assistant",
        ]

    def test_two_store_objects_share_one_place(self, tmp_path: Path) -> None:
        url = self.store_url(tmp_path)
        if url is None:
            import pytest

            pytest.skip("this store lives in one object")
        one = self.store_for(SessionStore, tmp_path)
        two = open_store(url)
        try:
            asyncio.run(one.save("s", _update(0, 0, [_text(0)])))
            seen = asyncio.run(two.load("s"))
            assert seen is not None and seen.version == 1 and seen.messages == [_text(0)]
            asyncio.run(two.save("s", _update(1, 1, [_text(1)], state={"by": "two"})))
            try:  # the first object's view is stale now: its save writes nothing
                asyncio.run(one.save("s", _update(1, 1, [_text(2)], state={"by": "one"})))
            except SessionConflictError:
                pass
            else:
                raise AssertionError("a save over a version another store object replaced won")
            for store in (one, two):
                loaded = asyncio.run(store.load("s"))
                assert loaded is not None and loaded.version == 2
                assert loaded.messages == [_text(0), _text(1)] and loaded.state == {"by": "two"}
        finally:
            _close(two)

    def test_two_processes_saving_one_version_one_wins(self, tmp_path: Path) -> None:
        url = self.store_url(tmp_path)
        if url is None:
            import pytest

            pytest.skip("this store lives in one process")
        store = self.store_for(SessionStore, tmp_path)
        asyncio.run(store.save("race", _update(0, 0, [_text(0)])))
        barrier = tmp_path / "save-barrier"
        barrier.mkdir()
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _SAVER, url, str(barrier), who],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for who in ("p1", "p2")
        ]
        outcomes = [_finish(p) for p in procs]
        assert sorted(outcomes) == ["lost", "won"], outcomes
        final = asyncio.run(store.load("race"))
        winner = "p1" if outcomes[0] == "won" else "p2"
        assert final is not None and final.version == 2
        assert final.messages == [
            _text(0),
            {"role": "user", "content": [{"type": "text", "text": winner}]},
        ]


def _child(mode: str, url: str, sid: str, counter: Path, arg: str) -> subprocess.Popen[str]:
    code = _CHILD.replace("__TOOL_USE__", 'ToolUse("t1", "record", {"item": "a"})')
    code = "from interlude import ToolUse\n" + code
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", code, mode, url, sid, str(counter), arg],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _finish(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=60)
    if proc.returncode != 0:
        raise AssertionError(f"child failed ({proc.returncode}):\n{err}")
    return out.strip().splitlines()[-1]
