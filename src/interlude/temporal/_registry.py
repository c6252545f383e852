"""What a worker process knows: its App and activity options, by task queue.

This module is passed through the workflow sandbox (all of ``interlude`` is), so the
workflow code and the activities of one process see the same registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from temporalio.common import RetryPolicy

from ..errors import ConfigurationError, UnknownAgentError
from ..operate import AgentSession, App

if TYPE_CHECKING:
    from .._agent import Agent
    from ..multiagent import Graph, Swarm
    from ..sessions import StoredSession

__all__ = [
    "DEFAULT_RETRY",
    "ActivityOptions",
    "Registration",
    "build_agent",
    "build_graph",
    "build_node_agent",
    "lookup",
    "register",
    "register_default",
]


DEFAULT_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=5)
"""The retry policy of :class:`ActivityOptions` left at its default (this very object)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivityOptions:
    """How one kind of activity (the model call, or one tool's body) is run by Temporal.

    A tool's exception is not an activity failure (it comes back as the tool's error result,
    as in the embedded engine): the retry policy covers lost workers and timeouts only.
    ``heartbeat_timeout``: the worker heartbeats for the body while it runs, so a worker that
    dies is noticed after this long (and a cancel is heard at the next heartbeat).

    ``retry_policy`` left at its default (:data:`DEFAULT_RETRY`, 5 attempts) gives a tool that
    is not ``idempotent`` a single attempt: when it is lost (a timeout: its worker died, or the
    body ran too long) the run pauses with the ``in_doubt`` question the embedded engine asks
    after a crash. An idempotent tool (or every tool of an ``Agent(in_doubt="rerun")``) is
    retried per the policy. A policy given here applies as given.

    ``local``: whether the call runs as a *local activity* (in the worker running the
    workflow's task, its result recorded as a marker: no activity task through the server).
    ``None`` (the default) lets Interlude choose: the model call and the bodies of tools that
    may run again (``idempotent``, or ``Agent(in_doubt="rerun")``) run locally, a tool that
    runs at most once as a regular activity (only a regular activity records in the history
    that its body started, which the ``in_doubt`` question needs). ``False``: always a regular
    activity (a long body, one for another worker). ``True``: always local, also for a tool
    that is not idempotent, which then runs *at least* once (a worker lost mid-body means the
    body runs again, and no ``in_doubt`` question is asked). Options that only a regular
    activity honours make it one when ``local`` is unset: a ``heartbeat_timeout`` given here
    (a local activity does not heartbeat: its loss is noticed when the workflow task times
    out, 10 s by default, and a cancel reaches it at once), or a ``task_queue`` (run the
    activity there; a worker for the same App must serve that queue).
    """

    start_to_close_timeout: timedelta = timedelta(minutes=5)
    heartbeat_timeout: timedelta | None = None
    retry_policy: RetryPolicy | None = field(default_factory=lambda: DEFAULT_RETRY)
    local: bool | None = None
    task_queue: str | None = None

    def runs_locally(self, may_run_again: bool, allowed: bool = True) -> bool:
        """Whether a call with these options runs as a local activity: ``may_run_again`` (a
        lost attempt may be run again), ``allowed`` (the worker's ``local_activities``)."""
        if self.task_queue is not None or self.local is False:
            return False
        if self.local is True:
            return True
        heartbeats = self.heartbeat_timeout is not None and self is not DEFAULT_TOOL
        return allowed and may_run_again and not heartbeats


DEFAULT_MODEL = ActivityOptions()
DEFAULT_TOOL = ActivityOptions(heartbeat_timeout=timedelta(seconds=30))


@dataclass(frozen=True, slots=True)
class Registration:
    app: App
    model: ActivityOptions
    tools: Mapping[str, ActivityOptions]
    local_activities: bool = True
    """The worker's default: calls whose options leave ``local`` unset may run locally."""

    def tool_options(self, name: str) -> ActivityOptions:
        return self.tools.get(name) or self.tools.get("*") or DEFAULT_TOOL


