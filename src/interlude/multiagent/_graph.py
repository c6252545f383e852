"""``Graph``: agents as nodes, edges (optionally conditional) between them.

A node runs when an edge into it fires (its source finished and the edge's condition holds)
and every node it depends on (every source of an edge into it) has finished at least once in
this invocation; entry nodes run first. Nodes ready together run concurrently. Cycles are
allowed: a node runs again each time an edge into it fires, at most ``max_node_runs`` times
per invocation (more raises :class:`~interlude.errors.NodeRunLimitError`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._agent import Agent
from ..errors import ConfigurationError, NodeRunLimitError
from ._base import Orchestration
from ._events import GraphState
from ._nested import make_node
from ._nodes import check_node_name
from ._record import with_text

if TYPE_CHECKING:
    from ..hooks import HookProvider
    from ..sessions import SessionStore
    from ._record import NodeRun, Record, Task

__all__ = ["Condition", "Edge", "Graph"]

Condition = Callable[[GraphState], bool]
Edge = tuple[str, str] | tuple[str, str, Condition]


class Graph(Orchestration):
    """Agents as nodes of a directed graph; called, paused, resumed and saved like an agent.

    ``nodes`` maps node names to agents (each node runs its own copy); ``edges`` are
    ``(a, b)`` or ``(a, b, condition)``, ``condition(state)`` seeing a read-only
    :class:`GraphState`; ``entry`` is the node (or nodes) that get the task first.
    """

    kind = "graph"

    def __init__(
        self,
        nodes: Mapping[str, Agent | Orchestration],
        edges: Iterable[Edge] = (),
        entry: str | Sequence[str] = (),
        *,
        session: SessionStore | str | None = None,
        session_id: str | None = None,
        name: str | None = None,
        max_node_runs: int | None = None,
        hooks: Iterable[HookProvider] = (),
        session_lease: float = 30.0,
    ) -> None:
        if not isinstance(nodes, Mapping) or not nodes:
            raise ConfigurationError("a graph needs at least one node: nodes={name: agent}")
        if max_node_runs is not None and (
            not isinstance(max_node_runs, int)
            or isinstance(max_node_runs, bool)
            or max_node_runs < 1
        ):
            raise ConfigurationError(f"max_node_runs must be None or >= 1, got {max_node_runs!r}")
        self._args: dict[str, Any] = {
            "nodes": dict(nodes),
            "edges": list(edges),
            "entry": entry,
            "name": name,
            "max_node_runs": max_node_runs,
            "hooks": (),
            "session_lease": session_lease,
        }
        self._setup(name, hooks, session, session_id, session_lease)
        store, sid = self._node_session()
        self.nodes = {check_node_name(n): make_node(n, a, store, sid) for n, a in nodes.items()}
        self._edges = [self._edge(e) for e in self._args["edges"]]
        entries = [entry] if isinstance(entry, str) else list(entry)
        if not entries or any(e not in self.nodes for e in entries):
            raise ConfigurationError(
                f"entry must name one or more of the nodes {sorted(self.nodes)}, got {entry!r}"
            )
        self._entry = tuple(dict.fromkeys(entries))
        self.max_node_runs = max_node_runs

    def _edge(self, edge: object) -> tuple[str, str, Condition | None]:
        if not isinstance(edge, tuple) or len(edge) not in (2, 3):
            raise ConfigurationError(f"an edge is (a, b) or (a, b, condition), got {edge!r}")
        source, target = edge[0], edge[1]
        condition = edge[2] if len(edge) == 3 else None
        for end in (source, target):
            if end not in self.nodes:
                raise ConfigurationError(f"edge {edge!r}: no node named {end!r}")
        if condition is not None and not callable(condition):
            raise ConfigurationError(f"edge {edge!r}: the condition is not callable")
        return source, target, condition

    def copy_on(self, session: SessionStore | None, session_id: str | None) -> Graph:
        args = {**self._args, "name": self.name, "session_lease": self.session_lease}
        graph = Graph(**args, session=session, session_id=session_id)  # the name as it is now
        graph.hooks = self.hooks.copy()
        if self._policies is not None:
            graph.govern(*self._policies)
        return graph

    def entry_nodes(self) -> tuple[str, ...]:
        return self._entry

    def check_limit(self, name: str, record: Record) -> None:
        limit = self.max_node_runs
        if limit is not None and record.runs.get(name, 0) >= limit:
            raise NodeRunLimitError(
                f"node {name!r} would run a {limit + 1}th time; max_node_runs is {limit}"
            )

    def takers(self, name: str) -> set[str]:
        """The targets of the edges out of ``name`` (what a node undo checks)."""
        return {t for s, t, _ in self._edges if s == name}

    def _sources(self, name: str) -> list[str]:
        return list(dict.fromkeys(s for s, t, _ in self._edges if t == name))

    def prompt(self, name: str, record: Record) -> Task:
        """The task, with the latest reply of each node it depends on."""
        task = record.task or ""
        inputs = [(s, record.results[s]) for s in self._sources(name) if s in record.results]
        if not inputs:
            return task
        parts = [f"From {s}:\n{r}" for s, r in inputs]
        return with_text(task, "Inputs from earlier nodes:\n" + "\n\n".join(parts))

    def after_finish(self, name: str, run: NodeRun, record: Record) -> Record:
        state = self.state(record)  # with this node's result
        ready = list(record.ready)
        for source, target, condition in self._edges:
            if source != name or target in ready:
                continue
            if condition is not None and not condition(state):
                continue
            if all(s in record.results for s in self._sources(target)):
                ready.append(target)
        return record.but(ready=tuple(ready))
