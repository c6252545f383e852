"""``interlude``: run the demo, list pending interrupts, answer one, recover a stopped run,
show, list, discard or delete sessions; serve the web inbox and run workers.

Every command takes ``--store URL`` (default: the demo's SQLite file, or $INTERLUDE_STORE),
``--app module:attribute`` (default: $INTERLUDE_APP, else the built-in demo app) and ``--json``
for scripts, before or after the command's name. Only ``demo`` creates a store; the other
commands report a store that does not exist. With ``--temporal HOST:PORT`` (or
$INTERLUDE_TEMPORAL; ``--namespace``), ``pending``, ``answer`` and ``show`` work on agent
workflows of ``interlude.temporal`` instead (the session is the workflow id), and
``temporal-worker`` runs a worker for the ``--app`` (see ``_temporal``).

Commands that run a session's agent (``answer``, ``recover``, ``discard``) build it with the
factory the ``--app`` registers under the agent name the session records. Nothing named in
stored data is ever imported: write access to a store does not choose the code that runs here.

Errors are one line on stderr with exit code 1 (with ``--json``, also a
``{"error": ..., "session": ...}`` document on stdout). An error found before a run changes
nothing; when a run itself fails, the line names the session and what became of it.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from typing import NoReturn, TypeAlias

from ..errors import InterludeError
from ._commands import (
    _answer,
    _delete,
    _demo,
    _discard,
    _expire,
    _pending,
    _recover,
    _run_agent,
    _sessions,
    _show,
)
from ._errors import CliError as CliError
from ._errors import _run as _run  # re-exported, as CliError: imported from here
from ._operate import _serve, _worker
from ._render import Output
from ._stores import DEFAULT_STORE
from ._temporal import (
    DEFAULT_TASK_QUEUE,
    temporal_answer,
    temporal_pending,
    temporal_show,
    temporal_worker,
)
from ._temporal_demo import temporal_demo

__all__ = ["run"]


class _UsageError(Exception):
    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser


class _Parser(argparse.ArgumentParser):
    """Raises bad command lines as _UsageError, so that ``--json`` can report them as JSON."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(self, message)


def run(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = _parser()
        args = parser.parse_args(argv)
    except KeyboardInterrupt:  # Ctrl-C before the command started: nothing was touched
        print("interlude: error: interrupted", file=sys.stderr)
        return 130
    except _UsageError as exc:
        exc.parser.print_usage(sys.stderr)
        print(f"{exc.parser.prog}: error: {exc}", file=sys.stderr)
        if "--json" in argv:
            Output(json_mode=True).error_json(str(exc))
        return 2
    out = Output(json_mode=args.json, app=args.app)
    try:
        return int(_command(args)(args, out))
    except CliError as exc:
        out.error(str(exc), session=exc.session, code=exc.refusal)
        return 1
    except InterludeError as exc:
        out.error(str(exc))
        return 1
    except KeyboardInterrupt:
        out.error("interrupted")
        return 130
    except BrokenPipeError:  # e.g. `interlude show X --json | head`
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        return 0


def _command(args: argparse.Namespace) -> Callable[..., int]:
    """The command to run: its Temporal form with ``--temporal`` (refused for the commands that
    only work on a store, unless the option comes from $INTERLUDE_TEMPORAL)."""
    if not args.temporal:
        return args.command  # type: ignore[no-any-return]
    on_temporal: Callable[..., int] | None = getattr(args, "on_temporal", None)
    if on_temporal is not None:
        return on_temporal
    if args.temporal != os.environ.get("INTERLUDE_TEMPORAL"):

        def refuse(args: argparse.Namespace, out: Output) -> int:
            raise CliError(
                "--temporal works with demo, pending, answer, show, serve and temporal-worker; "
                "this command works on a session store (--store)"
            )

        return refuse
    return args.command  # type: ignore[no-any-return]


APP_HELP = (
    "module:attribute naming the interlude.App whose agents run sessions (answer, recover, "
    "discard); the module is imported from this folder or the Python path. Default: "
    "$INTERLUDE_APP, else the built-in demo app"
)
STORE_HELP = (
    "store URL. sqlite:///relative/path.db (three slashes: relative to this folder), "
    "sqlite:////absolute/path.db (four slashes: absolute), optionally ending in "
    "?synchronous=full; file:///absolute/dir (RFC 8089: always absolute, also "
    "file://localhost/absolute/dir); postgresql://user@host/db. "
    f"Default: $INTERLUDE_STORE or {DEFAULT_STORE}"
)

TEMPORAL_HELP = (
    "HOST:PORT of a Temporal server: pending, answer and show then work on agent workflows "
    "(interlude.temporal), the session being the workflow id. Default: $INTERLUDE_TEMPORAL"
)

_Commands: TypeAlias = "argparse._SubParsersAction[_Parser]"
"""What ``add_subparsers`` returns: the commands' parsers are added to it."""


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="interlude", description="Agents that stop for a person and carry on later."
    )
    _global_options(parser)
    sub = parser.add_subparsers(required=True, metavar="COMMAND")
    _run_commands(sub)
    _session_commands(sub)
    _service_commands(sub)
    return parser