_BY_QUEUE: dict[str, Registration] = {}


def register(task_queue: str, registration: Registration) -> None:
    old = _BY_QUEUE.get(task_queue)
    if old is not None and old.app is not registration.app:
        raise ConfigurationError(
            f"task queue {task_queue!r} already serves another App in this process"
        )
    _BY_QUEUE[task_queue] = registration


_DEFAULT: list[Registration] = []


def register_default(registration: Registration) -> None:
    """The registration for task queues not registered (a Replayer's)."""
    _DEFAULT[:] = [registration]


def lookup(task_queue: str) -> Registration:
    found = _BY_QUEUE.get(task_queue)
    if found is None and _DEFAULT:
        found = _DEFAULT[0]
    if found is None:
        raise ConfigurationError(f"no Interlude app is registered for task queue {task_queue!r}")
    return found


class _NoStore:
    """The store a factory is given under Temporal: it holds nothing (the workflow history is
    the journal); the agent built on it is detached from it at once."""

    async def load(self, session_id: str) -> StoredSession | None:
        return None


def build_agent(app: App, name: str, run_id: str) -> Agent:
    """Agent ``name`` of ``app``, built by its factory, with no session."""
    from typing import cast

    from .._agent import Agent

    factory = app._factories.get(name)
    if factory is None:
        raise UnknownAgentError(f"no agent {name!r} in this app (its agents: {list(app.names)!r})")
    agent = factory(AgentSession(id=run_id, store=cast("object", _NoStore())))  # type: ignore[arg-type]
    if not isinstance(agent, Agent):
        raise ConfigurationError(f"the factory of agent {name!r} returned {agent!r}, not an Agent")
    app.govern(agent)
    agent.detach_session()  # no journal, no claims: the workflow history is the journal
    if agent.name is None:
        agent.name = name
    elif agent.name != name:
        raise ConfigurationError(
            f"the factory of agent {name!r} returned an agent named {agent.name!r}"
        )
    return agent


def build_graph(app: App, name: str, run_id: str) -> Graph | Swarm:
    """Graph (or swarm) ``name`` of ``app``, built by its factory, as a copy with no session
    (the workflow history is its journal)."""
    from typing import cast

    from ..multiagent import Graph, Swarm

    factory = app._graphs.get(name)
    if factory is None:
        raise UnknownAgentError(f"no agent {name!r} in this app (its agents: {list(app.names)!r})")
    built = factory(AgentSession(id=run_id, store=cast("object", _NoStore())))  # type: ignore[arg-type]
    if not isinstance(built, Graph | Swarm):
        raise ConfigurationError(
            f"the factory of graph {name!r} returned {built!r}, not a Graph or a Swarm"
        )
    copy = cast("Graph | Swarm", built.copy())  # no session: no journal, no claims
    app.govern(copy)
    if copy.name is None:
        copy.name = name
    elif copy.name != name:
        raise ConfigurationError(
            f"the factory of graph {name!r} returned a {copy.kind} named {copy.name!r}"
        )
    return copy


def build_node_agent(app: App, name: str, node: str, run_id: str) -> Agent:
    """The agent of node ``node`` of graph (or swarm) ``name`` (its own copy, with no session,
    with a swarm's handoff tool): what an activity of that node runs its calls with. ``node``
    is a path, ``outer/inner``, for a node of a graph or swarm that is itself a node."""
    from ..multiagent import AgentNode, OrchestrationNode

    orchestration: object = build_graph(app, name, run_id)
    *through, last = node.split("/")
    for part in through:
        found = getattr(orchestration, "nodes", {}).get(part)
        if not isinstance(found, OrchestrationNode):
            raise ConfigurationError(f"graph {name!r} has no graph or swarm node at {node!r}")
        orchestration = found.inner
    leaf = getattr(orchestration, "nodes", {}).get(last)
    if not isinstance(leaf, AgentNode):
        raise ConfigurationError(f"graph {name!r} has no agent node {node!r}")
    return leaf.agent
