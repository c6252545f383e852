"""Signed pauses are bound to their conversation; tools get a key that names a call for good.

What a raw database writer tried (issue 21, items 2 and 3): editing the conversation under a
signed pause, moving a signed pause onto another session, putting back an unsigned pre-journal
run marker, and putting a whole session back as it was before an approved payment.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from interlude import Agent, ToolContext, ToolResult, ToolUse, tool
from interlude.errors import StateIntegrityError
from interlude.hooks import BeforeToolCallEvent
from interlude.sessions import MemoryStore, SessionUpdate, SQLiteStore
from interlude.testing import FunctionModel, ModelRequest

KEY = b"k" * 32


def _payer(store: Any, session_id: str, paid: list[tuple[int, str]], to: str = "ana") -> Agent:
    @tool
    def pay(cents: int, context: ToolContext) -> str:
        """Pay.

        Args:
            cents: How much.
        """
        paid.append((cents, context.idempotency_key))
        return "paid"

    def reply(request: ModelRequest) -> Any:
        if any(isinstance(b, ToolResult) for b in request.messages[-1].content):
            return "done"
        return [ToolUse("p1", "pay", {"cents": 100})]

    agent = Agent(
        FunctionModel(reply), tools=[pay], signing_key=KEY, session=store, session_id=session_id
    )
    agent.hooks.add_callback(
        BeforeToolCallEvent, lambda e: None if e.interrupt("approve") is True else e.cancel()
    )
    return agent


def test_a_conversation_edited_under_a_signed_pause_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    paid: list[tuple[int, str]] = []
    _payer(SQLiteStore(db), "s1", paid)("pay ana")
    with sqlite3.connect(db) as conn:
        (data,) = conn.execute("SELECT data FROM messages WHERE idx = 0").fetchone()
        edited = data.replace("pay ana", "pay mallory")
        conn.execute("UPDATE messages SET data = ? WHERE idx = 0", (edited,))
    fresh = _payer(SQLiteStore(db), "s1", paid)
    with pytest.raises(StateIntegrityError, match="conversation"):
        fresh.interrupts  # noqa: B018  # the first look loads the session
    assert paid == []


def test_an_exported_state_with_an_edited_message_is_refused() -> None:
    paid: list[tuple[int, str]] = []
    agent = _payer(None, None, paid)  # type: ignore[arg-type]
    agent("pay ana")
    state = json.loads(json.dumps(agent.export_state()))
    state["messages"][0]["content"][0]["text"] = "pay mallory"
    with pytest.raises(StateIntegrityError):
        _payer(None, None, paid).import_state(state)  # type: ignore[arg-type]


def test_a_signed_pause_moved_onto_another_session_is_refused() -> None:
    store = MemoryStore()
    paid: list[tuple[int, str]] = []
    _payer(store, "ana", paid)("pay ana")
    _payer(store, "bob", paid)("pay bob, who should not be paid")
    ana, bob = (asyncio.run(store.load(s)) for s in ("ana", "bob"))
    assert ana is not None and bob is not None
    update = SessionUpdate(
        expected_version=bob.version,
        first_index=len(bob.messages),
        new_messages=[],
        pause=ana.pause,  # ana's approval question, signed, on bob's conversation
        pending=[],
        tools=bob.tools,
        format_version=bob.format_version,
    )
    asyncio.run(store.save("bob", update))
    with pytest.raises(StateIntegrityError):
        _payer(store, "bob", paid).interrupts  # noqa: B018
    assert paid == []


def test_an_unsigned_pre_journal_marker_is_refused_by_a_signed_agent() -> None:
    """A marker from before the journal holds the pause its run resumed: a forged one would
    drop the question and keep a made-up result, so a signed agent checks it like a pause."""
    store = MemoryStore()
    paid: list[tuple[int, str]] = []
    _payer(store, "s1", paid)("pay ana")
    stored = asyncio.run(store.load("s1"))
    assert stored is not None and stored.pause is not None
    forged = {k: v for k, v in stored.pause.items() if k != "signature"}
    marker = {"running": {"owner": "gone:1", "since": 1.0, "resumed": forged}}
    update = SessionUpdate(
        expected_version=stored.version,
        first_index=len(stored.messages),
        new_messages=[],
        pause=marker,
        pending=[],
        tools=stored.tools,
        format_version=1,
    )
    asyncio.run(store.save("s1", update))
    with pytest.raises(StateIntegrityError, match="stopped run"):
        _payer(store, "s1", paid).interrupts  # noqa: B018


def test_a_session_put_back_whole_replays_a_call_under_the_same_idempotency_key(
    tmp_path: Path,
) -> None:
    """No signature can tell a whole session put back as it was (pause and conversation
    together); the tool can, at its effect: the replayed call has the key of the first."""
    db = tmp_path / "s.db"
    paid: list[tuple[int, str]] = []
    [question] = _payer(SQLiteStore(db), "s1", paid)("pay ana").interrupts
    saved = tmp_path / "before"
    saved.mkdir()
    for f in tmp_path.glob("s.db*"):
        shutil.copy(f, saved / f.name)
    assert _payer(SQLiteStore(db), "s1", paid).resume({question.id: True}).stop_reason == "end_turn"
    for f in tmp_path.glob("s.db*"):  # the whole session put back
        f.unlink()
    for f in saved.glob("s.db*"):
        shutil.copy(f, tmp_path / f.name)
    _payer(SQLiteStore(db), "s1", paid).resume({question.id: True})
    [(_, first), (_, again)] = paid
    assert first == again and len(first) == 32
    other: list[tuple[int, str]] = []
    [q2] = _payer(SQLiteStore(db), "s2", other)("pay ana").interrupts
    _payer(SQLiteStore(db), "s2", other).resume({q2.id: True})
    assert other[0][1] != first  # another session's call: another key


def test_a_signed_agent_refuses_an_audit_trail_whose_links_do_not_hold(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    paid: list[tuple[int, str]] = []
    [question] = _payer(SQLiteStore(db), "s1", paid)("pay ana").interrupts
    _payer(SQLiteStore(db), "s1", paid).resume({question.id: True}, by="ana")
    with sqlite3.connect(db) as conn:
        (data,) = conn.execute("SELECT entry FROM audit").fetchone()
        entry = json.loads(data)
        assert entry["chain"].startswith("hmac-sha256:")
        entry["by"] = "mallory"
        conn.execute("UPDATE audit SET entry = ?", (json.dumps(entry),))
    with pytest.raises(StateIntegrityError, match=r"audit\[0\]"):
        _payer(SQLiteStore(db), "s1", paid).messages  # noqa: B018


# --- a remembered decision copied in from another session (issue 35, item 6) ------------------


def _copy_trail(db: Path, source: str, target: str, entries: list[dict[str, Any]] | None) -> None:
    """What a raw store writer does: replace ``target``'s audit trail with ``source``'s (or
    with ``entries``)."""
    with sqlite3.connect(db) as conn:
        if entries is None:
            rows = conn.execute(
                "SELECT seq, entry FROM audit WHERE session_id = ? ORDER BY seq", (source,)
            ).fetchall()
        else:
            rows = [(i, json.dumps(e)) for i, e in enumerate(entries)]
        conn.execute("DELETE FROM audit WHERE session_id = ?", (target,))
        conn.executemany(
            "INSERT INTO audit (session_id, seq, entry) VALUES (?, ?, ?)",
            [(target, seq, entry) for seq, entry in rows],
        )


@pytest.mark.parametrize("copied", ["a bound trail", "an unbound (older) trail"])
def test_a_remembered_decision_copied_from_another_session_is_not_honoured(
    copied: str, tmp_path: Path
) -> None:
    """Session A remembers "pay: approved for the session"; a store writer puts A's trail in
    place of session B's (both models numbered their calls t1, t2, ...). B must not pay
    unasked: a trail bound to A does not load as B's, and an older unbound trail loads but
    remembers nothing for a signed agent."""
    from interlude._audit import AuditEntry, chained

    paid: list[int] = []

    @tool(needs_approval=True)
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: How much.
        """
        paid.append(amount)
        return "paid"

    db = tmp_path / "s.db"
    store = SQLiteStore(db)

    def agent(session: str, turns: list[Any]) -> Agent:
        from interlude.testing import ScriptedModel

        return Agent(
            ScriptedModel(turns),
            tools=[pay],
            session=store,
            session_id=session,
            signing_key="k" * 16,
        )

    a = agent("A", [[ToolUse("t1", "pay", {"amount": 5})], "ok"])
    [question] = a("pay 5").interrupts
    a.resume({question.id: {"approve": True, "remember": "session"}}, by="ana")
    b = agent("B", [[ToolUse("t1", "pay", {"amount": 500})], "no"])
    [asked] = b("pay 500").interrupts
    b.resume({asked.id: False}, by="bo")
    assert paid == [5]

    if copied == "a bound trail":
        _copy_trail(db, "A", "B", None)
    else:
        entry = AuditEntry(
            interrupt_id=question.id,
            name=question.name,
            answer={"approve": True, "remember": "session"},
            by="ana",
            at=1.0,
            shown=a.audit[0].shown,
            tool="pay",
        )
        unbound = chained((), [entry], b"k" * 16)  # as signed before chains were bound
        _copy_trail(db, "A", "B", [e.to_dict() for e in unbound])

    later = agent("B", [[ToolUse("t2", "pay", {"amount": 700})], "ok"])
    if copied == "a bound trail":
        with pytest.raises(StateIntegrityError, match="audit"):
            later("pay 700")
    else:
        result = later("pay 700")
        assert [q.name for q in result.interrupts] == ["approval"]  # asked, not remembered
    assert paid == [5]
