"""A graph's or a swarm's AG-UI run (one registered with ``@app.graph``), on the agents' route.

Each node's run is an AG-UI *subagent*: ``SUBAGENT_STARTED`` (its ``name`` the node's,
``parentSubagentRunId`` the enclosing node's for a nested graph's node), the node's text and
tool calls attributed to it by ``subagentRunId``, then ``SUBAGENT_FINISHED``: ``success`` with
the node's reply as ``result`` when it finished, ``suspended`` with the ids of its questions
when the run paused on them. A question is the same interrupt the agent path sends, with
``subagentRunId`` and ``metadata.interlude.nodePath`` naming the node that asked. A run's
``subagentRunId`` is the node path (``writer``, ``trip/planner``), ``#2``, ``#3``... for a node
that runs again in the same run (a cycle): a node resumed in the next run carries the id it
paused with. A node's tool call ids have its path in front (``writer:t1``): two nodes' models
number their calls alike.

A new task is streamed (``stream_async``). The answers of a ``resume[]`` go through the
operator floor (``Operator.answer``: the rules every door applies, the first answer wins), which
resumes the graph and returns how it ended; the nodes that finished in that resume are then
sent as subagents with their replies. A recovery (a thread whose process died mid-run) is sent
the same way.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from .._stream import MessageAppended, StreamEvent
from ._resume import Refused, prompt_of, resume_of, stored_view
from ._translate import METADATA_KEY, Translator, finished, node_path_of

if TYPE_CHECKING:
    from ag_ui.core import BaseEvent, RunAgentInput

    from .._interrupt import Interrupt
    from .._result import AgentResult
    from ..multiagent import (
        Graph,
        MultiAgentResult,
        MultiAgentStreamEvent,
        NodeEvent,
        NodeFinished,
        NodeStarted,
        Swarm,
    )
    from ..operate import Operator, Resumable, SessionView

    NodeSignal: TypeAlias = "NodeStarted | NodeEvent | NodeFinished"

__all__ = ["NodeTranslator", "graph_events"]

Path: TypeAlias = tuple[str, ...]


@dataclass(slots=True)
class _Running:
    """A node's subagent open in this run: its id and the translator of its events."""

    run_id: str
    translator: Translator


class NodeTranslator:
    """Turns one graph run's events into AG-UI events, each node's run a subagent."""

    def __init__(self, thread_id: str) -> None:
        self._thread = thread_id
        self._open: dict[Path, _Running] = {}  # in the order they started
        self._ids: dict[Path, str] = {}  # each node path's latest subagent id in this run
        self._runs: dict[Path, int] = {}  # how many subagents each node path had in this run

    def events(
        self, event: MultiAgentStreamEvent | NodeSignal, within: Path = ()
    ) -> Iterator[BaseEvent]:
        """The AG-UI events of one event of the graph (``within``: the nested node it came
        through); none for the final ``MultiAgentFinished``, which the run reports."""
        from ..multiagent import NodeEvent, NodeFinished, NodeStarted

        if isinstance(event, NodeStarted):
            yield from self._start((*within, event.node))
        elif isinstance(event, NodeFinished):
            yield from self._finish((*within, event.node), event.result)
        elif isinstance(event, NodeEvent):
            path = (*within, event.node)
            inner = event.event
            if isinstance(inner, NodeStarted | NodeEvent | NodeFinished):
                yield from self.events(inner, path)
            else:
                yield from self._start(path)
                yield from self._open[path].translator.events(inner)

    def subagent_of(self, question: Interrupt) -> str | None:
        """The subagent id of the node that asked ``question`` (None: no node did)."""
        return self._ids.get(node_path_of(question))

    def suspend(self, questions: list[Interrupt]) -> Iterator[BaseEvent]:
        """End the run's subagents: each node that asks one of ``questions`` (started in this
        run or earlier) is suspended on the ids of its own; any other still open too."""
        from ..operate import answer_key

        asking: dict[Path, list[str]] = {}
        for q in questions:
            path = node_path_of(q)
            if path:
                yield from self._start(path)
                asking.setdefault(path, []).append(answer_key(self._thread, q.id))
        for path in sorted(self._open, key=len, reverse=True):  # the innermost first
            yield from self._end(path, asking.get(path, []))

    def close(self) -> Iterator[BaseEvent]:
        """End the text messages and tool calls still open (before RUN_ERROR, RUN_FINISHED)."""
        for running in self._open.values():
            yield from running.translator.close()

    def _start(self, path: Path) -> Iterator[BaseEvent]:
        from ag_ui.core import SubagentStartedEvent

        if path in self._open:
            return
        if len(path) > 1:
            yield from self._start(path[:-1])
        runs = self._runs[path] = self._runs.get(path, 0) + 1
        run_id = "/".join(path) + ("" if runs == 1 else f"#{runs}")
        self._ids[path] = run_id
        self._open[path] = _Running(run_id, Translator(run_id, path))
        parent = None if len(path) == 1 else self._ids[path[:-1]]
        yield SubagentStartedEvent(
            subagent_run_id=run_id, name=path[-1], parent_subagent_run_id=parent
        )

    def _finish(self, path: Path, result: AgentResult) -> Iterator[BaseEvent]:
        """End a node's subagent that finished: ``success``, its reply as the ``result``
        (a node its hooks cancelled too: ``metadata.interlude.stopReason`` says so)."""
        from ag_ui.core import SubagentFinishedEvent, SubagentFinishedSuccessOutcome

        yield from self._start(path)  # a node cancelled before it started (its hooks)
        for inner in [p for p in self._open if p[: len(path)] == path and p != path]:
            yield from self._end(inner, [])
        running = self._open.pop(path)
        yield from running.translator.close()
        stop = result.stop_reason
        yield SubagentFinishedEvent(
            subagent_run_id=running.run_id,
            outcome=SubagentFinishedSuccessOutcome(),
            result=str(result) or None,
            metadata=None if stop == "end_turn" else {METADATA_KEY: {"stopReason": stop}},
        )

    def _end(self, path: Path, questions: list[str]) -> Iterator[BaseEvent]:
        """End an open node's subagent as suspended (on ``questions``, its own)."""
        from ag_ui.core import SubagentFinishedEvent, SubagentFinishedSuspendedOutcome

        running = self._open.pop(path)
        yield from running.translator.close()
        outcome = SubagentFinishedSuspendedOutcome(interrupt_ids=questions or None)
        yield SubagentFinishedEvent(subagent_run_id=running.run_id, outcome=outcome)


