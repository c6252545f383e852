"""The graph crash matrix's processes: a three-node graph that SIGKILLs itself at a chosen point.

Run from the repository root (``python -m tests.multiagent.graph_crash_child matrix --store
sqlite --dir D``) in a fresh interpreter that has made no event loop, store or thread, so that
every process below is a ``fork`` of it (the machinery is ``tests/support/crash.py``, shared with
the agent's matrix, tests/durability/crash_child.py).

The scenario: ``research -> review -> publish``. Each node's model asks for its one tool, then
answers with the tool's result in its text. ``research``'s tool is ``fetch``, ``publish``'s is
``post``; ``review``'s tool ``sign`` asks a person (``approve``) before its side effect, so the
graph pauses inside ``review``. Phase 1 is the first invocation (to that pause), phase 2 the
resume (to the end).

Two more scenarios (``--scenario``), the same agents and tools in other shapes:

- ``swarm``: a swarm of ``research`` and ``review``; ``research``'s model asks for ``fetch`` and
  the handoff to ``review`` in one turn, then answers; ``review`` pauses as above.
- ``nested``: ``research -> team -> publish``, where ``team`` is a swarm whose one agent is
  ``review`` (so the approval is asked two levels down, and ``team`` keeps its own record in its
  own session). The node hooks are on every level, so ``node.review.*`` are points too.
- ``member``: a swarm of ``research`` and ``team``, a graph whose one node is ``review``:
  ``research`` hands off to the graph member, whose agent pauses (a swarm member that is a
  graph: it ends the swarm's run with its reply).

Instrumented points (``<label>#<k>``, the k-th time this process reached the label):

- ``node.<n>.before`` / ``node.<n>.after``: the graph's ``BeforeNodeCallEvent`` (before a node
  starts) and ``AfterNodeCallEvent`` (it finished; the graph has not saved its record yet);
- ``tool.<t>.before_effect`` / ``.after_effect``: inside a tool, around its one side effect;
- ``model.<n>.L<k>``: node ``n``'s model was asked (conversation length ``k``);
- ``save.<who>.before`` / ``.after``: around every store save, ``who`` being ``graph`` (the
  graph's record: its claim, each node recorded, the pause, the end) or a node's name (that
  node agent's own saves: its claim, journal, pause, end).

Every process appends events to ``events.jsonl`` (single ``write``s to an O_APPEND file, so a
kill loses none): the points, each model request (``ask``), each side effect (``effect``),
each node that finished (``node_done``), each save the store committed (``commit``), and for
the recovering process the in-doubt questions and any refusal (``conflict``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from interlude import Agent, Interrupt, ToolContext, ToolResult, ToolUse, tool
from interlude.multiagent import HANDOFF, AfterNodeCallEvent, BeforeNodeCallEvent, Graph, Swarm
from interlude.sessions import SessionStore, SessionUpdate
from interlude.testing import FunctionModel, ModelRequest
from interlude.testing._models import Turn
from tests.support import crash
from tests.support.crash import APPROVAL, Points

MODULE = "tests.multiagent.graph_crash_child"
PROMPT = "Ship the release notes."
NODES = ("research", "review", "publish")
TOOLS = {"research": "fetch", "review": "sign", "publish": "post"}
RESULTS = {"fetch": "fetched 3 changes", "sign": "signed", "post": "posted"}
LEASE = 30.0
SHAPE = ["flat"]  # set by main (before any fork)
ORDER = {
    "flat": NODES,
    "swarm": ("research", "review"),
    "nested": ("research", "team", "publish"),
    "member": ("research", "team"),
}
"""The top level's nodes in the order they finish."""
AGENTS = {
    "flat": NODES,
    "swarm": ("research", "review"),
    "nested": NODES,
    "member": ("research", "review"),
}
"""The agents (at any level) of each scenario."""


class CrashStore(crash.CrashStore):
    """Each save is a kill point before and after (``save.graph.*`` for the graph's record,
    ``save.<node>.*`` for a node agent's session), and is logged."""

    def __init__(self, inner: SessionStore, points: Points, graph_id: str) -> None:
        super().__init__(inner, points)
        self.graph_id = graph_id

    def who(self, session_id: str) -> str:
        return "graph" if session_id == self.graph_id else session_id.rsplit(":", 1)[-1]

    def committed(self, session_id: str, update: SessionUpdate) -> dict[str, Any]:
        record = (update.state or {}).get("interlude.orchestration")
        status = record.get("status") if isinstance(record, dict) else None
        return {
            "who": self.who(session_id),
            "claim": update.claim is not None,
            "paused": bool(update.pending),
            "status": status,
            "final": update.pause is None and update.claim is None,
        }

    async def audit_trail(self, session_id: str) -> Any:
        return await self.inner.audit_trail(session_id)  # type: ignore[attr-defined]


_POINTS: list[Points] = []


async def _effect(context: ToolContext) -> str:
    points, name = _POINTS[-1], context.tool_use.name
    points.reach(f"tool.{name}.before_effect")
    points.event("effect", tool=name)
    points.reach(f"tool.{name}.after_effect")
    return RESULTS[name]


