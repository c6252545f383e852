"""``interlude undo SESSION --to CHECKPOINT [--dry-run] [--by NAME] [--skip CALL ...]
[--node NAME]``: take a session back to a checkpoint, the compensations of the calls made
since running newest first (``Agent.undo_async``; a graph's or swarm's node with ``--node``:
its ``undo_async(..., node=...)``). See docs/undo.md.

The plan is made first (a dry run: nothing changes), so a call without a compensation (not
``--skip``-ped), an unknown checkpoint or a stopped run is refused before anything runs. Then
the undo runs in this process, and the command says what each compensation did (the session's
new ``undo`` audit entries) and where the session stands, with the command to run next."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from .._agent import Agent, UndoPlan
from .._sync import run_sync
from ..errors import UndoError, UnknownCheckpointError
from ._errors import CliError, _run
from ._hints import answer_hints, app_flag, program, store_flag
from ._stores import _await, _store
from ._words import _interrupt_json

if TYPE_CHECKING:
    from .._agent import Checkpoint
    from ..operate import Opened
    from ._render import Output

__all__ = ["undo_command"]

Undo = Callable[[bool], Coroutine[Any, Any, Any]]
"""The session's undo, given ``dry_run``: the plan, or the result of carrying it out."""


def undo_command(args: argparse.Namespace, out: Output) -> int:
    """Print the plan (``--dry-run``), or carry it out and say what was undone and where the
    session stands."""
    from ._apps import _session_agent
    from ._commands import _operator

    opened = _session_agent(args)
    by = args.by or _operator()
    skip = list(args.skip or [])
    target, undo = _undo_of(args, opened, by, skip)
    plan = _planned(args, opened, undo)
    if args.dry_run:
        _print_plan(args, out, plan)
        return 0
    before = len(_undo_entries(args.store, target))
    result = _run(out, lambda: run_sync(undo(False)), args.session, args.store, opened)
    entries = _undo_entries(args.store, target)[before:]
    _print_done(args, out, opened, plan, result, entries, by)
    return 0


def _undo_of(
    args: argparse.Namespace, opened: Opened, by: str, skip: list[str]
) -> tuple[str, Undo]:
    """The session whose calls are undone (an agent's, or a graph node agent's) and its
    undo; ``--to`` read as ``history`` shows it."""
    session = args.session
    if isinstance(opened, Agent):
        if args.node is not None:
            raise CliError(
                f"session {session!r} is an agent's: --node names a node of a graph's or "
                "swarm's session",
                session=session,
            )
        to = _checkpoint(args, session, opened.checkpoints())
        agent = opened

        def undo_agent(dry: bool) -> Coroutine[Any, Any, Any]:
            if dry:
                return agent.undo_async(to, by=by, skip=skip, dry_run=True)
            return agent.undo_async(to, by=by, skip=skip)

        return session, undo_agent
    if args.node is None:
        raise CliError(
            f"session {session!r} is a {opened.kind}'s: name the node whose calls to undo with "
            f"--node NAME (`{program()} history{store_flag(args.store)} "
            f"{shlex.quote(session + ':node:NAME')}` lists its checkpoints)",
            session=session,
        )
    node = args.node
    try:
        points = opened.node_checkpoints(node)
    except UndoError as exc:
        raise CliError(f"session {session!r}: {exc}", session=session) from None
    to = _checkpoint(args, f"{session}:node:{node}", points)
    graph = opened

    def undo(dry: bool) -> Coroutine[Any, Any, Any]:
        if dry:
            return graph.undo_async(to, node=node, by=by, skip=skip, dry_run=True)
        return graph.undo_async(to, node=node, by=by, skip=skip)

    return f"{session}:node:{node}", undo


def _checkpoint(args: argparse.Namespace, session: str, points: list[Checkpoint]) -> str:
    from ._history import _checkpoint_id

    args.to = _checkpoint_id(session, args.to, points)
    return str(args.to)


def _planned(args: argparse.Namespace, opened: Opened, undo: Undo) -> UndoPlan:
    """The undo's plan; CliError (nothing changed) when it cannot run as asked."""
    session = args.session
    try:
        plan = run_sync(undo(True))
    except UnknownCheckpointError as exc:
        listed = f"{program()} history{store_flag(args.store)} {shlex.quote(_listed(args))}"
        raise CliError(
            f"session {session!r}: {exc}; `{listed}` lists its checkpoints; nothing was changed",
            session=session,
        ) from None
    except UndoError as exc:
        raise CliError(_refused(args, opened, exc), session=session) from None
    if not isinstance(plan, UndoPlan):  # pragma: no cover - a dry run returns its plan
        raise CliError(f"session {session!r}: the undo returned no plan", session=session)
    return plan


def _listed(args: argparse.Namespace) -> str:
    return args.session if args.node is None else f"{args.session}:node:{args.node}"


