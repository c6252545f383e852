"""What the command prints for a graph's or swarm's session (``interlude.multiagent``): how a
run ended and what ``show`` says, and ``run`` on one. Answering, expiring, recovering and
discarding are the same commands as an agent's (the session is a ``Resumable`` either way)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import ResumeError
from ._errors import CliError, _what
from ._hints import answer_hints, app_flag, show_command, store_flag
from ._render import Output
from ._words import _interrupt_json, _named, _shown

if TYPE_CHECKING:
    from ..multiagent import Graph, MultiAgentResult, Swarm
    from ..sessions import StoredSession

__all__ = ["graph_outcome", "run_graph", "show_graph"]


def run_graph(args: argparse.Namespace, out: Output, graph: Graph | Swarm, new: bool) -> int:
    """``run NAME SESSION PROMPT`` on a graph: start it (or give it a new task)."""
    if not new and (graph.is_paused or graph.needs_recovery):
        waits = (
            "questions: answer them first"
            if graph.is_paused
            else "a stopped run: carry it on with `recover` first"
        )
        raise CliError(f"session {args.session!r} waits on {waits}", session=args.session)
    result = _run(out, lambda: graph(args.prompt), args, graph)
    graph_outcome(out, args.session, result, args.store)
    return 0


def _run(
    out: Output, call: Callable[[], MultiAgentResult], args: argparse.Namespace, graph: object
) -> MultiAgentResult:
    """Run the graph; a failure becomes a CliError that says what became of the session."""
    try:
        with out.working("the graph is working"):
            return call()
    except Exception as exc:
        see = f"see `{show_command(args.session, args.store)}`"
        if isinstance(exc, ResumeError):
            message = f"the answer was refused ({_what(exc)}); the session is unchanged"
        else:
            message = f"the run failed ({_what(exc)}); what completed is saved: {see}"
        raise CliError(f"session {args.session!r}: {message}", session=args.session) from None


def graph_outcome(out: Output, session_id: str, result: MultiAgentResult, store: str) -> None:
    """How a graph's run ended: the nodes that finished, the reply, the questions left."""
    if out.json_mode:
        out._json(
            {
                "session": session_id,
                "stop_reason": result.stop_reason,
                "reply": str(result),
                "order": list(result.order),
                "interrupts": [_interrupt_json(i) for i in result.interrupts],
            }
        )
        return
    out._say(f"session {session_id}: nodes finished: {', '.join(result.order) or 'none'}")
    if result.stop_reason != "interrupt":
        out._say(str(result))
        out._say(f"\nThe run ended ({result.stop_reason}).", "bold green")
        return
    out._say(f"\nPaused: {len(result.interrupts)} question(s) wait for a person.", "bold")
    for i in result.interrupts:
        out._say(f"  {_named(i)}: {_shown(i)}")
        out._say(f"    id: {i.id}", "dim")
    out._say("\nAnswer with:")
    out.hints(answer_hints(session_id, result.interrupts, store_flag(store) + app_flag(out.app)))


def show_graph(
    out: Output, session_id: str, stored: StoredSession, store: str, agents: frozenset[str]
) -> int:
    """``show SESSION`` on a graph's session: its state of play and its questions, node by
    node (read from the store: no --app needed), and the commands that carry it on (the app
    in use has ``agents``)."""
    from ..multiagent import read_record

    record = read_record(stored)
    state = record.status
    if out.json_mode:
        out._json(
            {
                "session": session_id,
                "kind": record.kind,
                "agent": stored.agent,
                "version": stored.version,
                "status": state,
                "paused": bool(record.questions),
                "started": list(record.started),
                "interrupts": [_interrupt_json(i) for i in record.questions],
            }
        )
        return 0
    who = "no name" if stored.agent is None else stored.agent
    out._say(f"session {session_id} ({record.kind} {who}, version {stored.version})", "bold")
    if state == "running":
        out._say(
            f"A run is in progress, or stopped before it finished (nodes started: "
            f"{', '.join(record.started)}); if it stopped, carry it on as below.",
            "yellow",
        )
    elif not record.questions:
        out._say("Not paused.")
    else:
        out._say(f"Paused, waiting on {len(record.questions)} question(s):", "bold")
        for i in record.questions:
            out._say(f"  {_named(i)}: {_shown(i)}")
            out._say(f"    id: {i.id}", "dim")
    out._say(
        f"Each node's agent keeps its conversation in session {session_id}:node:<node>.", "dim"
    )
    if state == "running" or record.questions:
        out.next_steps(session_id, stored.agent, store, list(record.questions), agents)
    return 0
