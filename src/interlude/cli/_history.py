"""``interlude history SESSION`` and ``interlude fork SESSION --at CHECKPOINT [--as NEW]``: a
session's record as checkpoints, and a new session standing at one of them (see
docs/time-travel.md)."""

from __future__ import annotations

import argparse
import shlex
from typing import TYPE_CHECKING, Any

from .._agent import Agent
from .._messages import ToolResult
from ..errors import UnknownCheckpointError
from ._errors import CliError
from ._hints import answer_hints, app_flag, app_missing, program, short_id, store_flag
from ._stores import _await, _store
from ._words import result_summary

if TYPE_CHECKING:
    from .._agent import Checkpoint
    from .._messages import Message
    from ._render import Output

__all__ = ["fork_command", "history_command"]


def history_command(args: argparse.Namespace, out: Output) -> int:
    """Print the session's checkpoints, oldest first (no App needed: read from the store),
    and the command that forks it at its latest question."""
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
    summaries = [_summary(p, decoded.messages) for p in points]
    if out.json_mode:
        out._json(
            {
                "session": args.session,
                "checkpoints": [
                    {"id": p.id, "kind": p.kind, "when": p.when, "summary": summary}
                    for p, summary in zip(points, summaries, strict=True)
                ],
            }
        )
        return 0
    out._say(f"session {args.session}: {len(points)} checkpoints, oldest first")
    ids = [_shown_id(p) for p in points]
    width = max((len(i) for i in ids), default=0)
    for p, shown, summary in zip(points, ids, summaries, strict=True):
        when = "" if p.when is None else _clock(p.when)
        out._say(f"  {shown:<{width}}  {p.kind:<11}  {when:<19}  {summary}".rstrip())
    if any(p.kind == "question" for p in points):
        out._say("(a question's ID is its short id, as `pending` shows; --json gives it in full)")
    _fork_hint(args, out, stored.agent, points, decoded.messages)
    return 0


def _summary(point: Checkpoint, messages: list[Message]) -> str:
    """A checkpoint's summary; a batch of tool results summed up here, JSON ones included."""
    if point.kind != "tool_result":
        return point.summary
    results = [b for b in messages[point.message_index].content if isinstance(b, ToolResult)]
    return "; ".join(f"{r.status}: {result_summary(r, 40)}" for r in results)


def _shown_id(point: Checkpoint) -> str:
    if point.kind == "question":
        return short_id(point.id)
    if point.kind == "answer":
        return "answer:" + short_id(point.id.removeprefix("answer:"))
    return point.id


def _fork_hint(
    args: argparse.Namespace,
    out: Output,
    agent: str | None,
    points: list[Checkpoint],
    messages: list[Message],
) -> None:
    """The command that forks the session at its latest question about a tool call (the
    step most often taken again), else at its last message."""
    about_calls = [p for p in points if p.kind == "question" and _about_a_call(p, messages)]
    at = (
        _shown_id(about_calls[-1])
        if about_calls
        else next((p.id for p in reversed(points) if p.id.startswith("m")), None)
    )
    if at is None:
        return
    from ._apps import _app_agents

    missing = app_missing(agent, _app_agents(args.app), out.app)
    if missing is not None:
        out._say(f"\nTo fork it: {missing}.", "dim")
        return
    flags = store_flag(args.store) + app_flag(out.app)
    out._say("\nFork it at a checkpoint (a new session; this one does not change), e.g.:")
    out._say(f"  {program()} fork{flags} {shlex.quote(args.session)} --at {at}", "cyan")


def _about_a_call(point: Checkpoint, messages: list[Message]) -> bool:
    """Whether a question checkpoint asks about a tool call of the model reply it follows
    (such a question can be asked again by a fork; one about no call cannot)."""
    if not 0 <= point.message_index < len(messages):
        return False
    uses = messages[point.message_index].tool_uses
    return any(f":{u.id}:" in point.id for u in uses)


def fork_command(args: argparse.Namespace, out: Output) -> int:
    """Fork the session at ``--at`` into ``--as`` (or a new id), with the ``--app`` agent;
    the new session's trail names ``--by`` as who forked it."""
    from ._apps import _session_agent
    from ._commands import _operator

    agent = _session_agent(args)
    if not isinstance(agent, Agent):
        raise CliError(
            f"session {args.session!r} is a graph's or swarm's: fork an agent's session",
            session=args.session,
        )
    at = _checkpoint_id(args.session, args.at, agent.checkpoints())
    try:
        fork = agent.fork(at, args.new, by=args.by or _operator())
    except UnknownCheckpointError as exc:
        listed = f"{program()} history{store_flag(args.store)} {shlex.quote(args.session)}"
        raise CliError(
            f"session {args.session!r}: {exc}; `{listed}` lists its checkpoints",
            session=args.session,
        ) from None
    if out.json_mode:
        pending: list[dict[str, Any]] = [
            {"id": q.id, "name": q.name, "tool": None if q.tool_use is None else q.tool_use.name}
            for q in fork.interrupts
        ]
        out._json({"session": args.session, "fork": fork.session_id, "at": at, "pending": pending})
        return 0
    new = fork.session_id or ""
    out._say(f"session {args.session}: forked at {at} into {new}")
    flags = store_flag(args.store) + app_flag(out.app)
    if fork.is_paused:
        out._say("It waits on:")
        for q in fork.interrupts:
            tool = f" ({q.tool_use.name})" if q.tool_use is not None else ""
            out._say(f"  {q.name}{tool}, id: {q.id}")
        out._say("Answer with:")
        out.hints(answer_hints(new, fork.interrupts, flags))
    elif fork.needs_recovery:
        out._say("It stands before its next step; carry it on with:")
        out._say(f"  {program()} recover{flags} {shlex.quote(new)}", "cyan")
    elif fork.name is None:
        out._say("Its run had ended there; it takes a new prompt (`run` with its agent's name).")
    else:
        out._say("Its run had ended there; it takes a new prompt, e.g.:")
        named = f"{shlex.quote(fork.name)} {shlex.quote(new)}"
        out._say(f"  {program()} run{flags} {named} 'Carry on.'", "cyan")
    return 0


def _checkpoint_id(session: str, given: str, points: list[Checkpoint]) -> str:
    """The checkpoint ``given`` names: its id, a question's answer key (``SESSION/ID``) or
    short id (as ``pending`` and ``history`` show it), each also after ``answer:``. Anything
    else is passed on as it is: the fork says the record has no such checkpoint."""
    from ..errors import InterludeError
    from ..operate import question_id_of

    prefix = "answer:" if given.startswith("answer:") else ""
    key = given.removeprefix(prefix)
    try:
        key = question_id_of(session, key)
    except InterludeError as exc:
        raise CliError(f"session {session!r}: {exc}", session=session) from None
    ids = {p.id for p in points}
    if prefix + key in ids or key in ids:
        return prefix + key if prefix + key in ids else key
    questions = {p.id for p in points if p.kind == "question" and short_id(p.id) == key.lower()}
    if len(questions) == 1:
        return prefix + questions.pop()
    return given


def _clock(when: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(when, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
