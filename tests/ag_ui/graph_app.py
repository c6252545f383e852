"""The graphs and swarms the AG-UI graph tests serve (``interlude serve --app
tests.ag_ui.graph_app:app``, or in-process through ``create_endpoint``).

``trip`` is a graph: ``research`` answers, then ``writer``'s ``pick_city`` tool asks which
city (text) and books it. ``desk`` is a swarm: ``lead`` hands the task to ``closer``, whose
``confirm`` tool asks for a yes or no. ``release`` is a graph whose node ``team`` is itself a
graph: its node ``check`` asks (node path ``team/check``). ``pair`` runs ``left`` and
``right`` at once, each calling ``confirm`` as tool use ``t1``. Each tool's side effect (after its
answer) is a line of ``$AGUI_LOG``, or of :data:`DONE` when that is not set. The models read
the conversation only, so any process that builds these carries a session on.
"""

from __future__ import annotations

import os
from typing import Any

from interlude import Agent, AgentSession, App, ToolContext, ToolResult, ToolUse, tool
from interlude.multiagent import HANDOFF, Graph, Swarm
from interlude.testing import FunctionModel, ModelRequest

DONE: list[str] = []
"""The side effects, in this process, when ``$AGUI_LOG`` is not set."""


def _did(line: str) -> None:
    log = os.environ.get("AGUI_LOG")
    if log is None:
        DONE.append(line)
        return
    with open(log, "a", encoding="utf-8") as f:
        f.write(line + "\n")


@tool
def pick_city(context: ToolContext) -> str:
    """Ask the traveller which city, and book it."""
    city = context.interrupt("city", reason="Which city?", response_type=str)
    _did(f"booked {city}")
    return f"booked {city}"


@tool
def confirm(context: ToolContext) -> str:
    """Ask a person to confirm, and send it."""
    if context.interrupt("confirm", reason="Send the offer?", response_type=bool) is not True:
        return "not sent"
    _did("sent the offer")
    return "sent"


def _answered(request: ModelRequest) -> bool:
    return any(isinstance(b, ToolResult) for b in request.messages[-1].content)


def _model(reply: str, call: ToolUse | None = None) -> FunctionModel:
    """``call`` first (if any), then ``reply`` once it has its result."""

    def answer(request: ModelRequest) -> Any:
        return reply if call is None or _answered(request) else [call]

    return FunctionModel(answer)


app = App()


@app.graph("trip")
def build_trip(session: AgentSession) -> Graph:
    return Graph(
        {
            "research": Agent(_model("Lisbon is warm in May.")),
            "writer": Agent(
                _model("Five days in the city.", ToolUse("t1", "pick_city", {})),
                tools=[pick_city],
            ),
        },
        [("research", "writer")],
        entry="research",
        session=session.store,
        session_id=session.id,
    )


@app.graph("desk")
def build_desk(session: AgentSession) -> Swarm:
    handoff = ToolUse("h1", HANDOFF, {"agent_name": "closer", "message": "close the deal"})
    return Swarm(
        [
            Agent(_model("Over to the closer.", handoff), name="lead"),
            Agent(
                _model("The offer is out.", ToolUse("c1", "confirm", {})),
                tools=[confirm],
                name="closer",
            ),
        ],
        entry="lead",
        session=session.store,
        session_id=session.id,
    )


@app.graph("release")
def build_release(session: AgentSession) -> Graph:
    team = Graph(
        {
            "draft": Agent(_model("Three changes.")),
            "check": Agent(_model("Checked.", ToolUse("a1", "confirm", {})), tools=[confirm]),
        },
        [("draft", "check")],
        entry="draft",
        name="team",
    )
    return Graph(
        {"team": team, "publish": Agent(_model("Published."))},
        [("team", "publish")],
        entry="team",
        session=session.store,
        session_id=session.id,
    )


@app.graph("pair")
def build_pair(session: AgentSession) -> Graph:
    def side() -> Agent:
        return Agent(_model("Done.", ToolUse("t1", "confirm", {})), tools=[confirm])

    return Graph(
        {"left": side(), "right": side()},
        [],
        entry=["left", "right"],
        session=session.store,
        session_id=session.id,
    )
