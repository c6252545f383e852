"""Multi-agent orchestration: a ``Graph`` or a ``Swarm`` of agents whose nodes can stop for a
person, durable per node. Imported on its own (``import interlude`` does not load it).

Both are called like an agent (``graph(task)``, ``invoke_async``, ``stream_async``), pause when
any node asks a question (its hooks, its tools, its sub-agents, or the orchestration's own
``BeforeNodeCallEvent`` / ``AfterNodeCallEvent`` hooks), and carry on with ``resume``, in this
process or another one built the same way on the same session. A graph's node may itself be a
graph or a swarm (durable per node at every level); a run's first save is its claim, so two
processes never carry one session on at once. See docs/multiagent.md.
"""

# Besides the public names, the face carries (outside __all__) the seams the operator floor
# (interlude.operate) reads stored graph sessions through, and the base class and node kinds the
# Temporal engine runs graphs with, so that nothing outside this package imports its private
# modules.
from ._base import Orchestration as Orchestration
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
from ._nested import OrchestrationNode as OrchestrationNode
from ._nested import make_node as make_node
from ._nodes import AgentNode as AgentNode
from ._nodes import node_session_id as node_session_id
from ._stored import bound_to as bound_to
from ._stored import check_answers_for as check_answers_for
from ._stored import describe_node as describe_node
from ._stored import graph_of as graph_of
from ._stored import is_orchestration as is_orchestration
from ._stored import read_record as read_record
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
