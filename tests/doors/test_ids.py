"""An answer meant for one session's question never answers another session's, even when
their models numbered their tool calls alike (both call ``t1``): the id a door shows for a
question names its session, so an id copied from thread g2 and sent to thread g4, with no
digest echoed, is refused with ``unknown_interrupt`` and g4's payment is not made (issue 34:
an AG-UI answer for g2 approved g4's payment). Each door's ids are used exactly as that door
listed them; the operator's doors (``interlude answer``, ``App.open(...).resume``) list plain
question ids beside the session, which are alike in g2 and g4: an answer key of g2's question
(``g2/<id>``, as the other doors show it) is what they must refuse."""

from __future__ import annotations

import json
from typing import Any

import pytest

from interlude.operate import answer_key

from .answering import ALL_DOORS, answer_via, check_refused, pause
from .conftest import Doors
from .doors_app import effects
from .served import (
    ANA,
    a2a_questions,
    a2a_send,
    agui_interrupts,
    agui_run,
    assert_unchanged,
    dump,
    inbox_session,
    interlude,
    snapshot,
    work,
)


def _asked(doors: Doors, door: str, thread: str) -> list[dict[str, Any]]:
    """Start ``thread`` of the payer (it pays ``thread``) and list its questions as ``door``
    shows them: AG-UI's RUN_FINISHED interrupts, the A2A task's questions, the inbox API's
    session, ``interlude show --json``'s, the opened session's."""
    if door == "ag-ui":
        return agui_interrupts(agui_run(doors.url, ANA, "payer", thread, prompt=thread))
    if door == "a2a":
        return a2a_questions(a2a_send(doors.url, ANA, "payer", text=thread, context_id=thread))
    pause(doors.store_url, "payer", thread)
    if door == "cli":
        shown = interlude(doors.store_url, "show", thread)
        assert shown.returncode == 0, shown
        return list(json.loads(shown.stdout)["interrupts"])
    if door == "resume":
        from .doors_app import app

        opened = app.open(thread, doors.store_url)
        try:
            return [{"id": q.id} for q in opened.interrupts]
        finally:
            opened.close()  # type: ignore[union-attr]
    return list(inbox_session(doors.url, ANA, thread)["interrupts"])


def _key(door: str, thread: str, question: dict[str, Any]) -> str:
    """The question's id as an answer key of ``thread``: as listed by the doors that list
    keys, made of the plain id by the operator's doors, which list plain ids."""
    if door in ("cli", "resume"):
        assert "/" not in question["id"], question
        return answer_key(thread, question["id"])
    assert question["id"].startswith(f"{thread}/"), question
    return str(question["id"])


@pytest.mark.parametrize("door", ALL_DOORS)
def test_an_id_from_another_session_answers_nothing(doors: Doors, door: str) -> None:
    g2, g4 = f"g2-{door}", f"g4-{door}"
    [g2_question] = _asked(doors, door, g2)
    [g4_question] = _asked(doors, door, g4)
    before = dump(doors.db), snapshot(doors.store_url, g4)

    crossed = answer_via(
        door,
        doors.url,
        ANA,
        "payer",
        g4,
        {_key(door, g2, g2_question): True},
        store_url=doors.store_url,
    )

    check_refused(crossed, "unknown_interrupt")
    assert_unchanged(doors.db, before[0], crossed)
    assert snapshot(doors.store_url, g4) == before[1]
    work(doors.store_url)
    assert effects(g4) == [] and effects(g2) == []

    # g4's own id, as g4's list gave it, approves g4's payment (and only that one); the
    # command takes g4's answer key too
    own_id = answer_key(g4, g4_question["id"]) if door == "cli" else g4_question["id"]
    own = answer_via(door, doors.url, ANA, "payer", g4, {own_id: True}, store_url=doors.store_url)
    assert own.taken, str(own)
    work(doors.store_url)
    assert effects(g4) == [f"pay {g4} 100"] and effects(g2) == []
