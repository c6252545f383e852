"""A graph whose node is a swarm whose agent uses an agent as a tool, for test_nested.py.

``python nested_child.py <db> <question id> <answer>``: a fresh process builds the same graph
on the same store, giving each model only the replies still to come (a model asked twice
fails the script), answers the question asked three levels down and prints the result.
"""

from __future__ import annotations

import json
import sys

from interlude import Agent, ToolContext, ToolUse, tool
from interlude.multiagent import Graph, Swarm
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel

SESSION = "nest-1"


@tool
def hold_room(context: ToolContext, city: str) -> str:
    """Hold a hotel room, once a person approved.

    Args:
        city: Where.
    """
    answer = context.interrupt("hold_room", reason=f"hold a room in {city}?")
    return f"room in {city}: {'held' if answer is True else 'not held'}"


def nested_graph(db: str, turns: dict[str, list[object]]) -> Graph:
    booker = Agent(ScriptedModel(turns["booker"]), tools=[hold_room], name="booker")
    planner = Agent(ScriptedModel(turns["planner"]), tools=[booker.as_tool()], name="planner")
    critic = Agent(ScriptedModel(turns["critic"]), name="critic")
    return Graph(
        {
            "research": Agent(ScriptedModel(turns["research"]), name="research"),
            "trip": Swarm([planner, critic], entry="planner"),
            "summary": Agent(ScriptedModel(turns["summary"]), name="summary"),
        },
        [("research", "trip"), ("trip", "summary")],
        entry="research",
        session=SQLiteStore(db),
        session_id=SESSION,
    )


FIRST: dict[str, list[object]] = {
    "research": ["Lisbon is warm in May."],
    "planner": [[ToolUse("b1", "booker", {"prompt": "hold a room in Lisbon"})]],
    "booker": [[ToolUse("h1", "hold_room", {"city": "Lisbon"})]],
    "critic": [],
    "summary": [],
}
SECOND: dict[str, list[object]] = {
    "research": [],
    "planner": ["Plan: five days in Lisbon, room held."],
    "booker": ["The room in Lisbon is held."],
    "critic": [],
    "summary": ["Summary: Lisbon, room held."],
}


def main() -> None:
    db, qid, answer = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    graph = nested_graph(db, SECOND)
    assert graph.is_paused and [q.id for q in graph.interrupts] == [qid]
    result = graph.resume({qid: answer}, by="ana")
    print(json.dumps({"order": result.order, "text": str(result), "stop": result.stop_reason,
                      "trip": str(result.nodes["trip"])}))  # fmt: skip


if __name__ == "__main__":
    main()
