"""The conformance suite every session store passes.

Subclass :class:`SessionStoreConformance` in a pytest test module and say how to make your
store; pytest then runs every check below against it::

    from interlude.testing.conformance import SessionStoreConformance

    class TestMyStore(SessionStoreConformance):
        def make_store(self, tmp_path):
            return MyStore(tmp_path / "sessions")

        def store_url(self, tmp_path):  # for the checks that use several processes
            return None  # or a URL that interlude.sessions.open_store() understands

        def corrupt(self, store, tmp_path, session_id):
            ...  # damage the stored session (garbage JSON where a message is kept)

Checks: round trip, run claims, append-only writes, compare-and-swap conflicts, resume by a
fresh agent, two resumers racing (processes when the store has a URL), a process killed right
after a pause, pending-interrupt queries (one corrupt session hides no other's question: a
store that leaves a session out of ``pending_interrupts`` names it in ``store.skipped``, a
sequence of ``(session_id, why)``), listing and deleting, bad ids, corrupt data and unknown
versions; agent names, audit trails (appended with the save, kept across store objects,
gone with the session) and expired interrupts (earliest deadline first); recorded answers (seq
order, the first answer wins, cleared up to a seq that is never reused, gone with the session,
untouched by saves) and the sessions a worker has to resume.
The checks are sync functions (they drive the async store API with ``asyncio.run``), so no
pytest plugin is needed. Stores must count the JSON bytes they write in ``bytes_written``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from .._interrupt import Interrupt, interrupt_id
from .._messages import ToolUse
from ..errors import (
    InvalidSessionIdError,
    SessionConflictError,
    SessionCorruptError,
    SessionError,
    StateFormatError,
)
from ..sessions._protocol import SessionStore, SessionUpdate, StoredSession
from ._models import ScriptedModel

__all__ = ["SessionStoreConformance", "build_agent"]

BAD_IDS = ["", "../x", "/etc/passwd", "a/b", "a\\b", ".hidden", "..", "x" * 201, "a\x00b", "-x"]


def build_agent(
    store: SessionStore,
    session_id: str,
    turns: list[Any],
    counter: Path,
    messages: Any = (),
    lease: float = 600.0,
) -> Any:
    """The agent every check uses: a ``record`` tool (it appends a line to ``counter``, so runs
    can be counted across processes) behind a before-tool approval hook."""
    from .. import Agent, tool
    from ..hooks import BeforeToolCallEvent

    @tool
    def record(item: str) -> str:
        """Record an item.

        Args:
            item: What to record.
        """
        with counter.open("a") as f:
            f.write(f"{item}\n")
        return f"recorded {item}"

    def approve(event: BeforeToolCallEvent) -> None:
        if not event.interrupt("approve", reason={"item": event.tool_use.input.get("item")}):
            event.cancel("not approved")

    agent = Agent(
        ScriptedModel(turns),
        tools=[record],
        messages=messages,
        session=store,
        session_id=session_id,
        session_lease=lease,
    )
    agent.hooks.add_callback(BeforeToolCallEvent, approve)
    return agent


def _update(version: int, first: int, messages: list[Any], **kw: Any) -> SessionUpdate:
    return SessionUpdate(
        expected_version=version,
        first_index=first,
        new_messages=messages,
        pause=kw.get("pause"),
        pending=kw.get("pending", []),
        tools=kw.get("tools", ["record"]),
        format_version=kw.get("format_version", 1),
        state=kw.get("state"),
        claim=kw.get("claim"),
        agent=kw.get("agent"),
        audit=kw.get("audit", []),
    )


async def _loaded(store: SessionStore, session_id: str) -> StoredSession:
    got = await store.load(session_id)
    assert got is not None, f"session {session_id!r} was not stored"
    return got


async def _refused(store: SessionStore, session_id: str, update: SessionUpdate) -> None:
    try:
        await store.save(session_id, update)
    except SessionConflictError:
        return
    raise AssertionError(f"a stale save was accepted: {update}")


def _question(
    iid: str, expires_at: float | None, raised_at: float = 1.0, **kw: Any
) -> dict[str, Any]:
    return Interrupt(
        id=iid,
        name="ask",
        source="before_model_call",
        raised_at=raised_at,
        expires_at=expires_at,
        **kw,
    ).to_dict()


def _text(i: int, size: int = 10) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": f"{i}:" + "x" * size}]}


def _runs(counter: Path) -> list[str]:
    return counter.read_text().split() if counter.exists() else []


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


class SessionStoreConformance:
    """Checks a session store must pass. Subclass it and implement the three methods below."""

    def make_store(self, tmp_path: Path) -> SessionStore:
        raise NotImplementedError

    def store_url(self, tmp_path: Path) -> str | None:
        """A URL for :func:`interlude.sessions.open_store` that reaches the same store from
        another process, or None if the store lives in this process only."""
        return None

    def corrupt(self, store: SessionStore, tmp_path: Path, session_id: str) -> None:
        """Damage the stored session ``session_id`` so that loading it must fail."""
        raise NotImplementedError

    # --- the store protocol ------------------------------------------------------------------

    def test_round_trip(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        assert asyncio.run(store.load("s1")) is None
        interrupt = Interrupt(id="v1:x:m1:abc", name="ask", source="before_model_call")
        pause = {"step": {"kind": "before_model_call"}, "note": [1, 2.5, None, "é"]}
        update = _update(
            0,
            0,
            [_text(0), _text(1)],
            pause=pause,
            pending=[interrupt.to_dict()],
            state={"k": {"n": 1}},
        )
        assert asyncio.run(store.save("s1", update)) == 1
        got = asyncio.run(store.load("s1"))
        assert got is not None
        assert (got.session_id, got.version, got.format_version) == ("s1", 1, 1)
        assert got.messages == [_text(0), _text(1)]
        assert got.pause == pause
        assert got.state == {"k": {"n": 1}}
        assert got.tools == ["record"]

    def test_pending_none_leaves_the_index_as_it_is(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        question = Interrupt(
            id=interrupt_id("before_tool_call", "t1", "approve"),
            name="approve",
            source="before_tool_call",
            raised_at=5.0,
        ).to_dict()

        async def go() -> tuple[int, int, int]:
            v = await store.save("kept", _update(0, 0, [_text(0)], pending=[question]))
            v = await store.save("kept", _update(v, 1, [_text(1)], pending=None))
            kept = len(await store.pending_interrupts())
            v = await store.save("kept", _update(v, 2, [], pending=[]))
            cleared = len(await store.pending_interrupts())
            await store.save("kept", _update(v, 2, [], pending=None))
            return kept, cleared, len(await store.pending_interrupts())

        assert asyncio.run(go()) == (1, 0, 0)

    def test_claim_round_trip(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
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

    def test_append_only_writes(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        history = [_text(i, 1000) for i in range(100)]
        asyncio.run(store.save("s1", _update(0, 0, history, state={})))
        before = store.bytes_written  # type: ignore[attr-defined]
        asyncio.run(store.save("s1", _update(1, 100, [_text(100)], pause={"p": 1})))
        written = store.bytes_written - before  # type: ignore[attr-defined]
        assert 0 < written < 2_000, f"a one-message save wrote {written} bytes"
        got = asyncio.run(store.load("s1"))
        assert got is not None and got.version == 2
        assert got.messages == [*history, _text(100)]
        assert got.state == {}  # state=None in an update leaves it as it was

    def test_compare_and_swap_conflicts_write_nothing(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        asyncio.run(store.save("s1", _update(0, 0, [_text(0)])))
        for bad in (
            _update(0, 0, [_text(9)]),
            _update(5, 1, [_text(9)]),
            _update(1, 0, [_text(9)]),
        ):
            try:
                asyncio.run(store.save("s1", bad))
            except SessionConflictError as exc:
                assert "s1" in str(exc)
            else:
                raise AssertionError(f"a stale save was accepted: {bad}")
        got = asyncio.run(store.load("s1"))
        assert got is not None and got.version == 1 and got.messages == [_text(0)]
        try:  # a new session must start at message 0
            asyncio.run(store.save("s2", _update(0, 1, [_text(1)])))
        except SessionConflictError:
            pass
        else:
            raise AssertionError("a first save appending at message 1 was accepted")
        assert asyncio.run(store.load("s2")) is None
        assert asyncio.run(store.list_sessions()) == ["s1"]

    def test_list_and_delete(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        for sid in ("b", "a", "c"):
            asyncio.run(store.save(sid, _update(0, 0, [_text(0)])))
        assert asyncio.run(store.list_sessions()) == ["a", "b", "c"]
        asyncio.run(store.delete("b"))
        asyncio.run(store.delete("never-there"))
        assert asyncio.run(store.list_sessions()) == ["a", "c"]
        assert asyncio.run(store.load("b")) is None
        assert asyncio.run(store.save("b", _update(0, 0, [_text(1)]))) == 1

    def test_bad_ids_are_refused(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        for bad in BAD_IDS:
            calls = [store.load(bad), store.save(bad, _update(0, 0, [])), store.delete(bad)]
            for call in calls:
                try:
                    asyncio.run(call)
                except InvalidSessionIdError as exc:
                    assert repr(bad)[:20] in str(exc) or bad == ""
                else:
                    raise AssertionError(f"session id {bad!r} was accepted")
            try:
                build_agent(store, bad, [], tmp_path / "c")
            except InvalidSessionIdError:
                pass
            else:
                raise AssertionError(f"Agent accepted session id {bad!r}")
        assert asyncio.run(store.list_sessions()) == []

    def test_corrupt_data_is_reported_not_half_loaded(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        counter = tmp_path / "runs"
        agent = build_agent(store, "broken", [[ToolUse("t1", "record", {"item": "a"})]], counter)
        agent("go")
        self.corrupt(store, tmp_path, "broken")
        for attempt in range(2):
            try:
                if attempt == 0:
                    asyncio.run(store.load("broken"))
                    # a store may leave shape checks of message contents to the agent
                build_agent(store, "broken", [], counter)
            except SessionCorruptError as exc:
                assert "broken" in str(exc)
                break
        else:
            raise AssertionError("a corrupt session loaded without error")
        assert "broken" in asyncio.run(store.list_sessions())

    def test_unknown_format_version_is_refused(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        asyncio.run(store.save("future", _update(0, 0, [_text(0)], format_version=99, state={})))
        try:
            build_agent(store, "future", [], tmp_path / "c")
        except SessionCorruptError as exc:
            assert "future" in str(exc) and "99" in str(exc)
        else:
            raise AssertionError("a session of format version 99 was loaded")

    def corrupt_answers(self, store: SessionStore, tmp_path: Path, session_id: str) -> None:
        """Damage the recorded answers of ``session_id`` (optional: the check skips without)."""
        raise NotImplementedError

    # --- agents on the store -----------------------------------------------------------------

    def test_fresh_agent_resumes_once(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
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

    def test_pause_write_does_not_grow_with_history(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        short = _pause_bytes(store, tmp_path, "short", 10)
        long = _pause_bytes(store, tmp_path, "long", 1000)
        assert long <= 2 * short, f"a pause after 1000 messages wrote {long} B, after 10 {short} B"

    def test_two_resumers_exactly_one_proceeds(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
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
        store = self.make_store(tmp_path)
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
        from ..hooks import BeforeToolCallEvent

        store = self.make_store(tmp_path)
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
        store = self.make_store(tmp_path)
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

    def test_pending_interrupt_queries(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        marks = []
        for sid, item in (("p1", "a"), ("p2", "b"), ("p3", "c")):
            agent = build_agent(
                store, sid, [[ToolUse("t1", "record", {"item": item})]], tmp_path / sid
            )
            agent("go")
            marks.append(time.time())
            time.sleep(0.02)
        done = build_agent(store, "done", ["hello"], tmp_path / "d")
        done("hi")  # a finished session has nothing pending
        everything = asyncio.run(store.pending_interrupts())
        assert [e.session_id for e in everything] == ["p1", "p2", "p3"]
        approve = interrupt_id("before_tool_call", "t1", "approve")
        assert all(e.interrupt.id == approve and e.interrupt.name == "approve" for e in everything)
        assert [e.interrupt.tool_use.input["item"] for e in everything] == ["a", "b", "c"]  # type: ignore[union-attr]
        assert [e.tool_name for e in everything] == ["record"] * 3
        q = store.pending_interrupts
        assert len(asyncio.run(q(name="approve"))) == 3
        assert asyncio.run(q(name="other")) == []
        assert len(asyncio.run(q(tool_name="record"))) == 3
        assert asyncio.run(q(tool_name="nope")) == []
        assert [e.session_id for e in asyncio.run(q(older_than=marks[0]))] == ["p1"]
        assert [e.session_id for e in asyncio.run(q(newer_than=marks[1]))] == ["p3"]
        assert [e.session_id for e in asyncio.run(q(limit=2))] == ["p1", "p2"]
        resumer = build_agent(store, "p2", ["done"], tmp_path / "p2")
        resumer.resume({approve: True})
        assert [e.session_id for e in asyncio.run(q())] == ["p1", "p3"]

    # --- agent names, audit trails, deadlines -------------------------------------------------

    def test_agent_name_is_stored_kept_and_overwritten(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)

        async def go() -> tuple[list[str | None], str | None]:
            await store.save("s", _update(0, 0, [_text(0)]))  # saved without a name
            names = [(await _loaded(store, "s")).agent]
            v = await store.save("s", _update(1, 1, [], agent="triage"))
            names.append((await _loaded(store, "s")).agent)
            v = await store.save("s", _update(v, 1, [_text(1)]))  # None keeps the name
            names.append((await _loaded(store, "s")).agent)
            v = await store.save("s", _update(v, 2, [], agent="billing"))
            await _refused(store, "s", _update(1, 1, [], agent="late"))
            names.append((await _loaded(store, "s")).agent)
            await store.save("t", _update(0, 0, [], agent="first"))
            return names, (await _loaded(store, "t")).agent

        assert asyncio.run(go()) == ([None, "triage", "triage", "billing"], "first")

    def test_audit_entries_are_appended_with_the_save(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        a1 = {"event": "asked", "interrupt": "i1", "at": 1.5}
        a2 = {"event": "answered", "interrupt": "i1", "answer": {"ok": True, "note": "é"}}
        a3 = {"event": "expired", "interrupt": "i2", "nested": [1, None, "x", 2.5]}
        lost = {"event": "lost"}

        async def go() -> tuple[StoredSession, list[Any]]:
            assert await store.audit_trail("s") == []  # no such session
            v = await store.save("s", _update(0, 0, [_text(0)], audit=[a1]))
            assert await store.audit_trail("s") == [a1]
            v = await store.save("s", _update(v, 1, [_text(1)]))  # no entries: none added
            await _refused(store, "s", _update(1, 1, [_text(9)], audit=[lost]))  # stale version
            await _refused(store, "s", _update(v, 0, [], audit=[lost]))  # wrong message index
            await _refused(store, "s", _update(0, 0, [], audit=[lost]))  # "new" but stored
            v = await store.save("s", _update(v, 2, [], audit=[a2, a3]))
            try:  # an entry that is not an object is refused before anything is written
                await store.save("s", _update(v, 2, [], audit=[lost, ["not", "an", "object"]]))
            except StateFormatError:
                pass
            else:
                raise AssertionError("an audit entry that is not an object was stored")
            await _refused(store, "new", _update(0, 1, [_text(1)], audit=[lost]))
            assert await store.audit_trail("new") == [] and await store.load("new") is None
            return await _loaded(store, "s"), await store.audit_trail("s")

        got, trail = asyncio.run(go())
        assert got.audit == trail == [a1, a2, a3]
        assert got.version == 3 and got.messages == [_text(0), _text(1)]

    def test_audit_and_agent_survive_reopening_the_store(self, tmp_path: Path) -> None:
        url = self.store_url(tmp_path)
        if url is None:
            import pytest

            pytest.skip("this store lives in one process")
        from ..sessions import open_store

        store = self.make_store(tmp_path)
        e1, e2, e3 = {"n": 1}, {"n": 2, "who": "ann"}, {"n": 3}
        asyncio.run(store.save("s", _update(0, 0, [_text(0)], agent="a", audit=[e1, e2])))
        getattr(store, "close", lambda: None)()
        again = self.make_store(tmp_path)  # a new store object on the same path or database
        assert asyncio.run(again.audit_trail("s")) == [e1, e2]
        asyncio.run(again.save("s", _update(1, 1, [], audit=[e3])))
        other = open_store(url)
        try:
            got = asyncio.run(_loaded(other, "s"))
            assert (got.agent, got.audit) == ("a", [e1, e2, e3])
            assert asyncio.run(other.audit_trail("s")) == [e1, e2, e3]
        finally:
            getattr(other, "close", lambda: None)()

    def test_delete_removes_the_audit_trail(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)

        async def go() -> tuple[list[Any], list[Any], list[Any], str | None]:
            pending = [_question("q", 5.0)]
            await store.save("s", _update(0, 0, [_text(0)], pending=pending, audit=[{"n": 1}]))
            await store.save("kept", _update(0, 0, [], audit=[{"kept": True}]))
            await store.delete("s")
            gone = await store.audit_trail("s"), await store.expired_interrupts(10.0)
            await store.save("s", _update(0, 0, [], audit=[{"n": 2}]))  # a new session
            again = await _loaded(store, "s")
            return [*gone], again.audit, await store.audit_trail("kept"), again.agent

        assert asyncio.run(go()) == ([[], []], [{"n": 2}], [{"kept": True}], None)

    def test_expired_interrupts(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)

        async def fill() -> None:
            b = [_question("i2", 30), _question("free", None)]  # an int deadline is a time too
            await store.save("b", _update(0, 0, [], pending=b))
            await store.save("b", _update(1, 0, [], pending=None))  # the index as it is
            await store.save("b", _update(2, 0, [], pending=[*b, _question("i1", 30.0)]))
            late = _question("late", 50.0, default="no", has_default=True)
            await store.save("a", _update(0, 0, [], pending=[_question("i9", 30.0), late]))
            await store.save("c", _update(0, 0, [], pending=[_question("first", 10, 20.0)]))
            await store.save("d", _update(0, 0, [], pending=[_question("never", None, 0.5)]))

        asyncio.run(fill())

        def expired(now: datetime | float, limit: int | None = None) -> list[tuple[str, str]]:
            found = asyncio.run(store.expired_interrupts(now, limit=limit))
            return [(e.session_id, e.interrupt.id) for e in found]

        at_30 = [("c", "first"), ("a", "i9"), ("b", "i1"), ("b", "i2")]
        assert expired(30.0) == at_30  # at the deadline counts; ties by session, then id
        assert expired(30) == at_30
        assert expired(datetime.fromtimestamp(30.0)) == at_30
        assert expired(29.999) == [("c", "first")]
        assert expired(9.0) == []
        assert expired(30.0, limit=2) == at_30[:2]
        assert expired(30.0, limit=0) == []
        everything = asyncio.run(store.expired_interrupts(1e12))
        assert [(e.session_id, e.interrupt.id) for e in everything] == [*at_30, ("a", "late")]
        assert [e.expires_at for e in everything] == [10.0, 30.0, 30.0, 30.0, 50.0]
        late = everything[-1].interrupt
        assert (late.default, late.has_default, late.name) == ("no", True, "ask")
        assert everything[0].raised_at == 20.0
        # questions without a deadline are pending, but never expire
        assert len(asyncio.run(store.pending_interrupts())) == 7
        ids = {e.interrupt.id for e in asyncio.run(store.expired_interrupts(float("1e300")))}
        assert not ids & {"free", "never"}
        asyncio.run(store.save("c", _update(1, 0, [], pending=[])))  # answered: not expired
        asyncio.run(store.save("a", _update(1, 0, [], pending=None)))  # still waiting
        assert expired(1e12) == [("a", "i9"), ("b", "i1"), ("b", "i2"), ("a", "late")]

    def test_a_corrupt_session_hides_no_other_pending_interrupt(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        for sid, item in (("broken", "a"), ("intact", "b")):
            agent = build_agent(
                store, sid, [[ToolUse("t1", "record", {"item": item})]], tmp_path / sid
            )
            assert agent("go").stop_reason == "interrupt"
        self.corrupt(store, tmp_path, "broken")
        found = asyncio.run(store.pending_interrupts())
        assert "intact" in [e.session_id for e in found], found
        # a store may still list the corrupt session's question (its index is intact) or
        # leave it out; if it leaves it out, it names it in ``skipped``, with a reason
        skipped = list(getattr(store, "skipped", ()))
        assert all(sid == "broken" and why for sid, why in skipped), skipped
        listed = {e.session_id for e in found}
        assert listed | {sid for sid, _ in skipped} == {"broken", "intact"}, (found, skipped)
        resumer = build_agent(store, "intact", ["done"], tmp_path / "intact")
        assert resumer.resume({resumer.interrupts[0].id: True}).stop_reason == "end_turn"
        assert [e.session_id for e in asyncio.run(store.pending_interrupts())] in ([], ["broken"])

    # --- recorded answers, sessions to resume -------------------------------------------------

    def test_pending_interrupts_carry_and_filter_by_agent_and_deadline(
        self, tmp_path: Path
    ) -> None:
        store = self.make_store(tmp_path)

        async def go() -> None:
            a = [_question("a1", 50.0, 1.0), _question("a2", None, 2.0)]
            await store.save("a", _update(0, 0, [], pending=a, agent="triage"))
            await store.save("b", _update(0, 0, [], pending=[_question("b1", 20, 3.0)]))
            c = [_question("c1", 10.0, 4.0)]
            await store.save("c", _update(0, 0, [], pending=c, agent="billing"))
            q = store.pending_interrupts
            got = [(e.session_id, e.interrupt.id, e.agent) for e in await q()]
            assert got == [("a", "a1", "triage"), ("a", "a2", "triage"), ("b", "b1", None),
                           ("c", "c1", "billing")]  # fmt: skip
            assert [e.interrupt.id for e in await q(agent="triage")] == ["a1", "a2"]
            assert await q(agent="nobody") == []
            assert [e.interrupt.id for e in await q(expiring_before=50.0)] == ["b1", "c1"]
            assert [e.interrupt.id for e in await q(expiring_before=50.0001)] == ["a1", "b1", "c1"]
            when = datetime.fromtimestamp(20.5)
            assert [e.interrupt.id for e in await q(expiring_before=when)] == ["b1", "c1"]
            assert [e.interrupt.id for e in await q(expiring_before=1e300, agent="triage")] == [
                "a1"
            ]
            assert [e.interrupt.id for e in await q(expiring_before=1e9, limit=1)] == ["a1"]
            assert [e.interrupt.id for e in await q(expiring_before=1e9, newer_than=3.5)] == ["c1"]
            expired = await store.expired_interrupts(100.0)
            assert [(e.interrupt.id, e.agent) for e in expired] == [
                ("c1", "billing"),
                ("b1", None),
                ("a1", "triage"),
            ]

        asyncio.run(go())

    def test_recorded_answers_first_answer_wins(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)

        def answer(iid: str, value: Any = True, by: str = "ann", at: float = 5.0) -> dict[str, Any]:
            return {"interrupt_id": iid, "answer": value, "by": by, "at": at, "shown": "d" + iid}

        async def refused(answers: list[dict[str, Any]], named: str) -> None:
            try:
                await store.record_answers("s", answers)
            except SessionConflictError as exc:
                assert named in str(exc) and "s" in str(exc)
            else:
                raise AssertionError(f"answers {answers} were recorded twice")

        async def go() -> None:
            await store.save("s", _update(0, 0, [_text(0)], pending=[_question("q1", None)]))
            assert await store.recorded_answers("s") == []
            got = await store.record_answers(
                "s", [answer("q1", {"ok": [1, None, "é"]}), answer("q2", "no", by="bob", at=6)]
            )
            assert [(a.seq, a.interrupt_id, a.answer, a.by, a.at, a.shown) for a in got] == [
                (1, "q1", {"ok": [1, None, "é"]}, "ann", 5.0, "dq1"),
                (2, "q2", "no", "bob", 6.0, "dq2"),
            ]
            assert await store.recorded_answers("s") == got
            await refused([answer("q3"), answer("q1", False)], "q1")  # q1 is taken
            await refused([answer("q4"), answer("q4", False)], "q4")  # twice in one call
            assert await store.recorded_answers("s") == got  # nothing of those was recorded
            third = await store.record_answers("s", [answer("q3", at=7.0)])
            assert [a.seq for a in third] == [3]
            try:
                await store.record_answers("nobody", [answer("q1")])
            except SessionConflictError:
                raise AssertionError("an unknown session is not a conflict") from None
            except SessionError as exc:
                assert "nobody" in str(exc)
            else:
                raise AssertionError("answers were recorded for a session that does not exist")
            assert await store.recorded_answers("nobody") == []
            assert "nobody" not in await store.list_sessions()
            # saves leave the recorded answers alone
            v = await store.save("s", _update(1, 1, [_text(1)], pending=[], claim={"x": 1}))
            await store.save("s", _update(v, 2, [], pending=None, state={"k": 1}))
            assert [a.seq for a in await store.recorded_answers("s")] == [1, 2, 3]

        asyncio.run(go())

    def test_clearing_answers_never_reuses_a_seq(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)

        def answer(iid: str) -> dict[str, Any]:
            return {"interrupt_id": iid, "answer": iid, "by": "ann", "at": 1.0, "shown": None}

        async def go() -> None:
            await store.save("s", _update(0, 0, []))
            await store.save("t", _update(0, 0, []))
            await store.record_answers("s", [answer("a"), answer("b"), answer("c")])
            await store.record_answers("t", [answer("a")])
            await store.clear_answers("s", 2)
            left = await store.recorded_answers("s")
            assert [(a.seq, a.interrupt_id, a.shown) for a in left] == [(3, "c", None)]
            await store.clear_answers("s", 2)  # nothing left to clear: no error
            await store.clear_answers("nobody", 5)
            again = await store.record_answers("s", [answer("a")])  # a cleared answer's id
            assert [a.seq for a in again] == [4]
            await store.clear_answers("s", 10)
            assert await store.recorded_answers("s") == []
            assert [a.seq for a in await store.record_answers("s", [answer("d")])] == [5]
            assert [a.seq for a in await store.recorded_answers("t")] == [1]  # untouched
            await store.delete("s")
            assert await store.recorded_answers("s") == []
            await store.save("s", _update(0, 0, []))  # a new session: nothing carried over
            assert await store.recorded_answers("s") == []
            assert [a.seq for a in await store.record_answers("s", [answer("d")])] == [1]

        asyncio.run(go())

    def test_sessions_to_resume(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)

        def answer(iid: str, at: float) -> dict[str, Any]:
            return {"interrupt_id": iid, "answer": 1, "by": "ann", "at": at, "shown": None}

        def lease(expires_at: Any) -> dict[str, Any]:
            return {"owner": "host:1", "token": "t", "since": 0.0, "expires_at": expires_at}

        async def go() -> None:
            todo = store.sessions_to_resume
            assert await todo(100.0) == []
            await store.save("idle", _update(0, 0, [], pending=[_question("i", None)]))
            await store.save("answered", _update(0, 0, [], pending=[_question("q", None)]))
            await store.record_answers("answered", [answer("q", 40.0)])
            await store.record_answers("answered", [answer("r", 5.0)])  # first by seq: 40
            await store.save("overdue", _update(0, 0, [], pending=[_question("o", 30.0)]))
            await store.save("dead", _update(0, 0, [], claim=lease(20.0)))
            await store.save("live", _update(0, 0, [], claim=lease(1e12)))
            await store.save("no-lease", _update(0, 0, [], claim=lease(None)))
            both = [_question("b", 60.0)]
            await store.save("both", _update(0, 0, [], pending=both, claim=lease(50)))
            await store.record_answers("both", [answer("b", 70.0)])
            await store.save("later", _update(0, 0, [], pending=[_question("l", 500.0)]))
            assert await todo(100.0) == ["dead", "overdue", "answered", "both"]
            assert await todo(datetime.fromtimestamp(100.0)) == await todo(100)
            assert await todo(100.0, limit=2) == ["dead", "overdue"]
            assert await todo(100.0, limit=0) == []
            assert await todo(30.0) == ["dead", "overdue", "answered", "both"]  # at counts
            assert await todo(29.0) == ["dead", "answered", "both"]
            assert await todo(1.0) == ["answered", "both"]
            # a finished save clears the claim; clearing the answers leaves the deadline
            await store.save("dead", _update(1, 0, [], claim=None))
            await store.clear_answers("answered", 2)
            await store.clear_answers("both", 1)
            assert await todo(100.0) == ["overdue", "both"]
            await store.save("overdue", _update(1, 0, [], pending=[]))  # answered and applied
            await store.delete("both")
            assert await todo(1e300) == ["later", "live"]

        asyncio.run(go())

    def test_corrupt_recorded_answers_are_reported(self, tmp_path: Path) -> None:
        store = self.make_store(tmp_path)
        answer = {"interrupt_id": "q", "answer": 1, "by": "ann", "at": 1.0, "shown": None}
        asyncio.run(store.save("bad", _update(0, 0, [])))
        asyncio.run(store.record_answers("bad", [answer]))
        try:
            self.corrupt_answers(store, tmp_path, "bad")
        except NotImplementedError:
            import pytest

            pytest.skip("no way to damage this store's recorded answers")
        try:
            asyncio.run(store.recorded_answers("bad"))
        except SessionCorruptError as exc:
            assert "bad" in str(exc)
        else:
            raise AssertionError("corrupt recorded answers were read")


def _pause_bytes(store: SessionStore, tmp_path: Path, sid: str, history: int) -> int:
    """Bytes a store writes for a run that pauses at the end of a ``history``-message talk."""
    from .._messages import Message, Text

    messages = [
        Message("user" if i % 2 == 0 else "assistant", [Text(f"message {i} " + "x" * 40)])
        for i in range(history)
    ]
    turns: list[Any] = ["ok", [ToolUse("t1", "record", {"item": "x"})]]
    agent = build_agent(store, sid, turns, tmp_path / sid, messages=messages)
    assert agent("warm up").stop_reason == "end_turn"  # stores the history
    before = store.bytes_written  # type: ignore[attr-defined]
    assert agent("one more").stop_reason == "interrupt"
    return int(store.bytes_written - before)  # type: ignore[attr-defined]


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
