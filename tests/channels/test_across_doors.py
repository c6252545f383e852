"""Across the doors (issue 39): one ``interlude serve --mcp`` with one-time links and Slack's
actions beside the inbox's JSON API, AG-UI and A2A, and the command line on its store; the
question is asked in this process, answered through the serving process (or the command's),
and applied by a worker in this process.

- A question two of ``ops`` must approve collects its votes from two channels: a Slack click
  and a one-time link; a vote while another waits for a worker is refused (``busy``); a third
  member's later vote is refused as settled; the tool runs once; the audit trail names both
  voters; the Slack message ends saying who approved.
- The same refusals at every door: someone outside the question's groups (``not_allowed``;
  the command line is the operator's and knows no groups), and an answer to a question
  another door answered first (``already_answered``), recorded or already applied. Nothing
  changes in the store (every row compared) and the tool never runs for the refused answer.
  The code is read where each door puts it (the inbox's and Slack's ``code``, AG-UI's
  RUN_ERROR ``code``, A2A's error data, the command's ``--json`` error); a link's page and an
  MCP result carry none, and say the floor's words instead (``across.check_refused``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from interlude import Inbox
from tests.doors.answering import pause
from tests.doors.doors_app import effects
from tests.doors.served import (
    assert_unchanged,
    audit,
    dump,
    recorded,
    snapshot,
    work,
)
from tests.support import wait_for

from .across import (
    ANA,
    BO,
    CY,
    DEE,
    DOORS,
    GROUPLESS,
    World,
    answer_via,
    check_refused,
    click,
    every_door,
    make_link,
    open_link,
)
from .slack_api import answer_buttons, status_line


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with every_door(tmp_path_factory.mktemp("across")) as world:
        yield world


def _votes(world: World, session: str) -> list[tuple[Any, ...]]:
    """Who answered, with what, and the votes then counted, as the audit trail says."""
    return [(e["by"], e["answer"], e.get("vote")) for e in audit(world.store_url, session)]


# -- a quorum across two channels ---------------------------------------------------------------


def test_two_of_three_approvals_collected_from_slack_and_a_link(world: World) -> None:
    session = "quorum-across"
    iid = pause(world.store_url, "deploys", session)  # two of ops must approve
    (question,) = Inbox(world.store_url).session(session).interrupts
    shown = question.digest
    world.notify()  # a worker's notifier posts it to Slack
    asked = world.message(session)
    assert answer_buttons(asked) == [("Approve", True), ("Decline", False)]
    dee_link = make_link(world, DEE, session, iid, True)  # dee's mail, for later

    # ana approves in Slack: recorded by the serving process, for a worker to apply
    ana = click(world, asked, ANA, "Approve")
    assert (ana.taken, ana.raw["by"]) == (True, "ana"), str(ana)
    assert [(r["by"], r["answer"]) for r in recorded(world.store_url, session)] == [("ana", True)]
    wait_for(
        lambda: status_line(world.message(session)) == "*Approved* by *ana*: 1 of 2 approvals",
        what="the Slack message to count ana's vote",
    )

    # bo's link, while ana's vote waits for a worker: refused, nothing changed
    unchanged = dump(world.db)
    early = answer_via(world, "link", BO, "deploys", session, iid, True)
    check_refused(early, "busy")
    assert_unchanged(world.db, unchanged, early)

    assert work(world.store_url) == 1  # ana's vote applied: one of two, nothing runs
    assert effects(session) == []
    assert Inbox(world.store_url).session(session).votes[iid] == (True, ("ana",))

    # dee, the third of ops, opens the link in her mail now and presses it once bo voted
    settled: list[str] = []

    def bo_votes_from_his_link() -> None:
        bo = answer_via(world, "link", BO, "deploys", session, iid, True)
        assert bo.taken, str(bo)
        assert work(world.store_url) == 1
        assert effects(session) == [f"deploy {session}"]  # two of ops approved: it ran
        settled.append(dump(world.db))

    late_link = open_link(world, dee_link, first=bo_votes_from_his_link)
    check_refused(late_link, "already_answered")
    late_click = click(world, asked, DEE, "Approve")  # and the button she saw in Slack
    check_refused(late_click, "already_answered")
    assert_unchanged(world.db, settled[0], (late_link, late_click))

    assert work(world.store_url) == 0
    assert effects(session) == [f"deploy {session}"]  # once
    assert _votes(world, session) == [("ana", True, [1, 2]), ("bo", True, [2, 2])]
    assert {e["shown"] for e in audit(world.store_url, session)} == {shown}  # as asked
    assert recorded(world.store_url, session) == []

    world.notify()  # the worker's notifier closes the message: who approved, no buttons
    wait_for(
        lambda: (status_line(world.message(session)) or "").startswith("*Approved* by *ana*, *bo*"),
        what=f"the Slack message to name both voters: {world.message(session)['blocks']}",
    )
    assert answer_buttons(world.message(session)) == []


# -- the same refusals everywhere ---------------------------------------------------------------

NO_GROUPS = pytest.mark.skip(reason="an operator's door: it knows no groups")
WITH_GROUPS = [d if d not in GROUPLESS else pytest.param(d, marks=NO_GROUPS) for d in DOORS]


@pytest.mark.parametrize("door", WITH_GROUPS)
def test_someone_outside_the_questions_groups_is_refused_at_every_door(
    world: World, door: str
) -> None:
    session = f"outside-{door}"
    iid = pause(world.store_url, "deploys", session)  # only members of ops may answer
    world.notify()  # posted to Slack (its outbox entry is in the store: before the dump)
    before = dump(world.db), snapshot(world.store_url, session)

    refused = answer_via(world, door, CY, "deploys", session, iid, True)  # cy: in no group

    check_refused(refused, "not_allowed")
    assert_unchanged(world.db, before[0], refused)
    assert snapshot(world.store_url, session) == before[1]  # nothing recorded
    assert work(world.store_url) == 0 and effects(session) == []


@pytest.mark.parametrize("first", ["recorded", "applied"])
@pytest.mark.parametrize("door", DOORS)
def test_an_answer_after_another_doors_answer_is_refused_at_every_door(
    world: World, door: str, first: str
) -> None:
    """Ana declines through another door (Slack; a link when Slack is the door tested) once
    ``door`` shows bo the question; a worker has applied her answer or not yet. Bo's approval
    through ``door`` is refused, the store is as it was, and the tool never runs."""
    session = f"taken-{first}-{door}"
    iid = pause(world.store_url, "payer", session)  # anyone may approve the payment
    other = "link" if door == "slack" else "slack"
    before: list[str] = []

    def ana_declines_first() -> None:
        declined = answer_via(world, other, ANA, "payer", session, iid, False)
        assert declined.taken, str(declined)
        if first == "applied":
            assert work(world.store_url) == 1
        before.append(dump(world.db))

    refused = answer_via(world, door, BO, "payer", session, iid, True, ana_declines_first)

    assert before, f"the {door} door never showed bo the question: {refused}"
    check_refused(refused, "already_answered")
    assert_unchanged(world.db, before[0], refused)
    work(world.store_url)  # applies ana's decline, if it waits
    assert effects(session) == []
    assert _votes(world, session) == [("ana", False, None)]
    assert recorded(world.store_url, session) == []