def _global_options(parser: argparse.ArgumentParser) -> None:
    """The options every command takes, given before the command's name."""
    # --store and --json go before the command or after it; after it, they win.
    parser.add_argument(
        "--store", default=os.environ.get("INTERLUDE_STORE", DEFAULT_STORE), help=STORE_HELP
    )
    parser.add_argument(
        "--app",
        metavar="MODULE:ATTR",
        default=os.environ.get("INTERLUDE_APP") or None,
        help=APP_HELP,
    )
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.add_argument(
        "--temporal",
        metavar="HOST:PORT",
        default=os.environ.get("INTERLUDE_TEMPORAL") or None,
        help=TEMPORAL_HELP,
    )
    parser.add_argument("--namespace", default="default", help="the Temporal namespace (default)")


def _command_parser(
    sub: _Commands,
    name: str,
    fn: Callable[..., int],
    help: str,
) -> argparse.ArgumentParser:
    """The parser of command ``name``, which runs ``fn``; the global options given after the
    command's name override those given before it."""
    example = EXAMPLES.get(name)
    epilog = (
        ("example:\n  " + example + "\n\n" if example else "")
        + "global options (also before the command; `interlude --help` explains them):\n"
        "  --store URL, --app MODULE:ATTR, --json, --temporal HOST:PORT, --namespace NAME"
    )
    p = sub.add_parser(
        name,
        help=help,
        description=help,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(command=fn)
    hidden = argparse.SUPPRESS  # each is explained once, by `interlude --help`
    p.add_argument("--store", default=argparse.SUPPRESS, help=hidden)
    p.add_argument("--app", metavar="MODULE:ATTR", default=argparse.SUPPRESS, help=hidden)
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=hidden)
    p.add_argument("--temporal", metavar="HOST:PORT", default=argparse.SUPPRESS, help=hidden)
    p.add_argument("--namespace", default=argparse.SUPPRESS, help=hidden)
    return p


EXAMPLES = {
    "demo": "interlude demo",
    "run": 'interlude run --app myapp:app billing invoice-8 "Charge acme 42 EUR"',
    "pending": "interlude pending --older-than 1h",
    "answer": "interlude answer demo-1 3f2a9c1b true --by ana",
    "expire": "interlude expire demo-1",
    "recover": "interlude recover --app myapp:app invoice-8",
    "show": "interlude show demo-1",
    "history": "interlude history demo-1",
    "fork": "interlude fork --app myapp:app demo-1 --at m3 --as demo-1-retry",
    "sessions": "interlude sessions --json",
    "discard": "interlude discard demo-1",
    "delete": "interlude delete demo-1 --with-audit",
    "serve": "interlude serve --worker --app myapp:app",
    "worker": "interlude worker --app myapp:app --store postgresql://localhost/agents",
    "temporal-worker": "interlude --temporal localhost:7233 temporal-worker --app myapp:app",
}
"""One example per command, shown by its ``--help``."""


