"""``--dbos URL`` (or ``--dbos`` alone: the ``--store``'s PostgreSQL URL): ``pending``,
``answer``, ``show``, ``run`` and ``serve`` on agent runs of ``interlude.dbos`` (DBOS workflows
on PostgreSQL) instead of a session store, and ``dbos-worker``, the command that launches DBOS
(``demo`` does too, for as long as it runs).

The session a row names is the workflow id. ``pending`` and ``show`` read the runs' status and
attributes (no worker is asked); ``answer`` goes through ``interlude.dbos.answer``, the one
answer path (the workflow checks it as ``resume`` does: a refused answer changes nothing);
``run`` starts a run on the queue the workers listen to.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import shlex
import sys
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from ..errors import InterludeError, ResumeError
from ._errors import CliError, _what
from ._hints import answer_hints, program, short_id, store_flag
from ._render import Output
from ._temporal import _cli_process
from ._words import _interrupt_json, _shown, _transcript, audit_line

if TYPE_CHECKING:
    from .._interrupt import Interrupt

__all__ = [
    "DBOS_ALONE",
    "WAIT_FOR_PAUSE",
    "dbos_answer",
    "dbos_command",
    "dbos_demo",
    "dbos_flags",
    "dbos_pending",
    "dbos_run",
    "dbos_show",
    "dbos_where",
    "dbos_worker",
    "dbos_worker_command",
    "require_dbos",
]

T = TypeVar("T")

DBOS_ALONE = ""
"""The value of ``--dbos`` given without a URL: the ``--store``'s URL is taken (``_main``)."""

ANSWER_WAIT = 60.0
"""Seconds ``answer`` and ``run`` wait for the run to pause again or end before saying it
carries on."""
QUEUED_WAIT = 10.0
"""Seconds ``run`` waits for a worker to take a run off the queue before saying none did."""


def require_dbos(args: argparse.Namespace) -> str:
    """The ``--dbos`` URL, once the [dbos] extra is there and the URL is PostgreSQL's."""
    try:
        import dbos  # noqa: F401

        import interlude.dbos  # noqa: F401
    except ImportError as exc:
        raise CliError(
            f"--dbos needs the [dbos] extra ({exc.name} is missing): "
            "pip install 'interlude-agents[dbos]'"
        ) from None
    url = str(args.dbos)
    if urlsplit(url).scheme not in ("postgresql", "postgres") and not url.startswith("postgresql+"):
        raise CliError(f"--dbos takes a PostgreSQL URL (postgresql://user@host/db), got {url!r}")
    return url


def dbos_where(url: str) -> str:
    """``DBOS at URL``, its password hidden."""
    parts = urlsplit(url)
    if parts.password is not None:
        host = parts.netloc.rsplit("@", 1)[1]
        parts = parts._replace(netloc=f"{parts.username}:***@{host}")
    return f"DBOS at {urlunsplit(parts)}"


def dbos_flags(args: argparse.Namespace) -> str:
    """`` --dbos URL`` for the commands this one suggests (none when it is $INTERLUDE_DBOS);
    `` --store URL --dbos`` when ``--dbos`` came alone (``--store`` left out when it is
    $INTERLUDE_STORE)."""
    if getattr(args, "dbos_alone", False):
        return f"{store_flag(args.store)} --dbos"
    if args.dbos == os.environ.get("INTERLUDE_DBOS"):
        return ""
    return f" --dbos {shlex.quote(args.dbos)}"


def dbos_command(fn: Callable[[argparse.Namespace, Output], int]) -> Callable[..., int]:
    """``fn`` as a command that, in the ``interlude`` process itself, ends the process once it
    has printed everything (DBOS's threads may hold it: research notes, risk 6). Called
    in-process (``run(argv)``), it returns (or raises) as the other commands do."""

    @functools.wraps(fn)
    def command(args: argparse.Namespace, out: Output) -> int:
        if not _cli_process():
            return fn(args, out)
        try:
            code = fn(args, out)
        except CliError as exc:
            out.error(str(exc), session=exc.session, code=exc.refusal)
            code = 1
        except InterludeError as exc:
            out.error(str(exc))
            code = 1
        except KeyboardInterrupt:
            out.error("interrupted")
            code = 130
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    return command


