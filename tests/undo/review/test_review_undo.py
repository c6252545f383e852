"""Review of the undo (issue 40): failing tests that show bugs, through the public API."""

from __future__ import annotations

from typing import Any

from interlude import Agent, ToolResult, ToolUse, tool
from interlude.errors import UndoError, UnknownCheckpointError
from interlude.sessions import MemoryStore
from interlude.testing import FunctionModel

GOT: list[Any] = []


def unreserve(input: dict[str, Any], result: Any) -> str:
    GOT.append(("unreserve", input, result))
    return "unreserved"


@tool(needs_approval=True, compensate=unreserve)
def reserve(seat: str) -> str:
    """Reserve a seat."""
    return f"seat-{seat}"


@tool(needs_approval=True)
def charge(amount: int) -> str:
    """Charge the card."""
    return "charged"


def _two_batches(request: Any) -> Any:
    done = sum(isinstance(b, ToolResult) for m in request.messages for b in m.content)
    if done == 0:
        return [ToolUse("r1", "reserve", {"seat": "12A"})]
    if done == 1:
        return [ToolUse("k1", "charge", {"amount": 300})]
    return "ok"


def test_decline_rollback_gives_the_compensation_the_input_a_person_edited() -> None:
    """The docs: a compensation gets the call's input "as it ran (with a person's edit)".
    agent.undo does (from the audit trail); a decline's rollback of an earlier batch does not."""
    GOT.clear()
    agent = Agent(
        FunctionModel(_two_batches),
        tools=[reserve, charge],
        on_decline="compensate",
        session=MemoryStore(),
        session_id="s",
    )
    [q] = agent("reserve and pay").interrupts
    [q2] = agent.resume({q.id: {"approve": True, "input": {"seat": "14C"}}}, by="ana").interrupts
    agent.resume({q2.id: False}, by="ana")
    assert GOT == [("unreserve", {"seat": "14C"}, "seat-14C")]


def refund(input: dict[str, Any], result: Any) -> str:
    GOT.append(("refund", input, result))
    return "refunded"


@tool(needs_approval=True, compensate=refund)
def pay(amount: int) -> dict[str, Any]:
    """Pay."""
    return {"receipt": f"r-{amount}"}


def _pay_once(request: Any) -> Any:
    done = sum(isinstance(b, ToolResult) for m in request.messages for b in m.content)
    return [ToolUse("p1", "pay", {"amount": 80})] if done == 0 else "paid"


def test_undo_of_an_edited_call_gives_the_compensation_what_the_tool_returned() -> None:
    """An approval with an edited input adds a note to the call's result in the conversation;
    the undo hands the compensation that note (and text instead of the JSON returned)."""
    GOT.clear()
    agent = Agent(FunctionModel(_pay_once), tools=[pay], session=MemoryStore(), session_id="s")
    [q] = agent("pay").interrupts
    assert str(agent.resume({q.id: {"approve": True, "input": {"amount": 50}}}, by="ana")) == "paid"
    plan = agent.undo(to="m0", dry_run=True)
    assert plan.steps[0].input == {"amount": 50}
    assert plan.steps[0].result == {"receipt": "r-50"}
    agent.undo(to="m0", by="ana")
    assert GOT == [("refund", {"amount": 50}, {"receipt": "r-50"})]


# --- forks: the same effect compensated in two sessions -------------------------------------

import json  # noqa: E402
import sqlite3  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from interlude.errors import StateFormatError  # noqa: E402
from interlude.sessions import SQLiteStore  # noqa: E402
from tests.undo.undo_agent import EFFECTS, build  # noqa: E402

ONCE = [
    "retract mail to ana@example.com",
    "return car 2 days",
    "cancel hotel 3 nights",
    "cancel flight F-Lisbon",
    "refund 120 (r-120)",
]


def test_a_fork_and_its_parent_do_not_both_compensate_the_parents_calls(tmp_path: Path) -> None:
    """A fork holds the parent's calls up to the fork point (they ran once, in the parent);
    undone in the fork, then in the parent, every compensation runs twice (refund 120 x2)."""
    with SQLiteStore(tmp_path / "s.db") as store:
        parent = build(None, store, "trip")
        parent("Book me a trip")
        EFFECTS.clear()
        fork = parent.fork("m11", "trip-fork", by="bo")
        with pytest.raises(UndoError, match="ran in the session this one was forked from"):
            fork.undo(to="m0", by="ana")  # its calls ran once, in the parent: undone there
        parent.undo(to="m0", by="ana")
        assert EFFECTS == ONCE  # each effect taken back once


def unbook(input: dict[str, Any], result: Any) -> str:
    GOT.append(("unbook", result))
    return "unbooked"


@tool(needs_approval=True)
def cancel_room(input: dict[str, Any], result: Any) -> str:
    """Cancel a room (costs a fee)."""
    GOT.append(("cancel", result))
    return "cancelled"


