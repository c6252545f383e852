"""The first answer wins, whatever the doors: an answer recorded in the inbox (202, waiting for
a worker) and another sent over AG-UI or A2A cannot both be taken, one after the other or at
the same instant through two serving processes. The one taken is the one the audit trail
shows, and the tool runs at most once (issue 34: A2A ran the tool over a decline recorded in
the inbox, which was never applied nor audited; AG-UI did the same in 2 of 18 races). An
answer through any door (the operator's too) after one is recorded or applied is refused with
``already_answered`` and changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .answering import ALL_DOORS, Outcome, answer_via, at_once, check_refused, pause
from .conftest import Doors, serve_doors
from .doors_app import effects
from .served import ANA, BO, assert_unchanged, dump, inbox_answer, snapshot, work

TRIES = 15
"""Races per door (each a fresh session)."""
LEADS = [-0.02, -0.01, 0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08]
"""How much later (in seconds; negative: sooner) the inbox's answer leaves than the other
door's, try after try: some land before the other door reads the session, some while it
builds the agent, some after it has claimed the run."""


@pytest.fixture(scope="module")
def doors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Doors]:
    """Two serving processes on one store: the inbox answer goes to the first, the other
    door's to the second, whose agents take 50 ms to build (between its read of the session
    and its claim on it)."""
    slow = {"DOORS_BUILD_SECONDS": "0.05"}
    yield from serve_doors(tmp_path_factory.mktemp("race"), {}, slow)


def _settled(store_url: str, session: str, iid: str) -> list[tuple[str, Any]]:
    """Who settled question ``iid``, with what, as the audit trail says."""
    trail = snapshot(store_url, session)[2]
    return [(e["by"], e["answer"]) for e in trail if e["interrupt_id"] == iid]


@pytest.mark.parametrize("first", ["recorded", "applied"])
@pytest.mark.parametrize("door", ALL_DOORS)
def test_an_answer_recorded_in_the_inbox_binds_every_other_door(
    doors: Doors, door: str, first: str
) -> None:
    """Ana declines in the inbox (202; no worker runs yet, or one pass has applied it); Bo
    then approves through ``door``: refused (``already_answered``), nothing changes in the
    store, the tool never runs, and the audit shows Ana's decline, applied by the worker."""
    session = f"first-{first}-{door}"
    iid = pause(doors.store_url, "payer", session)
    declined = inbox_answer(doors.url, ANA, session, {iid: False})
    assert declined.status_code == 202, declined.text
    if first == "applied":
        work(doors.store_url)
        assert _settled(doors.store_url, session, iid) == [("ana", False)]
    before = dump(doors.db)

    second = answer_via(
        door, doors.url, BO, "payer", session, {iid: True}, store_url=doors.store_url
    )

    check_refused(second, "already_answered")
    assert effects(session) == []
    assert_unchanged(doors.db, before, second)
    work(doors.store_url)  # the worker applies ana's decline (if it has not yet)
    assert effects(session) == []
    assert _settled(doors.store_url, session, iid) == [("ana", False)]
    assert snapshot(doors.store_url, session)[1] == []  # nothing left recorded


def _race(doors: Doors, door: str, session: str, iid: str, lead: float) -> tuple[int, Outcome]:
    """Ana's decline to the inbox of one process and Bo's approval through ``door`` of the
    other, released together; ``lead`` seconds (either sign) shifts the inbox's."""
    return at_once(
        lambda: inbox_answer(doors.servers[0].url, ANA, session, {iid: False}).status_code,
        lambda: answer_via(door, doors.servers[1].url, BO, "payer", session, {iid: True}),
        lead,
    )


@pytest.mark.parametrize("door", ["ag-ui", "a2a"])
def test_the_same_question_answered_at_once_in_the_inbox_and_over_a_protocol(
    doors: Doors, door: str
) -> None:
    """Many races, each on a fresh session: exactly one of the two answers is taken, the tool
    runs only when the approval was, and the audit trail names the answer taken."""
    problems: list[str] = []
    for i in range(TRIES):
        lead = LEADS[i % len(LEADS)]
        session = f"race-{door}-{i}"
        iid = pause(doors.store_url, "payer", session)
        status, other = _race(doors, door, session, iid, lead)
        work(doors.store_url)  # applies a decline recorded in the inbox, if one was
        inbox_taken = status == 202
        winner = ("bo", True) if other.taken else ("ana", False)
        ran = effects(session)
        settled = _settled(doors.store_url, session, iid)
        left = snapshot(doors.store_url, session)[1]
        if inbox_taken == other.taken:
            problems.append(f"{session}: inbox {status}, {other}")
        elif ran != ([f"pay {session} 100"] if other.taken else []) or settled != [winner]:
            problems.append(f"{session}: ran {ran}, audit {settled}, winner {winner}")
        elif left:
            problems.append(f"{session}: still recorded {left}")
    assert problems == [], f"{len(problems)} of {TRIES} races broke the first answer:\n" + (
        "\n".join(problems)
    )
