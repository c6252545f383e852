"""An answer meant for one session's question never answers another session's, even when
their models numbered their tool calls alike (both call ``t1``): the id a door shows for a
question names its session, so an id copied from thread g2 and sent to thread g4, with no
digest echoed, is refused with ``unknown_interrupt`` and g4's payment is not made (issue 34:
an AG-UI answer for g2 approved g4's payment). Each door's ids are used exactly as that door
listed them."""

from __future__ import annotations

from typing import Any

import pytest

from .answering import DOORS, answer_via, pause
from .conftest import Doors, require_extras
from .doors_app import effects
from .served import (
    ANA,
    a2a_questions,
    a2a_send,
    agui_interrupts,
    agui_run,
    dump,
    inbox_session,
    snapshot,
    work,
)

require_extras("starlette", "uvicorn", "a2a", "ag_ui")


def _asked(doors: Doors, door: str, thread: str) -> list[dict[str, Any]]:
    """Start ``thread`` of the payer (it pays ``thread``) and list its questions as ``door``
    shows them: AG-UI's RUN_FINISHED interrupts, the A2A task's questions, the inbox API's
    session."""
    if door == "ag-ui":
        return agui_interrupts(agui_run(doors.url, ANA, "payer", thread, prompt=thread))
    if door == "a2a":
        return a2a_questions(a2a_send(doors.url, ANA, "payer", text=thread, context_id=thread))
    pause(doors.store_url, "payer", thread)
    return list(inbox_session(doors.url, ANA, thread)["interrupts"])


@pytest.mark.parametrize("door", DOORS)
def test_an_id_from_another_session_answers_nothing(doors: Doors, door: str) -> None:
    g2, g4 = f"g2-{door}", f"g4-{door}"
    [g2_question] = _asked(doors, door, g2)
    [g4_question] = _asked(doors, door, g4)
    before = dump(doors.db), snapshot(doors.store_url, g4)

    crossed = answer_via(door, doors.url, ANA, "payer", g4, {g2_question["id"]: True})

    assert (crossed.taken, crossed.code) == (False, "unknown_interrupt"), str(crossed)
    assert (dump(doors.db), snapshot(doors.store_url, g4)) == before
    work(doors.store_url)
    assert effects(g4) == [] and effects(g2) == []

    # g4's own id, as g4's list gave it, approves g4's payment (and only that one)
    own = answer_via(door, doors.url, ANA, "payer", g4, {g4_question["id"]: True})
    assert own.taken, str(own)
    work(doors.store_url)
    assert effects(g4) == [f"pay {g4} 100"] and effects(g2) == []
