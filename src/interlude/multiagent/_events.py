"""What a graph or swarm hands out: node hook events, stream events, its state and result.

``BeforeNodeCallEvent`` and ``AfterNodeCallEvent`` are hook events of the orchestration's own
registry (``graph.hooks``): both can ``interrupt(...)`` (the question pauses the whole
orchestration, with the node's marker in its ``via``), and the first can ``cancel(...)`` the
node. Their questions have the sources ``before_node_call`` / ``after_node_call`` and the
node's run as scope: ``v1:before_node_call:<node>.<run number>:<uuid5(name)>`` (distinct per
run of the node, so an answer to one run's question never answers the next's).

``event.agent`` is an ``AgentView``: the node's agent, or for a nested graph or swarm a
:class:`NestedView` (its name, session id, questions, clock; ``messages``, ``state`` and
``audit`` raise :class:`~interlude.errors.NestedNodeError`); ``event.nested`` is the nested
graph or swarm itself (None for an agent's node).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias, cast

from .._interrupt import Answers, Interrupt, InterruptSource
from .._messages import ToolUse
from .._result import AgentResult, StopReason
from .._stream import StreamEvent
from ..hooks import HookEvent

if TYPE_CHECKING:
    from .._view import AgentView
    from ..errors import InterruptExpiredError
    from ._base import Orchestration

__all__ = [
    "AfterNodeCallEvent",
    "BeforeNodeCallEvent",
    "GraphState",
    "MultiAgentFinished",
    "MultiAgentResult",
    "MultiAgentStreamEvent",
    "NodeEvent",
    "NodeFinished",
    "NodeHookEvent",
    "NodeStarted",
    "expired_message",
    "node_marker",
    "node_path",
]

_MARK = "node:"


def node_marker(node: str) -> ToolUse:
    """The entry a question gets in front of its ``via`` when it comes up through ``node``."""
    return ToolUse(f"{_MARK}{node}", node, {})


def node_path(question: Interrupt) -> tuple[str, ...]:
    """The nodes a question came up through, outermost first (empty: asked by no node)."""
    return tuple(u.name for u in question.via if u.id == f"{_MARK}{u.name}" and not u.input)


@dataclass(frozen=True, slots=True, kw_only=True)
class GraphState:
    """What an edge condition (and a node hook) sees of the run: read-only."""

    task: str
    results: Mapping[str, AgentResult]
    """Each finished node's last result."""
    runs: Mapping[str, int]
    """How often each node has run in this invocation."""
    order: tuple[str, ...]
    """The nodes in the order they finished."""


class NodeHookEvent(HookEvent):
    """Base of the node events: ``node``, ``prompt`` (what the node is given) and ``state``.

    ``agent`` is the node's agent, or a :class:`NestedView` of a nested graph or swarm;
    ``nested`` is that graph or swarm (None for an agent's node)."""

    __slots__ = ("node", "prompt", "state")
    node: str
    prompt: str
    state: GraphState

    def __init__(
        self,
        agent: AgentView,
        node: str,
        prompt: str,
        state: GraphState,
        *,
        scope: str | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(agent, scope=node if scope is None else scope, **kw)
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "prompt", prompt)
        object.__setattr__(self, "state", state)

    @property
    def nested(self) -> Orchestration | None:
        """The nested graph or swarm this node runs (its own copy), or None for an agent."""
        agent: object = self.agent
        return agent.orchestration if isinstance(agent, NestedView) else None


class NestedView:
    """What a node hook sees as ``event.agent`` for a nested graph or swarm: the parts of an
    ``AgentView`` a graph has. ``messages``, ``state`` and ``audit`` are an agent's alone:
    they raise :class:`~interlude.errors.NestedNodeError` (read ``event.nested`` instead)."""

    __slots__ = ("_node", "orchestration")

    model: Any = None
    system_prompt: str | None = None

    def __init__(self, node: str, orchestration: Orchestration) -> None:
        self._node = node
        self.orchestration = orchestration

    def _refuse(self, what: str) -> Any:
        from ..errors import NestedNodeError

        raise NestedNodeError(
            f"node {self._node!r} runs a {self.orchestration.kind}, which has no {what}: read "
            "event.nested (its record, its nodes) instead"
        )

    @property
    def name(self) -> str | None:
        return self.orchestration.name or self._node

    @property
    def messages(self) -> list[Any]:
        return cast("list[Any]", self._refuse("conversation (messages)"))

    @property
    def state(self) -> dict[str, Any]:
        return cast("dict[str, Any]", self._refuse("agent state"))

    @property
    def audit(self) -> list[Any]:
        return cast("list[Any]", self._refuse("agent audit trail (read its .audit)"))

    @property
    def tools(self) -> dict[str, Any]:
        return {}

    @property
    def session_id(self) -> str | None:
        return self.orchestration.session_id

    @property
    def interrupts(self) -> list[Interrupt]:
        return self.orchestration.interrupts

    @staticmethod
    def clock() -> float:
        import time

        return time.time()


