"""The agent the undo tests record and take back: a trip booked in five calls, one per model
turn (``pay``, ``flight``, ``hotel``, ``car``, ``mail``), each with its compensation
(``plain_mail`` is ``mail`` without one). Every effect and every compensation is appended to
``EFFECTS`` (and to ``$INTERLUDE_TEST_EFFECTS`` when set, for runs in another process)."""

from __future__ import annotations

import os
from typing import Any

from interlude import Agent, ToolContext, ToolResult, ToolUse, tool
from interlude.testing import FunctionModel, ModelRequest

EFFECTS: list[str] = []

PLAN = [
    ("pay", {"amount": 120}),
    ("flight", {"to": "Lisbon"}),
    ("hotel", {"nights": 3}),
    ("car", {"days": 2}),
    ("mail", {"to": "ana@example.com"}),
]


def effect(what: str) -> None:
    EFFECTS.append(what)
    path = os.environ.get("INTERLUDE_TEST_EFFECTS")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(what + "\n")


def refund(input: dict[str, Any], result: Any) -> str:
    effect(f"refund {input['amount']} ({result['receipt']})")
    return "refunded"


async def cancel_flight(input: dict[str, Any], result: Any) -> dict[str, Any]:
    effect(f"cancel flight {result}")
    return {"cancelled": result}


@tool
def cancel_hotel(input: dict[str, Any], result: Any) -> str:
    """Cancel a hotel booking."""
    effect(f"cancel hotel {input['nights']} nights")
    return "hotel cancelled"


def return_car(input: dict[str, Any], result: Any, context: ToolContext) -> str:
    effect(f"return car {input['days']} days")
    context.agent.state["car"] = "returned"
    return "car returned"


@tool(compensate=refund)
def pay(amount: int) -> dict[str, Any]:
    """Pay for the trip."""
    effect(f"pay {amount}")
    return {"receipt": f"r-{amount}"}


@tool(compensate=cancel_flight)
def flight(to: str) -> str:
    """Book a flight."""
    effect(f"flight {to}")
    return f"F-{to}"


@tool(compensate=cancel_hotel)
def hotel(nights: int) -> str:
    """Book a hotel."""
    effect(f"hotel {nights}")
    return f"H-{nights}"


@tool(compensate=return_car)
def car(days: int, context: ToolContext) -> str:
    """Rent a car."""
    effect(f"car {days}")
    context.agent.state["car"] = "rented"
    return f"C-{days}"


def _mail(to: str) -> str:
    """Mail the itinerary."""
    effect(f"mail {to}")
    return "sent"


def retract(input: dict[str, Any], result: Any) -> str:
    effect(f"retract mail to {input['to']}")
    return "retracted"


mail = tool(compensate=retract, name="mail")(_mail)
plain_mail = tool(name="mail")(_mail)
"""``mail`` without a compensation: an undo past it stops unless it is skipped."""


def reply(request: ModelRequest) -> str | list[ToolUse]:
    """One call per turn, in PLAN's order, then a final reply."""
    done = sum(1 for m in request.messages for b in m.content if isinstance(b, ToolResult))
    if done < len(PLAN):
        name, args = PLAN[done]
        return [ToolUse(f"c{done + 1}", name, args)]
    return "Your trip is booked."


class Calls:
    """A model that answers with ``reply`` and counts its calls."""

    def __init__(self) -> None:
        self.count = 0
        self.model = FunctionModel(self._reply)

    def _reply(self, request: ModelRequest) -> Any:
        self.count += 1
        return reply(request)


def build(
    model: Any = None,
    store: Any = None,
    session_id: str | None = None,
    plain: bool = False,
    **kw: Any,
) -> Agent:
    return Agent(
        model or Calls().model,
        tools=[pay, flight, hotel, car, plain_mail if plain else mail],
        name="trip",
        session=store,
        session_id=session_id,
        **kw,
    )
