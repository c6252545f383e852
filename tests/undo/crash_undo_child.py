"""The undo crash matrix's processes: a booked trip taken back, SIGKILLed at a chosen point.

Run from the repository root (``python -m tests.undo.crash_undo_child matrix --store sqlite
--dir D``) in a fresh interpreter that has made no event loop, store or thread: every process
below is a ``fork`` of it (the machinery is ``tests/support/crash.py``, shared with the run and
graph matrices).

Two scenarios, on the trip agent of ``undo_agent.py`` (``pay``, ``flight``, ``hotel``, ``car``,
``mail``: ``c1`` .. ``c5``, one per model turn, each with its compensation):

- ``undo`` (the default): phase 1 (the ``setup`` process, never killed) books the trip; phase 2
  runs ``agent.undo(to="m4", by="ana")``, which compensates ``c5``, ``c4``, ``c3`` (newest
  first) and cuts the session to its first five messages.
- ``--decline``: ``mail`` needs approval, and the agent has ``on_decline="compensate"``; phase 1
  gives the prompt and pauses at ``mail``'s approval; phase 2 declines it (``by="ana"``), so
  ``c4`` .. ``c1`` are compensated, then the model is told and answers.

The recovering process (a fresh fork) drives the session to the end: ``recover()`` when a run
stopped, an answer when paused (an approval: declined; an in-doubt compensation: ``"rerun"``
if its effect is not in the effects log, else ``{"result": ...}``, or ``"fail"`` with
``--in-doubt fail``), and the undo (or the decline) again when nothing of it was stored.

Instrumented points (``<label>#<k>``: the k-th time this process reached the label):

- ``save.before`` / ``save.after``: around every store save; ``rewind.before`` /
  ``rewind.after``: around the store's ``rewind`` (the undo's cut);
- ``comp.<tool>.before_effect`` / ``.after_effect``: inside the compensation of ``<tool>``,
  before it writes its effect, and after (before it returns);
- ``model.L<n>``: the model was asked (conversation length ``n``; the decline's reply).

Every effect and compensation is a line of ``effects.log`` in the cell's folder
(``$INTERLUDE_TEST_EFFECTS``, written by ``undo_agent.effect``); ``events.jsonl`` holds the
points, each save committed (``commit``), each model request (``ask``) and each in-doubt
question the recovery answered (``in_doubt``). Reproduce one point by hand::

    CHILD='python -m tests.undo.crash_undo_child'  # from the repository root
    $CHILD run --store sqlite --dir /tmp/x --role setup --phase 1
    CRASH_AT='comp.car.after_effect#1' $CHILD run --store sqlite --dir /tmp/x --phase 2
    $CHILD recover --store sqlite --dir /tmp/x
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from interlude import Agent, Interrupt, ToolContext, tool
from interlude.sessions import SessionStore, SessionUpdate
from interlude.testing import FunctionModel, ModelRequest
from tests.support import crash
from tests.support.crash import Points

from . import undo_agent

MODULE = "tests.undo.crash_undo_child"
PROMPT = "Book me a trip"
LEASE = 120.0
"""The runs' claim: a recovery that waited for it would take this long (far longer than a cell)."""
EFFECTS_LOG = "effects.log"
COMPENSATED = {"c1": "pay", "c2": "flight", "c3": "hotel", "c4": "car", "c5": "mail"}
"""Call id -> the tool whose compensation takes it back."""
RETURNS = {
    "pay": "refunded",
    "flight": {"cancelled": "F-Lisbon"},
    "hotel": "hotel cancelled",
    "car": "car returned",
    "mail": "retracted",
}
"""What each compensation returns (the ``{"result": ...}`` answer to its in-doubt question)."""
EFFECT_OF = {
    "pay": "refund 120 (r-120)",
    "flight": "cancel flight F-Lisbon",
    "hotel": "cancel hotel 3 nights",
    "car": "return car 2 days",
    "mail": "retract mail to ana@example.com",
}
"""The line each compensation writes to the effects log."""
BOOKED = {
    "pay": "pay 120",
    "flight": "flight Lisbon",
    "hotel": "hotel 3",
    "car": "car 2",
    "mail": "mail ana@example.com",
}
"""The line each tool writes when it runs."""


class CrashStore(crash.CrashStore):
    """Saves and rewinds are kill points; each commit logs its messages and pause."""

    def committed(self, session_id: str, update: SessionUpdate) -> dict[str, Any]:
        step = update.pause.get("step") if isinstance(update.pause, dict) else None
        return {
            "n": self.saves,
            "count": update.first_index + len(update.new_messages),
            "claim": update.claim is not None,
            "step": step.get("kind") if isinstance(step, dict) else None,
        }


# --- the tools: undo_agent's, their compensations wrapped in kill points -----------------------

_POINTS: list[Points] = []  # this process's log (the tools are built once, before forking)


def _around(of: str, compensate: Callable[[], Any]) -> Any:
    points = _POINTS[-1]
    points.reach(f"comp.{of}.before_effect")
    out = compensate()
    points.reach(f"comp.{of}.after_effect")
    return out


def refund(input: dict[str, Any], result: Any) -> str:
    return _around("pay", lambda: undo_agent.refund(input, result))  # type: ignore[no-any-return]


async def cancel_flight(input: dict[str, Any], result: Any) -> dict[str, Any]:
    points = _POINTS[-1]
    points.reach("comp.flight.before_effect")
    out = await undo_agent.cancel_flight(input, result)
    points.reach("comp.flight.after_effect")
    return out


@tool
def cancel_hotel(input: dict[str, Any], result: Any) -> str:
    """Cancel a hotel booking."""
    return _around("hotel", lambda: undo_agent.cancel_hotel.fn(input, result))  # type: ignore[no-any-return]


