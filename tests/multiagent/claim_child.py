"""A graph resumed in a child process that stops at its claim, for test_graph_claims.py.

``python claim_child.py <db> <log> <question id> <ready fd> <go fd> <when>``: resume the paused
``prep -> ship`` graph; at the graph's claim save (``when``: ``before`` or ``after`` the store's
save) write one byte to ``ready`` and wait for one byte on ``go``, so the test decides the
order of two processes without sleeping. Prints ``{"stop": ...}`` or ``{"conflict": ...}``.
"""

from __future__ import annotations

import json
import os
import sys

from interlude import Agent, ToolContext, ToolUse, tool
from interlude.errors import SessionConflictError
from interlude.multiagent import Graph
from interlude.sessions import SessionStore, SessionUpdate, SQLiteStore
from interlude.testing import ScriptedModel

SESSION = "race-1"


def race_graph(store: SessionStore, log: str, prep: list[object], ship: list[object]) -> Graph:
    @tool
    def release(context: ToolContext) -> str:
        """Release, once a person approved."""
        if context.interrupt("approve") is not True:
            return "not approved"
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"released by {os.getpid()}\n".encode())
        finally:
            os.close(fd)
        return "released"

    return Graph(
        {
            "prep": Agent(ScriptedModel(prep), name="prep"),
            "ship": Agent(ScriptedModel(ship), tools=[release], name="ship"),
        },
        [("prep", "ship")],
        entry="prep",
        session=store,
        session_id=SESSION,
    )


def ship_turns() -> list[object]:
    return [[ToolUse("r1", "release", {})], "shipped"]


class Gate:
    """A store that stops at the graph's first claim save until the test says go."""

    def __init__(self, inner: SQLiteStore, ready: int, go: int, when: str) -> None:
        self._inner, self._ready, self._go, self._when, self._done = inner, ready, go, when, False

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    def _wait(self) -> None:
        self._done = True
        os.write(self._ready, b"r")
        os.read(self._go, 1)

    async def save(self, session_id: str, update: SessionUpdate) -> int:
        gate = session_id == SESSION and update.claim is not None and not self._done
        if gate and self._when == "before":
            self._wait()
        version = await self._inner.save(session_id, update)
        if gate and self._when == "after":
            self._wait()
        return version


def main() -> None:
    db, log, qid, ready, go, when = sys.argv[1:7]
    store = Gate(SQLiteStore(db), int(ready), int(go), when)
    graph = race_graph(store, log, [], ["shipped"])  # type: ignore[arg-type]
    try:
        result = graph.resume({qid: True})
    except SessionConflictError as exc:
        print(json.dumps({"conflict": str(exc)}))
        return
    print(json.dumps({"stop": result.stop_reason, "text": str(result)}))


if __name__ == "__main__":
    main()
