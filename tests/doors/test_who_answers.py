"""Who may answer, the same at every door: a token holder in none of a question's groups is
refused with ``not_allowed`` by the inbox API, AG-UI and A2A alike, nothing is recorded and
nothing runs; their refused vote never counts toward the quorum (issue 34: A2A took it, and one
``ops`` vote then settled a quorum of two). The operator's doors (``interlude answer``,
``App.open(...).resume``) know no groups: the scenario does not apply to them."""

from __future__ import annotations

import pytest

from .answering import DOORS, OPERATOR_DOORS, answer_via, pause
from .conftest import Doors
from .doors_app import effects
from .served import ANA, BO, CY, a2a_send, a2a_state, assert_unchanged, dump, snapshot, work

NO_GROUPS = pytest.mark.skip(reason="an operator's door: it knows no groups")


@pytest.mark.parametrize(
    "door", [*DOORS, *(pytest.param(d, marks=NO_GROUPS) for d in OPERATOR_DOORS)]
)
def test_a_vote_from_outside_the_groups_is_refused_at_every_door(doors: Doors, door: str) -> None:
    session = f"groups-{door}"
    iid = pause(doors.store_url, "deploys", session)
    before = dump(doors.db), snapshot(doors.store_url, session)

    refused = answer_via(door, doors.url, CY, "deploys", session, {iid: True})

    assert (refused.taken, refused.code) == (False, "not_allowed"), str(refused)
    assert_unchanged(doors.db, before[0], refused)
    assert snapshot(doors.store_url, session) == before[1]  # nothing recorded
    assert work(doors.store_url) == 0 and effects(session) == []


def test_over_a2a_one_ops_vote_after_a_refused_one_does_not_settle_a_quorum_of_two(
    doors: Doors,
) -> None:
    session = "groups-a2a-quorum"
    iid = pause(doors.store_url, "deploys", session)
    answer_via("a2a", doors.url, CY, "deploys", session, {iid: True})  # cy: in no group

    first = a2a_send(doors.url, ANA, "deploys", data={"answers": {iid: True}}, task_id=session)
    assert (a2a_state(first), effects(session)) == ("TASK_STATE_INPUT_REQUIRED", []), first

    second = a2a_send(doors.url, BO, "deploys", data={"answers": {iid: True}}, task_id=session)
    assert a2a_state(second) == "TASK_STATE_COMPLETED"
    assert effects(session) == [f"deploy {session}"]  # once, after two of ops
    votes = [(e["by"], e["answer"]) for e in snapshot(doors.store_url, session)[2]]
    assert votes == [("ana", True), ("bo", True)]