def _call(args: argparse.Namespace, work: Coroutine[Any, Any, T]) -> T:
    """Run ``work``; a failure of the database (not a refusal) becomes one line."""
    try:
        return asyncio.run(work)
    except (InterludeError, KeyboardInterrupt):
        raise
    except Exception as exc:
        raise CliError(f"{dbos_where(args.dbos)}: {_what(exc)}") from None


# --- pending ------------------------------------------------------------------------------------


@dbos_command
def dbos_pending(args: argparse.Namespace, out: Output) -> int:
    from ..dbos import DBOSInbox

    url = require_dbos(args)
    now = time.time()
    entries = _call(
        args,
        DBOSInbox(url).pending(
            name=args.name,
            tool_name=args.tool,
            older_than=None if args.older_than is None else now - args.older_than,
            newer_than=None if args.newer_than is None else now - args.newer_than,
        ),
    )
    out.pending(entries, now, "", flags=dbos_flags(args))
    return 0


# --- answer -------------------------------------------------------------------------------------


@dbos_command
def dbos_answer(args: argparse.Namespace, out: Output) -> int:
    from .._json import DuplicateKeyError
    from .._json import loads as strict_json

    url = require_dbos(args)
    try:
        answer = strict_json(args.answer)
    except DuplicateKeyError as exc:
        raise CliError(f"the answer {args.answer!r:.80}: {exc}") from None
    except ValueError:
        raise CliError(
            f'the answer {args.answer!r} is not JSON (use true, false, 42, "text", {{...}})'
        ) from None
    return _call(args, _answer(args, out, url, answer))


async def _answer(args: argparse.Namespace, out: Output, url: str, answer: Any) -> int:
    from ..dbos import AnswerTimeoutError, describe, view_of
    from ..dbos import answer as send
    from ._commands import _operator

    sid = args.session
    status = await describe(url, sid)
    if status is None:
        raise CliError(f"no session {sid!r} on {dbos_where(url)}", session=sid)
    view = view_of(status)
    output = status.output if isinstance(status.output, dict) else {}
    answered = [str(i) for i in output.get("answered") or ()]  # an ended run's: refused by it
    interrupt_id = _question(args, view.interrupts, answered, status.status)
    question = next((i for i in view.interrupts if i.id == interrupt_id), None)
    if question is not None:
        out.answering(question)
    shown = None if args.shown is None else {interrupt_id: args.shown}
    try:
        with out.working("the run takes the answer"):
            await send(url, sid, {interrupt_id: answer}, by=args.by or _operator(), shown=shown)
    except ResumeError as exc:  # the run refused it: nothing changed
        raise CliError(
            f"session {sid!r}: the answer was refused ({_what(exc)}); the session is unchanged",
            session=sid,
            refusal=exc.code,
        ) from None
    except AnswerTimeoutError as exc:
        raise CliError(
            f"session {sid!r}: no reply in time ({_what(exc)}); the answer may still be applied "
            f"once a worker runs: see `{program()}{dbos_flags(args)} show {sid}`",
            session=sid,
        ) from None
    await _carried_on(args, out, url, sid, int(view.workflow["pause"]), "resumed")
    return 0


def _question(
    args: argparse.Namespace, pending: list[Interrupt], answered: list[str], status: str
) -> str:
    """The question ``args.interrupt_id`` names among ``pending`` (or, when none is, among
    the ``answered`` ones of an ended run): its id, answer key or short id. A full id that is
    not pending goes to the run, which says why it refuses it."""
    from ._commands import _interrupt_id

    sid, given = args.session, args.interrupt_id
    try:
        return _interrupt_id(sid, given, [i.id for i in pending] or answered)
    except CliError:
        if ":" in given:
            pass
        elif pending:
            raise
        else:
            how = "its run is going on" if status == "PENDING" else f"its run is {status}"
            raise CliError(
                f"session {sid!r} has no pending interrupt ({how})", session=sid
            ) from None
    from ..operate import question_id_of

    try:
        return question_id_of(sid, given)
    except InterludeError as exc:
        raise CliError(f"session {sid!r}: {exc}", session=sid) from None