def _notify_options(p: argparse.ArgumentParser, prefix: str) -> None:
    p.add_argument(
        "--notify",
        metavar="URL",
        action="append",
        default=[],
        help=f"{prefix}notify about questions (asked, deadline near, escalated, expired, "
        "answered): an http(s):// webhook (signed with $INTERLUDE_NOTIFY_SECRET) or "
        "smtp://host:port?from=ADDRESS&to=ADDRESS; repeatable; added to the app's notify=",
    )
    p.add_argument(
        "--inbox-url",
        metavar="URL",
        help="the inbox's address, for the links in notifications"
        + (" (default: this server's)" if prefix else ""),
    )


def _task_queue_option(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--task-queue", metavar="QUEUE", help=help)


def _agent_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--agent",
        metavar="NAME",
        help="the --app agent to run a session that records no agent name (one saved by "
        "an older version); the session records it from then on",
    )


def _run_commands(sub: _Commands) -> None:
    """demo, pending, answer, expire and recover: the commands that start, answer or carry on
    a run."""
    demo = _command_parser(sub, "demo", _demo, "run an agent that stops to ask before a risky tool")
    demo.add_argument("--model", help="run on a real model, e.g. openai:gpt-4.1-mini")
    demo.add_argument("--session", help="session id (default: a new demo-<id>)")
    _task_queue_option(
        demo, f"with --temporal: the task queue to start it on ({DEFAULT_TASK_QUEUE})"
    )
    demo.set_defaults(on_temporal=temporal_demo)

    run = _command_parser(
        sub,
        "run",
        _run_agent,
        "start a session of your own agent (--app) on a prompt, or carry one on with a new one",
    )
    run.add_argument("agent_name", metavar="AGENT", help="the agent's name in the --app")
    run.add_argument("session", metavar="SESSION", help="the session id (new, or not waiting)")
    run.add_argument("prompt", metavar="PROMPT", help="what to ask the agent")

    pending = _command_parser(sub, "pending", _pending, "list the interrupts waiting for an answer")
    pending.add_argument("--name", help="only interrupts with this name")
    pending.add_argument("--tool", help="only interrupts about this tool")
    pending.add_argument("--older-than", type=_duration, help="e.g. 30s, 10m, 2h, 1d")
    pending.add_argument("--newer-than", type=_duration, help="e.g. 30s, 10m, 2h, 1d")
    _task_queue_option(pending, "with --temporal: only workflows on this task queue")
    pending.set_defaults(on_temporal=temporal_pending)

    _answer_command(sub)

    expire = _command_parser(
        sub, "expire", _expire, "settle a session's questions whose deadline passed, and carry on"
    )
    expire.add_argument("session")
    _agent_option(expire)

    recover = _command_parser(
        sub, "recover", _recover, "carry on a run whose process stopped before it finished"
    )
    recover.add_argument("session")
    _agent_option(recover)


def _answer_command(sub: _Commands) -> None:
    answer = _command_parser(sub, "answer", _answer, "answer an interrupt and carry the session on")
    answer.add_argument("session")
    answer.add_argument(
        "interrupt_id", help="the interrupt's id, or the short id `interlude pending` shows"
    )
    answer.add_argument("answer", help='the answer as JSON: true, false, "text", {"k": 1}')
    answer.add_argument(
        "--by",
        metavar="NAME",
        help="who answers, for the session's audit trail (default: your OS user name)",
    )
    answer.add_argument(
        "--shown",
        metavar="DIGEST",
        help="the digest of the question as you saw it (`pending --json` gives it as "
        '"shown"): refused if the session\'s question differs',
    )
    _agent_option(answer)
    answer.set_defaults(on_temporal=temporal_answer)


