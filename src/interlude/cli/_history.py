"""``interlude history SESSION`` and ``interlude fork SESSION --at ID [--as NEW]``: a session's
record as checkpoints, and a new session standing at one of them (see docs/time-travel.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .._agent import Agent
from ._errors import CliError
from ._stores import _await, _store

if TYPE_CHECKING:
    from ._render import Output

__all__ = ["fork_command", "history_command"]


def history_command(args: argparse.Namespace, out: Output) -> int:
    """Print the session's checkpoints, oldest first (no App needed: read from the store)."""
    from .._agent import checkpoints_of, decode_stored
    from .._audit import AuditEntry

    stored = _await(_store(args.store).load(args.session))
    if stored is None:
        raise CliError(f"no session {args.session!r} in {args.store}")
    if "interlude.orchestration" in stored.state:
        raise CliError(
            f"session {args.session!r} is a graph's or swarm's: history lists an agent's "
            "session (its nodes' sessions are agents')",
            session=args.session,
        )
    decoded = decode_stored(stored)
    audit = [AuditEntry.from_dict(a) for a in stored.audit if isinstance(a, dict)]
    pending = decoded.pause.interrupts if decoded.pause is not None else []
    points = checkpoints_of(decoded.messages, audit, pending)
    if out.json_mode:
        out._json(
            {
                "session": args.session,
                "checkpoints": [
                    {"id": p.id, "kind": p.kind, "when": p.when, "summary": p.summary}
                    for p in points
                ],
            }
        )
        return 0
    out._say(f"session {args.session}: {len(points)} checkpoints, oldest first")
    for p in points:
        when = "" if p.when is None else _clock(p.when)
        out._say(f"  {p.id:<20.80}  {p.kind:<11}  {when:<19}  {p.summary}")
    return 0


def fork_command(args: argparse.Namespace, out: Output) -> int:
    """Fork the session at ``--at`` into ``--as`` (or a new id), with the ``--app`` agent."""
    from ._apps import _session_agent
    from ._commands import _operator

    agent = _session_agent(args)
    if not isinstance(agent, Agent):
        raise CliError(
            f"session {args.session!r} is a graph's or swarm's: fork an agent's session",
            session=args.session,
        )
    fork = agent.fork(args.at, args.new, by=_operator())
    pending: list[dict[str, Any]] = [
        {"id": q.id, "name": q.name, "tool": None if q.tool_use is None else q.tool_use.name}
        for q in fork.interrupts
    ]
    if out.json_mode:
        out._json(
            {"session": args.session, "fork": fork.session_id, "at": args.at, "pending": pending}
        )
        return 0
    out._say(f"session {args.session}: forked at {args.at} into {fork.session_id}")
    if pending:
        out._say("it waits on:")
        for q in pending:
            out._say(f"  {q['id']}  {q['name']}" + (f" ({q['tool']})" if q["tool"] else ""))
        out._say(f"answer with: interlude answer {fork.session_id} <id> <answer>")
    else:
        out._say(f"carry it on with: interlude recover {fork.session_id}")
    return 0


def _clock(when: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(when, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