async def graph_events(
    operator: Operator,
    name: str,
    run: RunAgentInput,
    by: str,
    groups: tuple[str, ...],
    translator: NodeTranslator,
) -> AsyncIterator[BaseEvent]:
    """The events of one run of graph ``name`` (after RUN_STARTED): a new task streamed, or
    the answers of ``run.resume`` applied through the floor, or a stopped run recovered."""
    from ..multiagent import MultiAgentFinished

    thread = run.thread_id
    graph, view = await _open(operator, name, run)
    done_before = len(graph.record.order)
    result: MultiAgentResult | None = None
    if run.resume and view is not None:
        result = await _resumed(operator, graph, run, by, groups)
    elif graph.needs_recovery:
        result = await graph.recover_async()
    else:
        async for event in graph.stream_async(prompt_of(run)):
            if isinstance(event, MultiAgentFinished):
                result = event.result
                done_before = len(result.order)  # the nodes that finished were streamed
            for out in translator.events(event):
                yield out
    assert result is not None, "a graph's stream ends with MultiAgentFinished"
    for signal in _finished_nodes(result, done_before):
        for out in translator.events(signal):
            yield out
    waiting = result.interrupts if result.stop_reason == "interrupt" else []
    for out in translator.suspend(waiting):
        yield out
    for out in finished(
        thread,
        run.run_id,
        result.stop_reason,
        result.interrupts,
        translator,
        subagent_of=translator.subagent_of,
    ):
        yield out


async def _open(
    operator: Operator, name: str, run: RunAgentInput
) -> tuple[Graph | Swarm, SessionView | None]:
    """The thread's graph and its stored session (None: a new session of ``name``)."""
    from ..multiagent import Graph, Swarm

    view = await stored_view(operator, name, run)
    if view is None:
        opened = await operator.start(name, run.thread_id)
    else:
        opened = await operator.open(run.thread_id)
    if not isinstance(opened, Graph | Swarm):  # an agent's session under a graph's name
        raise Refused("unknown_agent", f"thread {run.thread_id!r} is not {name!r}'s session")
    return opened, view


async def _resumed(
    operator: Operator,
    graph: Graph | Swarm,
    run: RunAgentInput,
    by: str,
    groups: tuple[str, ...],
) -> MultiAgentResult:
    """How the graph ended after the answers of ``run.resume``: recorded and applied by the
    floor (or by a worker that got there first: then the session as it stands), or, when the
    entries only cancel questions past their deadline, their settling by it."""
    from ..multiagent import MultiAgentResult

    thread = run.thread_id
    plan = resume_of(thread, run.resume or [], graph.interrupts, time.time())
    if not plan.answers:
        return await graph.resume_expired_async()
    opened, outcome = await operator.answer(
        thread, plan.answers, by=by, groups=groups, shown=plan.shown or None
    )
    if isinstance(outcome, MultiAgentResult):
        return outcome
    return _standing(opened)


def _standing(opened: Resumable) -> MultiAgentResult:
    """Where a graph's session stands, as a result (its answers were applied elsewhere)."""
    from ..multiagent import Graph, MultiAgentResult, Swarm

    if not isinstance(opened, Graph | Swarm):
        raise Refused("unknown_agent", f"session {opened.session_id!r} is not a graph's")
    record = opened.record
    return MultiAgentResult(
        stop_reason="interrupt" if opened.is_paused else "end_turn",
        interrupts=list(opened.interrupts),
        nodes=dict(record.results),
        order=list(record.order),
    )


def _finished_nodes(result: MultiAgentResult, before: int) -> Iterator[NodeSignal]:
    """The nodes that finished after the first ``before`` of ``result.order``, each as a
    node's start, reply and end (for a run that was not streamed)."""
    from ..multiagent import NodeEvent, NodeFinished, NodeStarted

    for node in dict.fromkeys(result.order[before:]):
        reply = result.nodes.get(node)
        if reply is None:
            continue
        yield NodeStarted(node)
        if reply.message is not None:
            appended: StreamEvent = MessageAppended(reply.message)
            yield NodeEvent(node, appended)
        yield NodeFinished(node, reply)