def _session_commands(sub: _Commands) -> None:
    """show, sessions, discard and delete: the commands that look at or drop sessions."""
    show = _command_parser(
        sub, "show", _show, "show a session's conversation, pause and audit trail"
    )
    show.add_argument("session")
    show.set_defaults(on_temporal=temporal_show)

    _command_parser(sub, "sessions", _sessions, "list the sessions in the store and their state")

    from ._history import fork_command, history_command

    history = _command_parser(
        sub, "history", history_command, "list a session's checkpoints (its steps), oldest first"
    )
    history.add_argument("session")
    fork = _command_parser(
        sub, "fork", fork_command, "make a new session standing at a checkpoint of another"
    )
    fork.add_argument("session")
    fork.add_argument("--at", required=True, metavar="ID", help="a checkpoint id (history)")
    fork.add_argument(
        "--as", dest="new", metavar="NEW", help="the new session's id (default: made from it)"
    )
    _agent_option(fork)

    discard = _command_parser(
        sub,
        "discard",
        _discard,
        "drop a session's pause (or stopped run): its open tool calls become cancelled",
    )
    discard.add_argument("session")
    _agent_option(discard)

    delete = _command_parser(
        sub, "delete", _delete, "delete a session from the store (refused while a run holds it)"
    )
    delete.add_argument("session")
    delete.add_argument(
        "--with-audit",
        action="store_true",
        help="also when the session has an audit trail (deleted with it)",
    )


def _service_commands(sub: _Commands) -> None:
    """serve, worker and temporal-worker: the commands that run until stopped."""
    serve = _command_parser(
        sub,
        "serve",
        _serve,
        "serve the web inbox (HTML pages and a JSON API) where people answer questions",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument("--port", type=int, default=8321, help="port to listen on (8321)")
    serve.add_argument(
        "--tokens",
        metavar="FILE",
        help='JSON file {"token": "approver name", ...} (default: $INTERLUDE_TOKENS, '
        "tok1=ana,tok2=bo; with neither, on a loopback address only, a token for your OS "
        "user is made and printed once)",
    )
    serve.add_argument(
        "--worker",
        action="store_true",
        help="also run a worker in this process: it carries sessions on once answered",
    )
    serve.add_argument("--poll", type=float, default=0.5, help="seconds between checks (0.5)")
    serve.add_argument(
        "--header-timeout",
        type=float,
        default=10.0,
        help="seconds a client has to send a request's headers before it is cut off (10)",
    )
    serve.add_argument(
        "--max-connections",
        type=int,
        default=1000,
        help="connections held at once; more are closed at once (1000)",
    )
    serve.add_argument(
        "--signing-key-env",
        metavar="VAR",
        help="verify every pause with the signing key in environment variable VAR (the agents' "
        "signing_key) before showing its questions or checking answers against them",
    )
    _notify_options(serve, "with --worker: ")
    _task_queue_option(serve, "with --temporal: only workflows on this task queue")
    serve.set_defaults(on_temporal=_serve)

    worker = _command_parser(
        sub,
        "worker",
        _worker,
        "carry on sessions that have recorded answers, expired questions or stopped runs",
    )
    worker.add_argument("--once", action="store_true", help="handle what is there now, then exit")
    worker.add_argument("--poll", type=float, default=0.5, help="seconds between checks (0.5)")
    _notify_options(worker, "")

    temporal = _command_parser(
        sub,
        "temporal-worker",
        temporal_worker,
        "run agents of the --app as Temporal workflows (needs --temporal), until Ctrl-C",
    )
    _task_queue_option(temporal, f"the task queue to poll ({DEFAULT_TASK_QUEUE})")
    temporal.set_defaults(on_temporal=temporal_worker)


def _duration(text: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhd]?)", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use 30s, 10m, 2h, 1d)")
    scale = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    return float(m.group(1)) * scale


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
