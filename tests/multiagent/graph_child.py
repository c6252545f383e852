"""A graph run in a child process, for tests/multiagent/test_graph_durable.py.

``python graph_child.py <db> <phase> [answer id]``. The graph: ``research`` then ``writer``;
every process builds it the same way, giving each model only the replies still to come, so a
model asked twice fails the script (ScriptError).

- ``resume``: answer the writer's question (asked in the test's own process) and finish.
- ``crash``: run ``fetch -> work``: ``work``'s tool kills the process (SIGKILL) mid-call,
  after ``fetch`` finished and was recorded.
- ``recover``: a fresh process recovers the killed run.

Prints the result as JSON: the nodes in the order they finished and the final text.
"""

from __future__ import annotations

import json
import os
import signal
import sys

from interlude import Agent, ToolContext, ToolUse, tool
from interlude.multiagent import Graph
from interlude.sessions import SQLiteStore
from interlude.testing import ScriptedModel

SESSION = "trip-42"


@tool
def ask(context: ToolContext, what: str) -> str:
    """Ask a person.

    Args:
        what: The question.
    """
    return f"{what}: {context.interrupt('ask', reason=what)}"


def writer_graph(db: str, research: list[object], writer: list[object]) -> Graph:
    return Graph(
        {
            "research": Agent(ScriptedModel(research), name="research"),
            "writer": Agent(ScriptedModel(writer), tools=[ask], name="writer"),
        },
        [("research", "writer")],
        entry="research",
        session=SQLiteStore(db),
        session_id=SESSION,
        name="trip",
    )


def crash_graph(db: str, fetch: list[object], work: list[object], kill: bool) -> Graph:
    @tool(idempotent=True)
    def do_work() -> str:
        """Do the work (safe to repeat)."""
        if kill:
            os.kill(os.getpid(), signal.SIGKILL)
        return "worked"

    return Graph(
        {
            "fetch": Agent(ScriptedModel(fetch), name="fetch"),
            "work": Agent(ScriptedModel(work), tools=[do_work], name="work"),
        },
        [("fetch", "work")],
        entry="fetch",
        session=SQLiteStore(db),
        session_id="crash-1",
        name="crashy",
    )


def main() -> None:
    db, phase = sys.argv[1], sys.argv[2]
    if phase == "resume":
        graph = writer_graph(db, [], ["Written."])  # research finished; writer's 2nd reply
        result = graph.resume({sys.argv[3]: "Lisbon"})
    elif phase == "crash":
        graph = crash_graph(db, ["fetched"], [[ToolUse("w1", "do_work", {})]], kill=True)
        result = graph("do it")
    else:
        graph = crash_graph(db, [], ["work done"], kill=False)  # fetch: nothing to ask again
        assert graph.needs_recovery and not graph.is_paused
        result = graph.recover()
    print(json.dumps({"order": result.order, "text": str(result), "stop": result.stop_reason}))


if __name__ == "__main__":
    main()