async def _carried_on(
    args: argparse.Namespace, out: Output, url: str, sid: str, pause: int, what: str
) -> None:
    """Wait for the run to pause again or end, and print where it stands."""
    from ..dbos import wait_outcome

    queued = QUEUED_WAIT if what == "started" else None
    with out.working("the agent is working"):
        got = await wait_outcome(url, sid, after_pause=pause, timeout=ANSWER_WAIT, queued=queued)
    interrupts: list[Interrupt] = [] if got is None else list(got["interrupts"])
    if out.json_mode:
        out._json(
            {
                "session": sid,
                "status": None if got is None else got["status"],
                "stop_reason": None if got is None else got["stop_reason"],
                "reply": None if got is None else got["text"],
                "interrupts": [_interrupt_json(i) for i in interrupts],
            }
        )
        return
    out._say(f"session {sid}: {what}")
    if got is None:
        who = "no worker took it yet" if what == "started" else "it carries on"
        out._say(f"\nThe run is not done ({who}); see where it stands with:", "yellow")
        out._say(f"  {program()}{dbos_flags(args)} show {sid}", "cyan")
        return
    if got["text"]:
        out._say(f"assistant: {got['text']}")
    if got["failure"] is not None:
        out._say(f"\nThe run ended {got['status']}: {got['failure']}", "yellow")
    elif not interrupts:
        out._say(f"\nThe run ended ({got['stop_reason']}).", "bold green")
    else:
        out._say(f"\nPaused: {len(interrupts)} question(s) wait for a person.", "bold")
        for i in interrupts:
            out._say(f"  {i.name}: {_shown(i)}")
            out._say(f"    id: {i.id} ({short_id(i.id)})", "dim")
        out.hints(answer_hints(sid, interrupts, dbos_flags(args), expire=False))


# --- run ----------------------------------------------------------------------------------------


@dbos_command
def dbos_run(args: argparse.Namespace, out: Output) -> int:
    """``run AGENT SESSION PROMPT``: start a run of the --app's agent on the queue the DBOS
    workers listen to (the --app only checks the name: the workers' App runs it)."""
    from ._apps import _load_app

    url = require_dbos(args)
    app, which = _load_app(args.app)
    if args.agent_name not in app:
        raise CliError(
            f"{which} has no agent {args.agent_name!r} (its agents: "
            f"{', '.join(map(repr, app.names)) or 'none'}): pass --app module:attribute naming "
            "the interlude.App that registers it"
        )
    return _call(args, _run(args, out, url))


async def _run(args: argparse.Namespace, out: Output, url: str) -> int:
    from ..dbos import describe, start

    sid = args.session
    found = await describe(url, sid)
    if found is not None:
        raise CliError(
            f"session {sid!r} exists on {dbos_where(url)} (its run is {found.status}); with "
            "--dbos, run starts a new session: pick another id",
            session=sid,
        )
    await start(url, args.agent_name, sid, args.prompt)
    await _carried_on(args, out, url, sid, 0, "started")
    return 0


# --- show ---------------------------------------------------------------------------------------


@dbos_command
def dbos_show(args: argparse.Namespace, out: Output) -> int:
    url = require_dbos(args)
    return _call(args, _show(args, out, url))


