"""Multi-agent orchestration: a ``Graph`` or a ``Swarm`` of agents whose nodes can stop for a
person, durable per node. Imported on its own (``import interlude`` does not load it).

Both are called like an agent (``graph(task)``, ``invoke_async``, ``stream_async``), pause when
any node asks a question (its hooks, its tools, its sub-agents, or the orchestration's own
``BeforeNodeCallEvent`` / ``AfterNodeCallEvent`` hooks), and carry on with ``resume``, in this
process or another one built the same way on the same session. A graph's node may itself be a
graph or a swarm (durable per node at every level); a run's first save is its claim, so two
processes never carry one session on at once. See docs/multiagent.md.
"""

from ._events import (
    AfterNodeCallEvent,
    BeforeNodeCallEvent,
    GraphState,
    MultiAgentFinished,
    MultiAgentResult,
    MultiAgentStreamEvent,
    NestedView,
    NodeEvent,
    NodeFinished,
    NodeHookEvent,
    NodeStarted,
    node_path,
)
from ._graph import Condition, Edge, Graph
from ._swarm import HANDOFF, Swarm

__all__ = [
    "HANDOFF",
    "AfterNodeCallEvent",
    "BeforeNodeCallEvent",
    "Condition",
    "Edge",
    "Graph",
    "GraphState",
    "MultiAgentFinished",
    "MultiAgentResult",
    "MultiAgentStreamEvent",
    "NestedView",
    "NodeEvent",
    "NodeFinished",
    "NodeHookEvent",
    "NodeStarted",
    "Swarm",
    "node_path",
]
