"""An operator's App with graphs, for tests/multiagent/test_operators.py and the inbox's
browser test. Models are FunctionModels that reply from the conversation (the same in every
process) and count their calls in ``CALLS`` (per node, in this process).

- graph ``trip``: ``research`` then, together, ``writer`` (its tool asks ``city``, typed
  ``str``) and ``budget`` (its tool asks ``approve``, typed ``bool``).
- graph ``crashy``: ``fetch`` then ``work``, whose tool kills the process (SIGKILL) when
  ``$GRAPH_KILL`` is set; node agents hold their run claim for 1 s (``session_lease``).
- graph ``halting``: ``fetch`` then ``work``; a before-node hook kills the process (SIGKILL)
  before ``work`` starts when ``$GRAPH_HALT`` is set (no node runs then: only the graph's own
  run claim, held for 1 s, says the run stopped).
- graph ``overdue``: ``late`` (its tool asks ``soon``, already past its deadline, default
  ``"late"``) and ``gated`` (a before-node hook asks ``go``, past due, no default).
- agent ``solo``: a plain agent, for the shared namespace.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from typing import Any

from interlude import Agent, AgentSession, App, ToolContext, ToolResult, ToolUse, tool
from interlude.multiagent import BeforeNodeCallEvent, Graph
from interlude.testing import FunctionModel, ModelRequest

app = App()
CALLS: Counter[str] = Counter()
TOOL_RUNS: Counter[str] = Counter()


@tool
def pick_city(context: ToolContext) -> str:
    """Ask the traveller which city."""
    return f"city: {context.interrupt('city', reason='Which city?', response_type=str)}"


@tool
def approve_budget(context: ToolContext) -> str:
    """Ask whether to spend."""
    answer = context.interrupt("approve", reason="Spend 900 EUR?", response_type=bool)
    return "approved" if answer else "declined"


@tool(idempotent=True)
def do_work() -> str:
    """Do the work (safe to repeat)."""
    TOOL_RUNS["do_work"] += 1
    if os.environ.get("GRAPH_KILL"):
        os.kill(os.getpid(), signal.SIGKILL)
    return "worked"


def model(node: str, tool_name: str | None, final: str) -> FunctionModel:
    """Calls ``tool_name`` first (if any), then answers ``final``; counts its calls."""

    def reply(request: ModelRequest) -> Any:
        CALLS[node] += 1
        last = request.messages[-1]
        if tool_name is None or any(isinstance(b, ToolResult) for b in last.content):
            return final
        return [ToolUse(f"{node}-1", tool_name, {})]

    return FunctionModel(reply)


@app.graph("trip")
def build_trip(session: AgentSession) -> Graph:
    return Graph(
        {
            "research": Agent(model("research", None, "Lisbon is warm in May.")),
            "writer": Agent(
                model("writer", "pick_city", "Five days in Lisbon."), tools=[pick_city]
            ),
            "budget": Agent(
                model("budget", "approve_budget", "About 900 EUR."), tools=[approve_budget]
            ),
        },
        [("research", "writer"), ("research", "budget")],
        entry="research",
        session=session.store,
        session_id=session.id,
    )


@app.graph("crashy")
def build_crashy(session: AgentSession) -> Graph:
    return Graph(
        {
            "fetch": Agent(model("fetch", None, "fetched")),
            "work": Agent(
                model("work", "do_work", "work done"), tools=[do_work], session_lease=1.0
            ),
        },
        [("fetch", "work")],
        entry="fetch",
        session=session.store,
        session_id=session.id,
    )


def _halt_before_work(event: BeforeNodeCallEvent) -> None:
    if event.node == "work" and os.environ.get("GRAPH_HALT"):
        os.kill(os.getpid(), signal.SIGKILL)


@app.graph("halting")
def build_halting(session: AgentSession) -> Graph:
    graph = Graph(
        {
            "fetch": Agent(model("fetch", None, "fetched")),
            "work": Agent(model("work", "do_work", "work done"), tools=[do_work]),
        },
        [("fetch", "work")],
        entry="fetch",
        session=session.store,
        session_id=session.id,
        session_lease=1.0,
    )
    graph.hooks.add_callback(BeforeNodeCallEvent, _halt_before_work)
    return graph


@app.agent("solo")
def build_solo(session: AgentSession) -> Agent:
    return Agent(model("solo", None, "alone"), session=session.store, session_id=session.id)


@tool
def soon(context: ToolContext) -> str:
    """Ask with a deadline already past (default "late")."""
    return f"answer: {context.interrupt('soon', expires_in=0.0, default='late')}"


@app.graph("overdue")
def build_overdue(session: AgentSession) -> Graph:
    graph = Graph(
        {
            "late": Agent(model("late", "soon", "Settled late."), tools=[soon]),
            "gated": Agent(model("gated", None, "Gated ran.")),
        },
        entry=["late", "gated"],
        session=session.store,
        session_id=session.id,
    )

    def gate(event: BeforeNodeCallEvent) -> None:
        if event.node == "gated":
            event.interrupt("go", expires_in=0.0)

    graph.hooks.add_callback(BeforeNodeCallEvent, gate)
    return graph