@tool
async def fetch(context: ToolContext) -> str:
    """Fetch the changes."""
    return await _effect(context)


@tool
async def sign(context: ToolContext) -> str:
    """Sign the release, once a person approved it."""
    if context.interrupt(APPROVAL, reason="sign the release?") is not True:
        return "not approved"
    return await _effect(context)


@tool
async def post(context: ToolContext) -> str:
    """Post the notes."""
    return await _effect(context)


def expected_text(node: str) -> str:
    """The final text of a top-level node (``team`` says what its ``review`` said)."""
    agent = "review" if node == "team" else node
    return f"{agent} done: {RESULTS[TOOLS[agent]]}"


def _model(node: str, points: Points) -> FunctionModel:
    def reply(request: ModelRequest) -> Turn:
        n = len(request.messages)
        points.event("ask", node=node, length=n)
        points.reach(f"model.{node}.L{n}")
        if n == 1:
            use = ToolUse(f"{node}-1", TOOLS[node], {})
            if SHAPE[0] in ("swarm", "member") and node == "research":
                target = "review" if SHAPE[0] == "swarm" else "team"
                message = {"agent_name": target, "message": "sign it"}
                return [use, ToolUse(f"{node}-h", HANDOFF, message)]
            return [use]
        if n == 3:
            results = [
                b
                for b in request.messages[2].content
                if isinstance(b, ToolResult) and b.tool_use_id == f"{node}-1"
            ]
            return f"{node} done: " + ", ".join(r.content[0].text for r in results)  # type: ignore[union-attr]
        raise AssertionError(f"node {node} has no reply for {n} messages")

    return FunctionModel(reply)


def build(store: SessionStore, graph_id: str, points: Points) -> Graph | Swarm:
    """The scenario's graph or swarm on ``store`` (wrapped so every save is a kill point)."""
    _POINTS[:] = [points]
    tools = {"fetch": fetch, "sign": sign, "post": post}
    agents = {
        n: Agent(_model(n, points), tools=[tools[TOOLS[n]]], name=n, session_lease=LEASE)
        for n in NODES
    }

    def before(event: BeforeNodeCallEvent) -> None:
        points.reach(f"node.{event.node}.before")

    def after(event: AfterNodeCallEvent) -> None:
        points.event("node_done", node=event.node)
        points.reach(f"node.{event.node}.after")

    settings: dict[str, Any] = {
        "session": CrashStore(store, points, graph_id),
        "session_id": graph_id,
        "name": "release",
        "session_lease": LEASE,
    }
    graph: Graph | Swarm
    if SHAPE[0] == "swarm":
        graph = Swarm([agents["research"], agents["review"]], entry="research", **settings)
    elif SHAPE[0] == "member":
        team = Graph({"review": agents["review"]}, entry="review", name="team")
        team.hooks.add_callback(BeforeNodeCallEvent, before)  # copied with it
        team.hooks.add_callback(AfterNodeCallEvent, after)
        graph = Swarm([agents["research"], team], entry="research", **settings)
    else:
        middle: Agent | Swarm = agents["review"]
        if SHAPE[0] == "nested":  # its hooks are copied with it: every level's nodes
            middle = Swarm([agents["review"]], name="team", session_lease=LEASE)
            middle.hooks.add_callback(BeforeNodeCallEvent, before)
            middle.hooks.add_callback(AfterNodeCallEvent, after)
        key = str(middle.name)
        graph = Graph(
            {"research": agents["research"], key: middle, "publish": agents["publish"]},
            [("research", key), (key, "publish")],
            entry="research",
            **settings,
        )
    graph.hooks.add_callback(BeforeNodeCallEvent, before)
    graph.hooks.add_callback(AfterNodeCallEvent, after)
    return graph


def _effects(log: Path) -> set[str]:
    lines = log.read_text().splitlines() if log.exists() else []
    return {e["tool"] for e in map(json.loads, lines) if e["ev"] == "effect"}


def answer_in_doubt(question: Interrupt, points: Points, directory: Path) -> Any:
    """An in-doubt call: its real result if its effect is in the log, else run it again."""
    assert question.tool_use is not None
    name = question.tool_use.name
    points.event("in_doubt", tool=name)
    done = name in _effects(directory / crash.EVENTS)
    return {"result": RESULTS[name]} if done else "rerun"


def final_record(store: SessionStore, graph_id: str) -> dict[str, Any]:
    final = crash.load(store, graph_id)
    return {
        "final": None if final is None else final.state.get("interlude.orchestration"),
        "claim": None if final is None else final.claim,
    }


SCENARIO = crash.Scenario(
    prompt=PROMPT,
    build=build,
    session_prefix="g-",
    answer_in_doubt=answer_in_doubt,
    after_recovery=final_record,
)


def _scenario(args: argparse.Namespace) -> crash.Scenario:
    SHAPE[0] = args.scenario
    return SCENARIO


def main(argv: list[str]) -> int:
    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--scenario", choices=sorted(ORDER), default="flat")

    fetch.spec, sign.spec, post.spec  # noqa: B018  (built once, before forking)
    return crash.main(argv, _scenario, options=options)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
