"""``--temporal HOST:PORT``: ``pending``, ``answer`` and ``show`` against agent workflows
(``interlude.temporal``) instead of a session store, and ``temporal-worker``.

A paused workflow is found by its search attributes (``InterludePending``, ...); what it waits
on comes from its ``pending`` query, and an answer goes in through its ``answer`` Update, whose
validator applies ``resume``'s checks (a refused answer changes nothing). The session a row
names is the workflow id. Queries need a worker on the workflow's task queue; a workflow whose
query goes unanswered is named on stderr and left out of ``pending``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import json
import os
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ..errors import ResumeError
from ._errors import CliError, _what
from ._hints import answer_hints, program
from ._render import Output
from ._words import _interrupt_json, _shown, _transcript, audit_line

if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowExecutionDescription, WorkflowHandle

    from .._interrupt import Interrupt
    from ..sessions import PendingInterrupt

__all__ = [
    "DEFAULT_TASK_QUEUE",
    "QUERY_TIMEOUT",
    "temporal_answer",
    "temporal_pending",
    "temporal_recover",
    "temporal_show",
    "temporal_undo",
    "temporal_worker",
]

DEFAULT_TASK_QUEUE = "agents"
QUERY_TIMEOUT = timedelta(seconds=5)
"""How long a ``pending`` query may wait for a worker before the workflow is reported."""
CONCURRENT_QUERIES = 20
CONNECT_WAIT = 10.0
"""Seconds ``demo`` and ``temporal-worker`` keep trying a server that is starting."""


def _require() -> None:
    try:
        import temporalio  # noqa: F401

        import interlude.temporal  # noqa: F401
    except ImportError as exc:
        raise CliError(
            f"--temporal needs the [temporal] extra ({exc.name} is missing): "
            "pip install 'interlude-agents[temporal]'"
        ) from None


def _command(fn: Callable[[argparse.Namespace, Output], int]) -> Callable[..., int]:
    """``fn`` as a command that, in the ``interlude`` process itself, ends the process once it
    has printed everything: temporalio's threads can abort the interpreter as it finalizes
    (temporalio/sdk-python#300, "PyGILState_Release", exit -6), a few runs in a hundred.
    Called in-process (``run(argv)``), it returns (or raises) as the other commands do."""

    @functools.wraps(fn)
    def command(args: argparse.Namespace, out: Output) -> int:
        if not _cli_process():
            return fn(args, out)
        try:
            code = fn(args, out)
        except CliError as exc:
            out.error(str(exc), session=exc.session)
            code = 1
        except KeyboardInterrupt:
            out.error("interrupted")
            code = 130
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    return command


def _cli_process() -> bool:
    """Whether this process is the ``interlude`` command (``python -m interlude`` or the
    console script), not a program calling ``run(argv)``."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name in ("interlude", "interlude.__main__"):
        return True
    script = os.path.basename(str(getattr(main, "__file__", "") or ""))
    return script in ("interlude", "interlude.exe", "interlude-script.py")


def _where(args: argparse.Namespace) -> str:
    namespace = "" if args.namespace == "default" else f" (namespace {args.namespace})"
    return f"Temporal at {args.temporal}{namespace}"


def _flags(args: argparse.Namespace) -> str:
    """`` --temporal X`` (and ``--namespace``) for the commands this one suggests."""
    import shlex

    flags = ""
    if args.temporal != os.environ.get("INTERLUDE_TEMPORAL"):
        flags += f" --temporal {shlex.quote(args.temporal)}"
    if args.namespace != "default":
        flags += f" --namespace {shlex.quote(args.namespace)}"
    return flags


async def _connect(args: argparse.Namespace, *, wait: float = 0.0) -> Client:
    """A client for ``--temporal``; ``wait``: seconds to keep trying a server that is not up
    yet (the commands that start things, run just after ``temporal server start-dev &``)."""
    from temporalio.client import Client

    deadline = time.monotonic() + wait
    while True:
        try:
            return await Client.connect(args.temporal, namespace=args.namespace)
        except Exception as exc:
            if time.monotonic() >= deadline:
                tried = f" (tried for {wait:.0f} s)" if wait else ""
                raise CliError(f"cannot reach {_where(args)}{tried}: {_what(exc)}") from None
            await asyncio.sleep(0.2)


async def _register_search_attributes(client: Client, args: argparse.Namespace) -> None:
    """Register Interlude's search attributes on the namespace if missing; a server that
    refuses (a managed cluster may) gets a warning: they can be created by an administrator."""
    from ..temporal import register_search_attributes

    try:
        await register_search_attributes(client)
    except Exception as exc:
        print(
            f"interlude: warning: {_where(args)}: Interlude's search attributes could not be "
            f"registered ({_what(exc)}); without them paused workflows cannot be listed",
            file=sys.stderr,
        )


async def _query_pending(client: Client, workflow_id: str) -> list[Interrupt]:
    from .._interrupt import Interrupt

    data = await client.get_workflow_handle(workflow_id).query("pending", rpc_timeout=QUERY_TIMEOUT)
    return [Interrupt.from_dict(d) for d in data]


def _not_found(exc: Exception) -> bool:
    from temporalio.service import RPCError, RPCStatusCode

    return isinstance(exc, RPCError) and exc.status == RPCStatusCode.NOT_FOUND


def _rpc_error(args: argparse.Namespace, workflow_id: str, exc: Exception) -> CliError:
    """A failed call about ``workflow_id`` in one line: not found, unanswered, or as it says."""
    from temporalio.service import RPCError, RPCStatusCode

    if _not_found(exc):
        return CliError(f"no workflow {workflow_id!r} on {_where(args)}", session=workflow_id)
    if isinstance(exc, RPCError) and exc.status in (
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.CANCELLED,
    ):
        return CliError(
            f"session {workflow_id!r}: its workflow did not answer the query within "
            f"{QUERY_TIMEOUT.total_seconds():g}s; is a worker (`{program()} temporal-worker`) "
            "running on its task queue?",
            session=workflow_id,
        )
    return CliError(f"session {workflow_id!r}: {_where(args)}: {_what(exc)}", session=workflow_id)


async def paused_workflows(
    client: Client, *, name: str | None = None, task_queue: str | None = None
) -> list[str]:
    """Ids of the running agent workflows waiting on answers, from the search attributes:
    ``AgentClient.paused``'s query, with a task queue filter (which it does not offer)."""
    from ..temporal import NAMES, PENDING

    query = f"{PENDING.name} = true AND ExecutionStatus = 'Running'"
    if name is not None:
        query += f" AND {NAMES.name} = {_quote(name)}"
    if task_queue is not None:
        query += f" AND TaskQueue = {_quote(task_queue)}"
    return [w.id async for w in client.list_workflows(query)]


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


# --- pending ------------------------------------------------------------------------------------


@_command
def temporal_pending(args: argparse.Namespace, out: Output) -> int:
    _require()
    return asyncio.run(_pending(args, out))


async def _pending(args: argparse.Namespace, out: Output) -> int:
    from temporalio.service import RPCError

    from ..sessions import PendingInterrupt, PendingQuery, select_pending

    client = await _connect(args)
    try:
        ids = await paused_workflows(client, name=args.name, task_queue=args.task_queue)
    except RPCError as exc:
        raise CliError(f"{_where(args)}: listing the paused workflows failed: {exc}") from None
    limit = asyncio.Semaphore(CONCURRENT_QUERIES)

    async def one(workflow_id: str) -> list[Interrupt] | Exception:
        async with limit:
            try:
                return await _query_pending(client, workflow_id)
            except RPCError as exc:  # finished meanwhile, or no worker answers
                return exc

    answers = await asyncio.gather(*(one(w) for w in ids))
    now = time.time()
    older = None if args.older_than is None else now - args.older_than
    newer = None if args.newer_than is None else now - args.newer_than
    entries: list[PendingInterrupt] = []
    for workflow_id, got in zip(ids, answers, strict=True):
        if isinstance(got, Exception):
            if not _not_found(got):  # not found: it finished meanwhile
                print(f"interlude: warning: {_rpc_error(args, workflow_id, got)}", file=sys.stderr)
            continue
        entries.extend(PendingInterrupt(workflow_id, i, i.raised_at) for i in got)
    wanted = PendingQuery(name=args.name, tool_name=args.tool, older_than=older, newer_than=newer)
    out.pending(select_pending(entries, wanted), now, "", flags=_flags(args))
    return 0


# --- answer -------------------------------------------------------------------------------------


@_command
def temporal_answer(args: argparse.Namespace, out: Output) -> int:
    _require()
    try:
        answer = json.loads(args.answer)
    except ValueError:
        raise CliError(
            f'the answer {args.answer!r} is not JSON (use true, false, 42, "text", {{...}})'
        ) from None
    return asyncio.run(_answer(args, out, answer))


async def _answer(args: argparse.Namespace, out: Output, answer: Any) -> int:
    from temporalio.service import RPCError

    from ..temporal import AgentClient
    from ._commands import _interrupt_id, _operator
    from ._move import refuse_if_moved

    workflow_id = args.session
    client = await _connect(args)
    try:
        pending = await _query_pending(client, workflow_id)
    except RPCError as exc:
        raise _rpc_error(args, workflow_id, exc) from None
    if not pending:
        await refuse_if_moved(client, workflow_id)
        raise CliError(
            f"session {workflow_id!r} has no pending interrupt{await _status_words(client, args)}",
            session=workflow_id,
        )
    interrupt_id = _interrupt_id(workflow_id, args.interrupt_id, [i.id for i in pending])
    question = next(i for i in pending if i.id == interrupt_id)
    out.answering(question)
    shown = None if args.shown is None else {interrupt_id: args.shown}
    from ..temporal import AnswerTimeoutError

    agents = AgentClient(client, task_queue=DEFAULT_TASK_QUEUE)  # unused by answer
    try:
        with out.working("the agent is working"):
            outcome = await agents.answer(
                workflow_id, {interrupt_id: answer}, by=args.by or _operator(), shown=shown
            )
    except ResumeError as exc:  # the Update's validator refused it: nothing changed
        raise CliError(
            f"session {workflow_id!r}: the answer was refused ({_what(exc)}); the session is "
            "unchanged",
            session=workflow_id,
        ) from None
    except AnswerTimeoutError as exc:  # no reply in time: the answer may still be applied
        raise CliError(
            f"session {workflow_id!r}: no reply in time ({_what(exc)}); the answer may still be "
            f"applied once a worker runs: see `{program()} show{_flags(args)} {workflow_id}`",
            session=workflow_id,
        ) from None
    except Exception as exc:  # the Update failed after it was accepted
        raise CliError(
            f"session {workflow_id!r}: the run failed ({_what(exc)}); what completed is in "
            f"its history: see `{program()} show{_flags(args)} {workflow_id}`",
            session=workflow_id,
        ) from None
    _outcome(out, args, workflow_id, outcome)
    return 0


async def _status_words(client: Client, args: argparse.Namespace) -> str:
    """`` (its workflow is COMPLETED)`` unless it is running (then it is busy: nothing)."""
    try:
        described = await client.get_workflow_handle(args.session).describe()
    except Exception:
        return ""
    status = described.status
    if status is None or status.name == "RUNNING":
        return " (its run is going on)"
    return f" (its workflow is {status.name})"


def _outcome(out: Output, args: argparse.Namespace, workflow_id: str, outcome: Any) -> None:
    from .._interrupt import Interrupt

    interrupts = [Interrupt.from_dict(d) for d in outcome.get("interrupts") or []]
    stop_reason = outcome.get("stop_reason")
    reply = outcome.get("text") or ""
    if out.json_mode:
        out._json(
            {
                "session": workflow_id,
                "stop_reason": stop_reason,
                "reply": reply,
                "interrupts": [_interrupt_json(i) for i in interrupts],
            }
        )
        return
    out._say(f"session {workflow_id}: resumed")
    if reply:
        out._say(f"assistant: {reply}")
    if stop_reason != "interrupt" or not interrupts:
        out._say(f"\nThe run ended ({stop_reason}).", "bold green")
        return
    out._say(f"\nPaused: {len(interrupts)} question(s) wait for a person.", "bold")
    for i in interrupts:
        out._say(f"  {i.name}: {_shown(i)}")
        out._say(f"    id: {i.id}", "dim")
    out.hints(answer_hints(workflow_id, interrupts, _flags(args), expire=False))


# --- undo and recover ---------------------------------------------------------------------------


@_command
def temporal_undo(args: argparse.Namespace, out: Output) -> int:
    """``undo WORKFLOW --to CHECKPOINT``: the workflow's ``undo`` Update (docs/temporal.md)."""
    _require()
    if getattr(args, "node", None):
        raise CliError("--node: on Temporal, undo takes back an agent's run (not a graph node's)")
    return asyncio.run(_update(args, out, "undo"))


@_command
def temporal_recover(args: argparse.Namespace, out: Output) -> int:
    """``recover WORKFLOW``: carry on the run an undo left stopped (the ``recover`` Update)."""
    _require()
    return asyncio.run(_update(args, out, "recover"))


async def _update(args: argparse.Namespace, out: Output, name: str) -> int:
    from temporalio.service import RPCError

    from ..errors import InterludeError
    from ..temporal import AnswerTimeoutError, recover, undo
    from ._commands import _operator

    wid, client = args.session, await _connect(args)
    try:
        with out.working("the agent is working"):
            if name == "recover":
                got = await recover(client, wid)
            else:
                by, skip = args.by or _operator(), args.skip or []
                got = await undo(client, wid, args.to, by=by, skip=skip, dry_run=args.dry_run)
    except AnswerTimeoutError as exc:
        raise CliError(f"session {wid!r}: no reply in time ({_what(exc)})", session=wid) from None
    except InterludeError as exc:  # refused by the Update's validator: nothing changed
        raise CliError(
            f"session {wid!r}: {name} refused ({_what(exc)}); nothing was changed", session=wid
        ) from None
    except RPCError as exc:
        raise _rpc_error(args, wid, exc) from None
    if out.json_mode:
        out._json({"session": wid, **got})
    elif name == "undo" and args.dry_run:
        out._say(f"session {wid}: undoing to {got['to']} runs, newest first:")
        for s in got["steps"]:
            out._say(f"  {s['call_id']}  {s['tool']}  -> {s['compensation']}")
        out._say(f"Nothing was changed (--dry-run); it would then stand {got['stands']}.")
    elif got.get("stands") == "stopped":
        out._say(f"session {wid}: undone to {args.to}; it stands there, stopped. Carry it on:")
        out._say(f"  {program()}{_flags(args)} recover {wid}", "cyan")
    else:
        _outcome(out, args, wid, got)
    return 0


# --- show ---------------------------------------------------------------------------------------


@_command
def temporal_show(args: argparse.Namespace, out: Output) -> int:
    _require()
    return asyncio.run(_show(args, out))


async def _show(args: argparse.Namespace, out: Output) -> int:
    from temporalio.service import RPCError

    from .._messages import Message
    from ..temporal import AGENT

    workflow_id = args.session
    client = await _connect(args)
    handle = client.get_workflow_handle(workflow_id)
    try:
        described = await handle.describe()
    except RPCError as exc:
        raise _rpc_error(args, workflow_id, exc) from None
    status = "UNKNOWN" if described.status is None else described.status.name
    agent = described.typed_search_attributes.get(AGENT)
    run = await _run_of(args, client, handle, status)
    finished = run.finished
    state: dict[str, Any] = {} if finished is None else dict(finished.get("state") or {})
    messages = [Message.from_dict(m) for m in state.get("messages") or []]
    audit: list[dict[str, Any]] = list(state.get("audit") or [])
    if out.json_mode:
        out._json(
            {
                "session": workflow_id,
                "workflow": _workflow_json(described, status),
                "agent": agent,
                "paused": bool(run.interrupts),
                "running": status == "RUNNING" and not run.interrupts,
                "interrupts": [_interrupt_json(i) for i in run.interrupts],
                "stop_reason": None if finished is None else finished.get("stop_reason"),
                "reply": None if finished is None else finished.get("text"),
                "failure": run.failure,
                "messages": [m.to_dict() for m in messages],
                "state": state.get("state"),
                "audit": audit,
            }
        )
        return 0
    who = "no agent name" if agent is None else f"agent {agent}"
    out._say(
        f"session {workflow_id} ({who}, workflow {status} on task queue {described.task_queue})",
        "bold",
    )
    for line in _transcript(messages):
        out._say(line)
    _say_run(out, run)
    if audit:
        out._say(f"\nAudit trail ({len(audit)}):", "bold")
        for entry in audit:
            out._say(f"  {audit_line(entry)}")
    return 0


@dataclasses.dataclass
class _Run:
    """Where a workflow's run is, as ``show`` tells it."""

    status: str
    """The workflow's execution status: RUNNING, COMPLETED, FAILED, ... (or UNKNOWN)."""
    interrupts: list[Interrupt] = dataclasses.field(default_factory=list)
    """RUNNING: the questions it waits on (none: it is busy)."""
    finished: dict[str, Any] | None = None
    """COMPLETED: the workflow's result."""
    failure: str | None = None
    """Otherwise: why it did not complete, if it says."""


async def _run_of(
    args: argparse.Namespace, client: Client, handle: WorkflowHandle[Any, Any], status: str
) -> _Run:
    """What the workflow waits on (its ``pending`` query), its result or its failure."""
    from temporalio.service import RPCError

    run = _Run(status)
    workflow_id = handle.id
    if status == "RUNNING":
        try:
            run.interrupts = await _query_pending(client, workflow_id)
        except RPCError as exc:
            raise _rpc_error(args, workflow_id, exc) from None
    elif status == "COMPLETED":
        run.finished = await handle.result()
    else:
        try:
            await handle.result()
        except Exception as exc:
            run.failure = _what(exc.__cause__ or exc)
    return run


def _workflow_json(described: WorkflowExecutionDescription, status: str) -> dict[str, Any]:
    """The ``workflow`` object of ``show --json``."""
    return {
        "status": status,
        "run_id": described.run_id,
        "task_queue": described.task_queue,
        "started": None if described.start_time is None else described.start_time.timestamp(),
        "closed": None if described.close_time is None else described.close_time.timestamp(),
    }


def _say_run(out: Output, run: _Run) -> None:
    """The human form of :class:`_Run`: the questions, that it runs, or how it ended."""
    if run.interrupts:
        out._say(f"\nPaused, waiting on {len(run.interrupts)} question(s):", "bold")
        for i in run.interrupts:
            out._say(f"  {i.name}: {_shown(i)}")
            out._say(f"    id: {i.id}", "dim")
        out._say(
            "(the conversation and the audit trail are in the workflow's history; they show "
            "here once the run has finished)",
            "dim",
        )
    elif run.status == "RUNNING":
        out._say("\nRunning: no question is pending.")
    elif run.finished is not None:
        out._say(f"\nThe run ended ({run.finished.get('stop_reason')}).", "bold green")
    else:
        out._say(f"\nThe workflow is {run.status}: {run.failure or 'no result'}", "yellow")


# --- temporal-worker ----------------------------------------------------------------------------


@_command
def temporal_worker(args: argparse.Namespace, out: Output) -> int:
    """Run ``interlude.temporal.worker`` for the ``--app`` until Ctrl-C (or SIGTERM)."""
    import contextlib
    import signal

    from ._apps import _load_app

    _require()
    if not args.temporal:
        raise CliError(
            "temporal-worker needs --temporal HOST:PORT (or $INTERLUDE_TEMPORAL), e.g. "
            "--temporal localhost:7233"
        )
    app, which = _load_app(args.app)
    queue = args.task_queue or DEFAULT_TASK_QUEUE

    async def serve() -> None:
        from ..temporal import worker

        client = await _connect(args, wait=CONNECT_WAIT)
        await _register_search_attributes(client, args)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError):  # no signal handlers on Windows
            loop.add_signal_handler(signal.SIGTERM, stop.set)
        try:
            running = worker(client, app, task_queue=queue)
        except Exception as exc:
            raise CliError(f"the worker could not start: {_what(exc)}") from None
        async with running:
            if out.json_mode:
                info = {"temporal": args.temporal, "namespace": args.namespace, "task_queue": queue}
                print(json.dumps({"worker": info}), flush=True)
            else:
                out.working_forever(f"{_where(args)}, task queue {queue}", which)
                sys.stdout.flush()
            await stop.wait()

    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: the worker shuts down, then exit
        asyncio.run(serve())
    return 0
