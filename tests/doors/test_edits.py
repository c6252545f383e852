"""An approval edit is checked where it is recorded against the tool's own validation too, not
only its JSON schema: an edit the schema accepts but the tool refuses (here a pydantic
validator: the amount must be positive) is refused at once with ``invalid_answer`` by every
door, nothing is recorded, nothing runs, and the question is still open (issue 34: the inbox
took it with 202 and the worker dropped it with a log line)."""

from __future__ import annotations

import pytest

from .answering import ALL_DOORS, answer_via, check_refused, pause
from .conftest import Doors
from .doors_app import effects
from .served import ANA, assert_unchanged, dump, snapshot, work


@pytest.mark.parametrize("door", ALL_DOORS)
def test_an_edit_the_tool_refuses_is_refused_at_once_at_every_door(doors: Doors, door: str) -> None:
    session = f"edit-{door}"
    iid = pause(doors.store_url, "refunds", session)
    before = dump(doors.db), snapshot(doors.store_url, session)
    edit = {"approve": True, "input": {"amount": -300, "to": session}}  # fits the schema

    refused = answer_via(
        door, doors.url, ANA, "refunds", session, {iid: edit}, store_url=doors.store_url
    )

    check_refused(refused, "invalid_answer")
    if door == "inbox":
        assert refused.raw[0] == 422
    assert_unchanged(doors.db, before[0], refused)
    assert snapshot(doors.store_url, session) == before[1]  # nothing recorded
    work(doors.store_url)
    assert effects(session) == []
    assert snapshot(doors.store_url, session) == before[1]  # still open, no audit entry


def test_an_edit_the_tool_accepts_is_recorded_and_run_as_edited(doors: Doors) -> None:
    session = "edit-accepted"
    iid = pause(doors.store_url, "refunds", session)
    edit = {"approve": True, "input": {"amount": 250, "to": session}}
    taken = answer_via("inbox", doors.url, ANA, "refunds", session, {iid: edit})
    assert taken.taken, str(taken)
    work(doors.store_url)
    assert effects(session) == [f"refund {session} 250"]