def node_view(node: Any) -> AgentView:
    """What a node's hooks see as ``event.agent`` (the node's ``view``)."""
    return cast("AgentView", node.view)


def expired_message(exc: InterruptExpiredError) -> str:
    """The cancel message of a node not run because its approval expired."""
    if exc.interrupt is not None:
        return f"not run: the question {exc.interrupt.name!r} expired without an answer"
    return f"not run: a question expired without an answer ({exc})"


class BeforeNodeCallEvent(NodeHookEvent):
    """A node is about to run: approve it (``interrupt``), or ``cancel(message)`` it."""

    __slots__ = ("cancel_message",)
    cancel_message: str | None
    _source: InterruptSource = "before_node_call"
    _writable: ClassVar[Mapping[str, type | tuple[type, ...]]] = {
        "cancel_message": (str, type(None))
    }

    def __init__(
        self, agent: AgentView, node: str, prompt: str, state: GraphState, **kw: Any
    ) -> None:
        super().__init__(agent, node, prompt, state, **kw)
        object.__setattr__(self, "cancel_message", None)

    def cancel(self, message: str = "the node was cancelled") -> None:
        """Do not run the node: its result is ``message`` (stop reason ``"cancelled"``) and
        the nodes after it do not run."""
        self.cancel_message = message


class AfterNodeCallEvent(NodeHookEvent):
    """A node finished with ``result``: review it (``interrupt``) before the run goes on."""

    __slots__ = ("result",)
    result: AgentResult
    _source: InterruptSource = "after_node_call"
    reverse_order = True

    def __init__(
        self,
        agent: AgentView,
        node: str,
        prompt: str,
        state: GraphState,
        result: AgentResult,
        **kw: Any,
    ) -> None:
        super().__init__(agent, node, prompt, state, **kw)
        object.__setattr__(self, "result", result)


def hook_answers(
    values: Mapping[str, Any],
    clock: Any,
    expired: tuple[str, ...] = (),
    asked: tuple[Interrupt, ...] = (),
) -> Answers:
    """The answers a node event's ``interrupt`` looks up (``expired``: settled by their
    deadline; those without a value decline when asked again)."""
    return Answers(values=values, expired=expired, asked={q.id: q for q in asked}, clock=clock)


@dataclass(frozen=True, slots=True, kw_only=True)
class MultiAgentResult:
    """How a graph or swarm run ended.

    ``nodes`` maps each node that finished to its last result (a node cancelled by a
    ``BeforeNodeCallEvent`` has stop reason ``"cancelled"`` and the cancel message as its
    text); ``order`` lists the nodes in the order they finished; ``interrupts`` the questions
    waiting when ``stop_reason == "interrupt"``. ``str(result)`` is the text of the node that
    finished last.
    """

    stop_reason: StopReason
    interrupts: list[Interrupt] = field(default_factory=list)
    nodes: dict[str, AgentResult] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return str(self.nodes[self.order[-1]]) if self.order else ""


@dataclass(frozen=True, slots=True)
class NodeStarted:
    """A node begins (or, after a resume, carries on) a run."""

    node: str


@dataclass(frozen=True, slots=True)
class NodeEvent:
    """An event of a node's own run, tagged with the node (nested: the inner event is
    itself a ``NodeEvent`` of the inner orchestration)."""

    node: str
    event: StreamEvent | NodeEvent | NodeStarted | NodeFinished


@dataclass(frozen=True, slots=True)
class NodeFinished:
    """A node finished (or was cancelled) with ``result``."""

    node: str
    result: AgentResult


@dataclass(frozen=True, slots=True)
class MultiAgentFinished:
    """The last event of an orchestration's stream: its result."""

    result: MultiAgentResult


MultiAgentStreamEvent: TypeAlias = NodeStarted | NodeEvent | NodeFinished | MultiAgentFinished