@tool(compensate=cancel_room)
def book(nights: int) -> str:
    """Book."""
    return f"room-{nights}"


def _book_once(request: Any) -> Any:
    done = sum(isinstance(b, ToolResult) for m in request.messages for b in m.content)
    return [ToolUse("b1", "book", {"nights": 2})] if done == 0 else "booked"


def test_a_fork_at_an_undos_question_does_not_run_its_compensations_again(
    tmp_path: Path,
) -> None:
    """An undo paused on a compensation's approval; a fork at that question copies the undo
    under way, and both sessions run the compensation."""
    GOT.clear()
    with SQLiteStore(tmp_path / "s.db") as store:
        parent = Agent(FunctionModel(_book_once), tools=[book], session=store, session_id="p")
        parent("book")
        [q] = parent.undo(to="m0", by="ana").interrupts
        with pytest.raises(UnknownCheckpointError, match="belongs to an undo under way"):
            parent.fork(q.id, "f", by="bo")
        parent.resume({q.id: True}, by="ana")
        assert GOT == [("cancel", "room-2")]


# --- hostile stored data: an undo step that cannot be carried out ---------------------------


def _tampered(tmp_path: Path, change: Any) -> tuple[Path, str]:
    db = tmp_path / "s.db"
    with SQLiteStore(db) as store:
        agent = Agent(FunctionModel(_book_once), tools=[book], session=store, session_id="p")
        agent("book")
        [q] = agent.undo(to="m0", by="ana").interrupts
    con = sqlite3.connect(db)
    (pause,) = con.execute("SELECT pause FROM sessions WHERE id = 'p'").fetchone()
    data = json.loads(pause)
    change(data["step"])
    con.execute("UPDATE sessions SET pause = ? WHERE id = 'p'", (json.dumps(data),))
    con.commit()
    con.close()
    return db, q.id


def _load_refused_before_anything_runs(db: Path, qid: str) -> None:
    GOT.clear()
    with SQLiteStore(db) as store:
        agent = Agent(FunctionModel(_book_once), tools=[book], session=store, session_id="p")
        with pytest.raises(StateFormatError):
            agent.resume({qid: True}, by="x")
    assert GOT == []  # nothing ran


def test_a_stored_rollback_without_its_batch_is_refused_on_load(tmp_path: Path) -> None:
    """keep -1 (a decline's rollback) with no ``after`` batch decodes; the compensations then
    run and the run ends on an AssertionError."""

    def change(step: dict[str, Any]) -> None:
        step["keep"] = -1

    _load_refused_before_anything_runs(*_tampered(tmp_path, change))


def test_a_stored_undo_whose_calls_are_not_its_compensations_is_refused(tmp_path: Path) -> None:
    """``calls[i]`` must be the compensation of ``undone[i]`` (``undo.<call_id>``, by its
    compensation tool): here it runs the tool ``book`` itself, and its audit entry says the
    call was undone by cancel_room."""

    def change(step: dict[str, Any]) -> None:
        step["calls"][0]["tool_use"].update(name="book", input={"nights": 99})

    _load_refused_before_anything_runs(*_tampered(tmp_path, change))


# --- a decline's rollback, then another rollback or an undo: compensated twice ---------------

SPENT: list[str] = []


def _unseat(input: dict[str, Any], result: Any) -> None:
    SPENT.append(f"unreserve {result}")


@tool(compensate=_unseat)
def seat(seat: str) -> str:
    """Reserve a seat."""
    SPENT.append(f"reserve {seat}")
    return f"seat-{seat}"


def _charges(n: int) -> Any:
    def reply(request: Any) -> Any:
        done = sum(isinstance(b, ToolResult) for m in request.messages for b in m.content)
        if done == 0:
            return [ToolUse("r1", "seat", {"seat": "12A"})]
        if done <= n:
            return [ToolUse(f"k{done}", "charge", {"amount": 100 * done})]
        return "gave up"

    return reply


def test_a_second_decline_in_the_run_does_not_compensate_again() -> None:
    SPENT.clear()
    agent = Agent(FunctionModel(_charges(2)), tools=[seat, charge], on_decline="compensate")
    [q] = agent("go").interrupts
    [q2] = agent.resume({q.id: False}, by="ana").interrupts
    assert str(agent.resume({q2.id: False}, by="ana")) == "gave up"
    assert SPENT == ["reserve 12A", "unreserve seat-12A"]


def test_an_undo_after_a_rollback_does_not_compensate_again() -> None:
    SPENT.clear()
    agent = Agent(
        FunctionModel(_charges(1)),
        tools=[seat, charge],
        on_decline="compensate",
        session=MemoryStore(),
        session_id="s",
    )
    [q] = agent("go").interrupts
    assert str(agent.resume({q.id: False}, by="ana")) == "gave up"
    agent.undo(to="m0", by="bo")
    assert SPENT == ["reserve 12A", "unreserve seat-12A"]