def return_car(input: dict[str, Any], result: Any, context: ToolContext) -> str:
    return _around("car", lambda: undo_agent.return_car(input, result, context))  # type: ignore[no-any-return]


def retract(input: dict[str, Any], result: Any) -> str:
    return _around("mail", lambda: undo_agent.retract(input, result))  # type: ignore[no-any-return]


pay = tool(compensate=refund, name="pay")(undo_agent.pay.fn)
flight = tool(compensate=cancel_flight, name="flight")(undo_agent.flight.fn)
hotel = tool(compensate=cancel_hotel, name="hotel")(undo_agent.hotel.fn)
car = tool(compensate=return_car, name="car")(undo_agent.car.fn)
mail = tool(compensate=retract, name="mail")(undo_agent._mail)
gated_mail = tool(compensate=retract, name="mail", needs_approval=True)(undo_agent._mail)
TOOLS = [pay, flight, hotel, car, mail]
GATED = [pay, flight, hotel, car, gated_mail]


def build(store: SessionStore, session_id: str, points: Points, decline: bool) -> Agent:
    """The trip agent on ``store`` (wrapped: saves and rewinds are kill points); its effects
    go to the cell's ``effects.log``."""
    _POINTS[:] = [points]
    os.environ["INTERLUDE_TEST_EFFECTS"] = str(points.log.parent / EFFECTS_LOG)

    def reply(request: ModelRequest) -> Any:
        n = len(request.messages)
        points.event("ask", length=n)
        points.reach(f"model.L{n}")
        return undo_agent.reply(request)

    return Agent(
        FunctionModel(reply),
        tools=GATED if decline else TOOLS,
        name="trip",
        session=CrashStore(store, points),
        session_id=session_id,
        session_lease=LEASE,
        on_decline="compensate" if decline else "tell",
    )


# --- the phases and the recovery ---------------------------------------------------------------


def undo_phase(agent: Agent, phase: int) -> tuple[Any, str]:
    if phase == 1:
        return agent(PROMPT), "end_turn"
    return agent.undo(to="m4", by="ana"), "undone"


def decline_phase(agent: Agent, phase: int) -> tuple[Any, str]:
    if phase == 1:
        return agent(PROMPT), "interrupt"
    [question] = agent.interrupts
    return agent.resume({question.id: False}, by="ana"), "end_turn"


def decline(question: Interrupt) -> Any:
    """The recovery's answer to ``mail``'s approval (when the decline was not recorded)."""
    if question.name != "approval" or question.tool_use is None or question.tool_use.id != "c5":
        raise AssertionError(f"unexpected question {question!r}")
    return False


def effects(directory: Path) -> list[str]:
    log = directory / EFFECTS_LOG
    return log.read_text().splitlines() if log.exists() else []


def settle(fail: bool) -> Callable[[Interrupt, Points, Path], Any]:
    """The answer to an in-doubt compensation, from the effects log: its effect is not there,
    so it runs again ("rerun"); it is, so it is settled without running ({"result": ...}, or
    "fail" with ``fail``)."""

    def answer(question: Interrupt, points: Points, directory: Path) -> Any:
        use = question.tool_use
        assert use is not None and use.id.startswith("undo."), question
        of = COMPENSATED[use.id.removeprefix("undo.")]
        if EFFECT_OF[of] not in effects(directory):
            given: Any = "rerun"
        else:
            given = "fail" if fail else {"result": RETURNS[of]}
        points.event("in_doubt", id=use.id, qid=question.id, name=use.name, answer=given)
        return given

    return answer


def stored(store: SessionStore, session_id: str) -> dict[str, Any] | None:
    loaded = crash.load(store, session_id)
    return None if loaded is None else dataclasses.asdict(loaded)


def scenario(decline_it: bool, fail: bool) -> crash.Scenario:
    def build_it(store: SessionStore, session_id: str, points: Points) -> Agent:
        return build(store, session_id, points, decline_it)

    common = crash.Scenario(
        prompt=PROMPT,
        build=build_it,
        session_prefix="undo-",
        by="ana",
        answer_in_doubt=settle(fail),
        phases=(2,),
        before_recovery=lambda store, session_id: {"snapshot": stored(store, session_id)},
        after_recovery=lambda store, session_id: {"final": stored(store, session_id)},
    )
    if decline_it:  # nothing stored: a pause that was never answered (resumed below)
        return dataclasses.replace(
            common,
            invoke=decline_phase,
            answer=decline,
            never_started=lambda agent, store, session_id: not agent.messages,
        )
    return dataclasses.replace(
        common,
        invoke=undo_phase,
        # the trip as booked, no undo recorded: the person asks for it again
        never_started=lambda agent, store, session_id: len(agent.messages) == 12,
        start=lambda agent: agent.undo(to="m4", by="ana"),
        # the cut is one save: a session of five messages has been undone
        finished=lambda agent: len(agent.messages) == 5,
    )


def main(argv: list[str]) -> int:
    for built in [*TOOLS, gated_mail]:  # build the tools' validators once, for every fork
        built.spec  # noqa: B018
    import interlude._agent._undoing  # noqa: F401  (loaded once, before forking)

    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--decline", action="store_true", help="the decline's rollback")
        parser.add_argument(
            "--in-doubt",
            choices=["result", "fail"],
            default="result",
            help="how an in-doubt compensation whose effect happened is settled",
        )

    def make(args: argparse.Namespace) -> crash.Scenario:
        return scenario(args.decline, args.in_doubt == "fail")

    return crash.main(argv, make, options=options)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
