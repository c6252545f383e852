"""A recorded decline binds at every door: the ``needs_approval`` rule of ``charge`` asked, a
person declined, and by the time the decline is applied the rule would not ask any more (a
quota, a clock, a remote flag changed). Whichever door the decline came through, the tool does
not run and the audit trail holds the decline (issue 34: "a declined call runs")."""

from __future__ import annotations

from typing import Any

import pytest

from .answering import ALL_DOORS, answer_via, pause
from .conftest import Doors
from .doors_app import effects, flip
from .served import ANA, a2a_send, a2a_state, snapshot, work

DECLINES: dict[str, Any] = {
    "false": False,
    "with a note": {"approve": False, "note": "not this month"},
}


@pytest.mark.parametrize("decline", list(DECLINES))
@pytest.mark.parametrize("door", ALL_DOORS)
def test_a_decline_binds_when_the_rule_flips_at_every_door(
    doors: Doors, door: str, decline: str
) -> None:
    session = f"flips-{door}-{decline.replace(' ', '-')}"
    iid = pause(doors.store_url, "charges", session)
    flip(session)  # the rule would not ask now, in any process

    answered = answer_via(
        door,
        doors.url,
        ANA,
        "charges",
        session,
        {iid: DECLINES[decline]},
        store_url=doors.store_url,
    )

    assert answered.taken, str(answered)
    work(doors.store_url)  # applies the inbox's (the other doors applied theirs)
    assert effects(session) == []  # declined: never run
    (_, messages, pause_), recorded, trail = snapshot(doors.store_url, session)
    assert pause_ is None and recorded == [], (pause_, recorded)
    settled = [(e["interrupt_id"], e["by"], e["answer"]) for e in trail]
    assert settled == [(iid, "ana", DECLINES[decline])]
    results = [b for m in messages for b in m.get("content", []) if b.get("type") == "tool_result"]
    assert [r.get("status") for r in results] == ["error"], results


def test_a_flipped_rule_asks_no_more_in_the_serving_process(doors: Doors) -> None:
    """The scenario's premise: once flipped, the rule lets a new call run unasked, in the
    served process too (over A2A)."""
    session = "flips-premise"
    flip(session)
    reply = a2a_send(doors.url, ANA, "charges", text=session, context_id=session)
    assert a2a_state(reply) == "TASK_STATE_COMPLETED", reply
    assert effects(session) == [f"charge {session} 700"]