async def _show(args: argparse.Namespace, out: Output, url: str) -> int:
    from ..dbos import describe, view_of

    sid = args.session
    status = await describe(url, sid)
    if status is None:
        raise CliError(f"no session {sid!r} on {dbos_where(url)}", session=sid)
    view = view_of(status)
    run = view.workflow
    if out.json_mode:
        output: dict[str, Any] = status.output if isinstance(status.output, dict) else {}
        exported = output.get("state")
        state: dict[str, Any] = exported if isinstance(exported, dict) else {}
        out._json(
            {
                "session": sid,
                "workflow": {k: run[k] for k in ("status", "executor_id", "queue", "started")}
                | {"closed": run["closed"]},
                "agent": view.agent,
                "paused": bool(view.interrupts),
                "running": view.running,
                "interrupts": [_interrupt_json(i) for i in view.interrupts],
                "stop_reason": run["stop_reason"],
                "reply": run["reply"],
                "failure": run["failure"],
                "messages": [m.to_dict() for m in view.messages],
                "state": state.get("state"),
                "audit": [a.to_dict() for a in view.audit],
            }
        )
        return 0
    who = "no agent name" if view.agent is None else f"agent {view.agent}"
    out._say(f"session {sid} ({who}, run {run['status']} on {dbos_where(url)})", "bold")
    for line in _transcript(view.messages):
        out._say(line)
    if view.interrupts:
        out._say(f"\nPaused, waiting on {len(view.interrupts)} question(s):", "bold")
        for i in view.interrupts:
            out._say(f"  {i.name}: {_shown(i)}")
            out._say(f"    id: {i.id}", "dim")
        out._say("(the conversation and the audit trail show here once the run has ended)", "dim")
        out.hints(answer_hints(sid, view.interrupts, dbos_flags(args), expire=False))
    elif view.running:
        out._say("\nRunning: no question is pending.")
    elif run["failure"] is None:
        out._say(f"\nThe run ended ({run['stop_reason']}).", "bold green")
    else:
        out._say(f"\nThe run is {run['status']}: {run['failure']}", "yellow")
    if view.audit:
        out._say(f"\nAudit trail ({len(view.audit)}):", "bold")
        for entry in view.audit:
            out._say(f"  {audit_line(entry.to_dict())}")
    return 0


# --- demo ---------------------------------------------------------------------------------------


WAIT_FOR_PAUSE = 60.0
"""Seconds ``demo`` waits for the run to reach its question."""


@dbos_command
def dbos_demo(args: argparse.Namespace, out: Output) -> int:
    """``demo`` on DBOS, with nothing else running: a DBOS worker of the built-in demo app in
    this process, for as long as the command runs, under an executor id of its own
    (``demo-worker-<hex>``: it recovers no other worker's runs); the demo agent started as
    ``demo-<n>`` (the first id the database has no run for) on the workers' queue; its pause
    awaited. The paused run belongs to that executor id: ``dbos-worker --executor-id
    demo-worker-<hex>`` takes it back (DBOS recovers an executor's own runs) and carries it on
    once answered; the commands are printed. A worker already running on the database may take
    the run off the queue instead: it then carries it on, and no worker is to start."""
    from ._demo import app

    url = require_dbos(args)
    if args.model:
        raise CliError(
            "--model does not apply with --dbos: the workers' app builds the agent "
            "(run the demo without --dbos to try a real model)"
        )
    if args.task_queue:
        raise CliError("--task-queue works with --temporal; DBOS runs start on its queue")
    executor = f"demo-worker-{uuid.uuid4().hex[:8]}"  # its own: it recovers no one's runs
    with _serving(
        url, app, executor, log_level="ERROR"
    ):  # first: it makes the system tables of a new database
        sid = args.session or _call(args, _free_demo_id(url))
        if args.session and _call(args, _exists(url, sid)):
            raise CliError(f"session {sid!r} exists on {dbos_where(url)}; pick another --session")
        got = _call(args, _start(args, out, url, sid))
    _report(out, args, sid, executor, got)
    return 0


async def _exists(url: str, sid: str) -> bool:
    from ..dbos import describe

    return await describe(url, sid) is not None


async def _free_demo_id(url: str) -> str:
    """The first ``demo-<n>`` the system database has no run for (going on or ended)."""
    n = 1
    while await _exists(url, f"demo-{n}"):
        n += 1
    return f"demo-{n}"


async def _start(args: argparse.Namespace, out: Output, url: str, sid: str) -> dict[str, Any]:
    """Start the demo agent as run ``sid`` and wait for its pause (or its end)."""
    from ..dbos import describe, start, view_of, wait_outcome
    from ._demo import NAME, PROMPT

    await start(url, NAME, sid, PROMPT)
    if not out.json_mode:
        out._say("Interlude demo: an agent that stops to ask before a risky tool.", "bold")
        out._say(f"{dbos_where(url)}   session: {sid}\n", "dim")
        out._say(f"user: {PROMPT}")
    with out.working("the agent is working"):
        got = await wait_outcome(url, sid, timeout=WAIT_FOR_PAUSE, queued=QUEUED_WAIT)
    if got is None:
        raise CliError(
            f"session {sid!r}: the run did not reach its question within "
            f"{WAIT_FOR_PAUSE:.0f} s; see where it stands with "
            f"`{program()}{dbos_flags(args)} show {sid}`",
            session=sid,
        )
    status = await describe(url, sid)
    executor = None if status is None else view_of(status).workflow["executor_id"]
    return {**got, "executor_id": executor}