def _refused(args: argparse.Namespace, opened: Opened, exc: UndoError) -> str:
    """Why the undo cannot run, in the command's words, and what to do instead."""
    session = args.session
    flags = store_flag(args.store) + app_flag(args.app)
    text = str(exc).replace(" (@tool(compensate=...))", "")
    text = text.replace("; skip= it to leave it as it is", "").replace("skip= ", "--skip ")
    if exc.calls and not set(exc.calls) <= set(args.skip or []):
        again = [
            *(["--node", args.node] if args.node else []),
            session,
            "--to",
            args.to,
            *(a for c in [*(args.skip or []), *exc.calls] for a in ("--skip", c)),
        ]
        them = "it as it is" if len(exc.calls) == 1 else "them as they are"
        return (
            f"session {session!r}: {text}; nothing was changed. To undo the others and leave "
            f"{them}: {program()} undo{flags} {shlex.join(again)}"
        )
    if opened.needs_recovery and not opened.is_paused:
        return (
            f"session {session!r} holds a stopped run (an undo under way, or a run whose process "
            f"stopped): carry it on first with `{program()} recover{flags} "
            f"{shlex.quote(session)}`, or drop it with `{program()} discard{flags} "
            f"{shlex.quote(session)}`; nothing was changed"
        )
    return f"session {session!r}: {text}; nothing was changed"


def _undo_entries(store: str, session_id: str) -> list[dict[str, Any]]:
    """The session's audit entries an undo recorded (named ``undo``), oldest first."""
    stored = _await(_store(store).load(session_id))
    if stored is None:
        return []
    return [a for a in stored.audit if isinstance(a, dict) and a.get("name") == "undo"]


def _stands(plan: UndoPlan) -> str:
    return {
        "stopped": "before its next step (a stopped run: `recover` carries it on from there)",
        "idle": "between runs (its run had ended there: it takes a new prompt)",
        "paused": "at that open question (nothing ran after it)",
    }.get(plan.stands, plan.stands)


def _print_plan(args: argparse.Namespace, out: Output, plan: UndoPlan) -> None:
    if out.json_mode:
        out._json({"session": args.session, "node": args.node, "dry_run": True, **plan.to_dict()})
        return
    where = _where(args)
    n = len(plan.steps)
    out._say(
        f"{where}: undoing to {plan.to} runs {n} compensation{'s' if n != 1 else ''}, newest first:"
    )
    for line, step in zip(plan.lines(), [*plan.steps, *plan.skipped], strict=False):
        out._say(f"  {line}")
        out._say(f"      input {_brief(step.input)}, result {_brief(step.result)}", "dim")
    if not plan.steps and not plan.skipped:
        out._say("  (nothing to undo)")
    out._say(f"It then stands at {plan.to}, {_stands(plan)}.")
    out._say("Nothing was changed (--dry-run). Undo it with:")
    again = [
        *(["--node", args.node] if args.node else []),
        args.session,
        "--to",
        plan.to,
        *(a for s in plan.skipped for a in ("--skip", s.call_id)),
    ]
    flags = store_flag(args.store) + app_flag(out.app)
    out._say(f"  {program()} undo{flags} {shlex.join(again)}", "cyan")


def _brief(value: Any) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _where(args: argparse.Namespace) -> str:
    node = f" (node {args.node})" if args.node else ""
    return f"session {args.session}{node}"


def _print_done(
    args: argparse.Namespace,
    out: Output,
    opened: Opened,
    plan: UndoPlan,
    result: Any,
    entries: list[dict[str, Any]],
    by: str,
) -> None:
    """What was undone (the new ``undo`` audit entries), and where the session stands."""
    waits = list(getattr(result, "interrupts", []) or [])
    stands = "paused" if waits else "stopped" if opened.needs_recovery else "idle"
    if out.json_mode:
        out._json(
            {
                "session": args.session,
                "node": args.node,
                "to": plan.to,
                "by": by,
                "stop_reason": getattr(result, "stop_reason", None),
                "undone": [_entry_json(e) for e in entries],
                "stands": stands,
                "interrupts": [_interrupt_json(i) for i in waits],
            }
        )
        return
    out._say(f"{_where(args)}: undone to {plan.to} by {by}, newest first:")
    for e in entries:
        out._say(f"  {_entry_words(e)}")
    if not entries:
        out._say("  (nothing to undo)")
    flags = store_flag(args.store) + app_flag(out.app)
    session = shlex.quote(args.session)
    if waits:
        out._say("The undo waits on a question before its next compensation:")
        for q in waits:
            tool = f" ({q.tool_use.name})" if q.tool_use is not None else ""
            out._say(f"  {q.name}{tool}, id: {q.id}")
        out._say("Answer with (the undo then carries on):")
        out.hints(answer_hints(args.session, waits, flags))
    elif stands == "stopped":
        out._say(f"It stands at {plan.to}, before its next step; carry the run on with:")
        out._say(f"  {program()} recover{flags} {session}", "cyan")
    else:
        out._say(f"It stands at {plan.to}, between runs: it takes a new prompt (`run`).")


def _entry_json(entry: dict[str, Any]) -> dict[str, Any]:
    answer = entry.get("answer")
    about = dict(answer) if isinstance(answer, dict) else {}
    return {**about, "by": entry.get("by"), "at": entry.get("at")}


def _entry_words(entry: dict[str, Any]) -> str:
    """An ``undo`` audit entry in words: ``c5  mail  -> mail.undo: success, "retracted"``."""
    from ._words import undo_words

    return undo_words(entry, with_by=False)