def _report(
    out: Output, args: argparse.Namespace, sid: str, executor: str, got: dict[str, Any]
) -> None:
    questions = list(got["interrupts"])
    if got["failure"] is not None:
        raise CliError(
            f"session {sid!r}: the run ended {got['status']}: {got['failure']}", session=sid
        )
    if out.json_mode:
        out._json(
            {
                "session": sid,
                "status": got["status"],
                "stop_reason": got["stop_reason"],
                "reply": got["text"],
                "executor_id": got["executor_id"],
                "interrupts": [_interrupt_json(i) for i in questions],
            }
        )
        return
    if not questions:
        out._say(f"\nThe run ended ({got['stop_reason']}): {got['text']}", "bold green")
        return
    out._say(f"\nPaused: {len(questions)} question(s) wait for a person.", "bold")
    for i in questions:
        out._say(f"  {i.name}: {_shown(i)}")
        out._say(f"    id: {i.id}", "dim")
    me, flags, ran = program(), dbos_flags(args), got["executor_id"]
    if ran == executor:  # this process ran it: its executor id takes it back
        out._say(
            "\nThe run waits in PostgreSQL; this process can end now. A worker carries it on "
            "once it is answered: start one under the id that ran it (in a shell of its own), "
            "then answer from any other process:"
        )
        out._say(f"  {me}{flags} dbos-worker --executor-id {shlex.quote(executor)}", "cyan")
    else:  # a worker already running took it off the queue: it carries it on
        out._say(
            f"\nThe run waits in PostgreSQL on worker {ran}, which carries it on once it "
            "is answered, from any other process:"
        )
    out._say(f"  {me}{flags} pending", "cyan")
    out.hints(answer_hints(sid, questions, "", lead=flags, expire=False))


# --- dbos-worker --------------------------------------------------------------------------------


def dbos_worker_command(sub: Any, command_parser: Callable[..., argparse.ArgumentParser]) -> None:
    """Declare ``dbos-worker``."""
    p = command_parser(
        sub,
        "dbos-worker",
        dbos_worker,
        "run agents of the --app as DBOS workflows on PostgreSQL (needs --dbos), until Ctrl-C",
    )
    p.add_argument(
        "--executor-id",
        metavar="NAME",
        help="this worker's distinct, stable name: a worker started again under it carries its "
        "runs on (default: this host's name; give each worker on one host its own)",
    )


@dbos_command
def dbos_worker(args: argparse.Namespace, out: Output) -> int:
    """Run ``interlude.dbos.worker`` for the ``--app`` until Ctrl-C (or SIGTERM)."""
    import signal
    import socket
    import threading

    from ._apps import _load_app

    if not getattr(args, "dbos", None):
        raise CliError(
            "dbos-worker needs --dbos URL (or $INTERLUDE_DBOS), the PostgreSQL database of the "
            "DBOS system tables, e.g. --dbos postgresql://postgres@localhost/agents"
        )
    app, which = _load_app(args.app)
    url = require_dbos(args)
    executor = args.executor_id or socket.gethostname() or "interlude"
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
    with _serving(url, app, executor):
        if out.json_mode:
            info = {"dbos": dbos_where(url)[len("DBOS at ") :], "executor_id": executor}
            print(json.dumps({"worker": info}), flush=True)
        else:
            out.working_forever(f"{dbos_where(url)}, executor {executor}", which)
            sys.stdout.flush()
        while not stop.wait(0.5):
            pass
    return 0


@contextmanager
def _serving(url: str, app: Any, executor: str, **config: Any) -> Iterator[None]:
    """The DBOS worker while the block lasts (``config``: more ``DBOSConfig`` keys); a failure
    to start is one line."""
    from contextlib import ExitStack

    from ..dbos import worker

    with ExitStack() as stack:
        try:
            stack.enter_context(worker(app, url, executor_id=executor, **config))
        except Exception as exc:
            raise CliError(
                f"the worker could not start on {dbos_where(url)}: {_what(exc)}"
            ) from None
        yield
