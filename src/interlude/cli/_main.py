"""``interlude``: run the demo, list pending interrupts, answer one, recover a stopped run,
show, list, discard or delete sessions; serve the web inbox and run workers; check an approval
policy and replay stored sessions under it (``_policy``).

Every command takes ``--store URL`` (default: the demo's SQLite file, or $INTERLUDE_STORE),
``--app module:attribute`` (default: $INTERLUDE_APP, else the built-in demo app) and ``--json``
for scripts, before or after the command's name. Only ``demo`` and ``run`` create a store;
the other commands report a store that does not exist. With ``--temporal HOST:PORT`` (or
$INTERLUDE_TEMPORAL; ``--namespace``), ``pending``, ``answer`` and ``show`` work on agent
workflows of ``interlude.temporal`` instead (the session is the workflow id), and
``temporal-worker`` runs a worker for the ``--app`` (see ``_temporal``). With ``--dbos URL`` (or
$INTERLUDE_DBOS; ``--dbos`` alone takes the ``--store``'s postgresql:// URL), the commands of
``ON_DBOS`` work on the runs of ``interlude.dbos`` on that PostgreSQL database, and
``dbos-worker`` runs a worker (see ``_dbos``).

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
from collections.abc import Callable, Iterable
from typing import Literal, NoReturn, TypeAlias

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
from ._dbos import (
    DBOS_ALONE,
    dbos_answer,
    dbos_demo,
    dbos_pending,
    dbos_run,
    dbos_show,
    dbos_worker,
)
from ._errors import CliError as CliError
from ._errors import _run as _run  # re-exported, as CliError: imported from here
from ._move import move_command, run_move
from ._operate import _serve
from ._policy import policy_commands
from ._render import Output
from ._services import service_commands
from ._stores import DEFAULT_STORE
from ._temporal import (
    DEFAULT_TASK_QUEUE,
    temporal_answer,
    temporal_pending,
    temporal_recover,
    temporal_show,
    temporal_undo,
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


class _Help(argparse.HelpFormatter):
    """argparse's help, its lines never broken inside a hyphenated name (``temporal-worker``,
    ``mcp-serve``)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def run(argv: list[str] | None = None) -> int:
    argv = _dbos_alone(sys.argv[1:] if argv is None else list(argv))
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
    _say_if_app_ignored(args, out)
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


def _dbos_alone(argv: list[str]) -> list[str]:
    """``argv`` with each ``--dbos`` given without a URL (the next word is no ``...://...``:
    a command's name, an option, nothing) as ``--dbos=``, so that argparse does not take the
    command's name for the URL."""
    out = list(argv)
    for i, word in enumerate(argv):
        if word == "--":
            break
        if word == "--dbos" and (i + 1 == len(argv) or "://" not in argv[i + 1]):
            out[i] = "--dbos=" + DBOS_ALONE
    return out


def _command(args: argparse.Namespace) -> Callable[..., int]:
    """The command to run: its Temporal form (``ON_TEMPORAL``) with ``--temporal``, its DBOS
    form (``ON_DBOS``) with ``--dbos``; refused for the commands that work elsewhere, unless
    the option comes from the environment. Both options at once: the one given here wins over
    the other's variable; both given (or both from the environment) are refused. ``--dbos``
    alone takes the ``--store``'s URL, refused when that is not PostgreSQL's."""
    given_dbos = args.dbos is not None and args.dbos != os.environ.get("INTERLUDE_DBOS")
    if args.temporal and args.dbos is not None:
        given_temporal = args.temporal != os.environ.get("INTERLUDE_TEMPORAL")
        if given_temporal == given_dbos:
            return _refusal("--dbos and --temporal name two engines: give one of them")
        args.temporal, args.dbos = (args.temporal, None) if given_temporal else (None, args.dbos)
    if args.dbos == DBOS_ALONE:
        store = str(args.store)
        if not store.startswith(("postgresql://", "postgres://", "postgresql+")):
            return _refusal(
                f"--dbos without a URL takes the --store's PostgreSQL URL, and the store is "
                f"{store!r}: give --store postgresql://user@host/db (or --dbos URL)"
            )
        args.dbos, args.dbos_alone = store, True
    if args.dbos:
        return _engine(args, ON_DBOS, "--dbos", given_dbos)
    if args.temporal:
        given = args.temporal != os.environ.get("INTERLUDE_TEMPORAL")
        return _engine(args, ON_TEMPORAL, "--temporal", given)
    return args.command  # type: ignore[no-any-return]


def _engine(
    args: argparse.Namespace, table: dict[str, Callable[..., int]], flag: str, given: bool
) -> Callable[..., int]:
    """The command's form in ``table``; refused when it has none and ``flag`` was given."""
    found = table.get(args.command_name)
    if found is not None:
        return found
    if not given:
        return args.command  # type: ignore[no-any-return]
    name = args.command_name
    where = {"temporal-worker": "Temporal (--temporal)", "dbos-worker": "DBOS (--dbos)"}
    return _refusal(
        f"{flag} works with {_listed(table)}; {name} works on "
        + where.get(name, "a session store (--store)")
    )


def _refusal(message: str) -> Callable[..., int]:
    def refuse(args: argparse.Namespace, out: Output) -> int:
        raise CliError(message)

    return refuse


ON_TEMPORAL: dict[str, Callable[..., int]] = {
    "demo": temporal_demo,
    "pending": temporal_pending,
    "answer": temporal_answer,
    "show": temporal_show,
    "undo": temporal_undo,
    "recover": temporal_recover,
    "serve": _serve,
    "temporal-worker": temporal_worker,
    "move": run_move,
}
"""The commands that take ``--temporal``, and what each runs then (on agent workflows)."""

ON_DBOS: dict[str, Callable[..., int]] = {
    "demo": dbos_demo,
    "run": dbos_run,
    "pending": dbos_pending,
    "answer": dbos_answer,
    "show": dbos_show,
    "serve": _serve,
    "dbos-worker": dbos_worker,
    "move": run_move,
}
"""The commands that take ``--dbos``, and what each runs then (on ``interlude.dbos`` runs)."""

USES_APP: dict[str, Literal["runs", "names"]] = {
    "run": "runs",
    "answer": "runs",
    "expire": "runs",
    "recover": "runs",
    "fork": "runs",
    "move": "runs",
    "undo": "runs",
    "discard": "runs",
    "serve": "runs",
    "mcp-serve": "runs",
    "worker": "runs",
    "temporal-worker": "runs",
    "dbos-worker": "runs",
    "pending": "names",
    "show": "names",
    "history": "names",
    "policy": "runs",
}
"""The commands that honour ``--app``: they build the session's agents with it ("runs"), or
name it in the commands they suggest ("names"). The others say that they ignore it."""


def _say_if_app_ignored(args: argparse.Namespace, out: Output) -> None:
    """A command that does not honour ``--app`` says so on stderr (when the option was
    given, not taken from $INTERLUDE_APP), and suggests none."""
    name, app = args.command_name, args.app
    if app is None or name in USES_APP or app == os.environ.get("INTERLUDE_APP"):
        return
    out.app = None
    if name == "demo":  # says what to run instead
        return
    print(f"interlude: {name} ignores --app {app}", file=sys.stderr)


def _listed(names: Iterable[str]) -> str:
    names = list(names)
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names)


APP_HELP = (
    "module:attribute naming the interlude.App whose agents run sessions: "
    f"{_listed(n for n, use in USES_APP.items() if use == 'runs')} build agents with it; "
    f"{_listed(n for n, use in USES_APP.items() if use == 'names')} name it in the commands "
    "they suggest. The module is imported from this folder or the Python path. Default: "
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
    f"HOST:PORT of a Temporal server: {_listed(ON_TEMPORAL)} then work on agent workflows "
    "(interlude.temporal), the session being the workflow id. Default: $INTERLUDE_TEMPORAL"
)

DBOS_HELP = (
    f"PostgreSQL URL of a DBOS system database: {_listed(ON_DBOS)} then work on the agent "
    "runs of interlude.dbos there, the session being the workflow id. Given alone, --dbos "
    "takes the --store's postgresql:// URL (the system database lives there, in its own "
    "schema). Default: $INTERLUDE_DBOS"
)

_Commands: TypeAlias = "argparse._SubParsersAction[_Parser]"
"""What ``add_subparsers`` returns: the commands' parsers are added to it."""


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="interlude",
        description="Agents that stop for a person and carry on later.",
        formatter_class=_Help,
    )
    _global_options(parser)
    sub = parser.add_subparsers(required=True, metavar="COMMAND")
    _run_commands(sub)
    _session_commands(sub)
    service_commands(sub, _command_parser)
    policy_commands(sub, _command_parser, _hidden_globals)
    return parser


def _global_options(parser: argparse.ArgumentParser) -> None:
    """The options every command takes, given before the command's name."""
    # --store and --json go before the command or after it; after it, they win.
    parser.add_argument(
        "--store",
        metavar="URL",
        default=os.environ.get("INTERLUDE_STORE", DEFAULT_STORE),
        help=STORE_HELP,
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
    parser.add_argument(
        "--dbos",
        metavar="URL",
        nargs="?",
        const=DBOS_ALONE,
        default=os.environ.get("INTERLUDE_DBOS") or None,
        help=DBOS_HELP,
    )


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
        "  --store URL, --app MODULE:ATTR, --json, --temporal HOST:PORT, --namespace NAME,\n"
        "  --dbos [URL]"
    )
    p = sub.add_parser(
        name,
        help=help,
        description=help,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(command=fn, command_name=name)
    _hidden_globals(p)
    return p


def _hidden_globals(p: argparse.ArgumentParser) -> None:
    """The global options, accepted after a command's name too (where they win)."""
    hidden = argparse.SUPPRESS  # each is explained once, by `interlude --help`
    p.add_argument("--store", default=argparse.SUPPRESS, help=hidden)
    p.add_argument("--app", metavar="MODULE:ATTR", default=argparse.SUPPRESS, help=hidden)
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=hidden)
    p.add_argument("--temporal", metavar="HOST:PORT", default=argparse.SUPPRESS, help=hidden)
    p.add_argument("--namespace", default=argparse.SUPPRESS, help=hidden)
    p.add_argument(
        "--dbos", metavar="URL", nargs="?", const=DBOS_ALONE, default=argparse.SUPPRESS, help=hidden
    )


EXAMPLES = {
    "demo": "interlude demo",
    "run": 'interlude run --app myapp:app billing invoice-8 "Charge acme 42 EUR"',
    "pending": "interlude pending --older-than 1h",
    "answer": "interlude answer demo-1 3f2a9c1b true --by ana",
    "expire": "interlude expire demo-1",
    "recover": "interlude recover --app myapp:app invoice-8",
    "show": "interlude show demo-1",
    "history": "interlude history demo-1",
    "fork": "interlude fork --app myapp:app demo-1 --at d2dbbf05 --as demo-1-retry --by ana",
    "undo": "interlude undo --app myapp:app trip-1 --to m4 --dry-run",
    "move": "interlude --store sqlite:///dev.db move trip-1 --to postgresql://db/agents",
    "sessions": "interlude sessions --json",
    "discard": "interlude discard demo-1",
    "delete": "interlude delete demo-1 --with-audit",
    "serve": "interlude serve --worker --app myapp:app",
    "mcp-serve": "interlude mcp-serve --app myapp:app --by ana --group ops",
    "worker": "interlude worker --app myapp:app --store postgresql://localhost/agents",
    "temporal-worker": "interlude --temporal localhost:7233 temporal-worker --app myapp:app",
    "dbos-worker": "interlude --dbos postgresql://localhost/agents dbos-worker --app myapp:app "
    "--executor-id w1",
    "policy": "interlude policy check policy.toml --app myapp:app\n"
    "  interlude policy replay --policy policy.toml --since 30d",
}
"""One example per command, shown by its ``--help``."""


def _task_queue_option(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--task-queue", metavar="QUEUE", help=help)


def _session_argument(p: argparse.ArgumentParser, help: str = "the session's id") -> None:
    """SESSION: every command names a session the same way (``args.session``)."""
    p.add_argument("session", metavar="SESSION", help=help)


def _by_option(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--by", metavar="NAME", help=f"{help} (default: your OS user name)")


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

    run = _command_parser(
        sub,
        "run",
        _run_agent,
        "start a session of your own agent (--app) on a prompt, or carry one on with a new one",
    )
    run.add_argument("agent_name", metavar="AGENT", help="the agent's name in the --app")
    _session_argument(run, "the session's id (new, or not waiting)")
    run.add_argument("prompt", metavar="PROMPT", help="what to ask the agent")

    pending = _command_parser(sub, "pending", _pending, "list the interrupts waiting for an answer")
    pending.add_argument("--name", help="only interrupts with this name")
    pending.add_argument("--tool", help="only interrupts about this tool")
    pending.add_argument("--older-than", type=_duration, help="e.g. 30s, 10m, 2h, 1d")
    pending.add_argument("--newer-than", type=_duration, help="e.g. 30s, 10m, 2h, 1d")
    _task_queue_option(pending, "with --temporal: only workflows on this task queue")

    _answer_command(sub)

    expire = _command_parser(
        sub, "expire", _expire, "settle a session's questions whose deadline passed, and carry on"
    )
    _session_argument(expire)
    _agent_option(expire)

    recover = _command_parser(
        sub, "recover", _recover, "carry on a run whose process stopped before it finished"
    )
    _session_argument(recover)
    _agent_option(recover)


def _answer_command(sub: _Commands) -> None:
    answer = _command_parser(sub, "answer", _answer, "answer an interrupt and carry the session on")
    _session_argument(answer)
    answer.add_argument(
        "interrupt_id",
        metavar="QUESTION",
        help="the question's id, or the short id `pending` and `history` show",
    )
    answer.add_argument(
        "answer", metavar="ANSWER", help='the answer as JSON: true, false, "text", {"k": 1}'
    )
    _by_option(answer, "who answers, for the session's audit trail")
    answer.add_argument(
        "--shown",
        metavar="DIGEST",
        help="the digest of the question as you saw it (`pending --json` gives it as "
        '"shown"): refused if the session\'s question differs',
    )
    _agent_option(answer)


def _session_commands(sub: _Commands) -> None:
    """show, sessions, discard and delete: the commands that look at or drop sessions."""
    show = _command_parser(
        sub, "show", _show, "show a session's conversation, pause and audit trail"
    )
    _session_argument(show)

    _command_parser(sub, "sessions", _sessions, "list the sessions in the store and their state")

    from ._history import fork_command, history_command

    history = _command_parser(
        sub, "history", history_command, "list a session's checkpoints (its steps), oldest first"
    )
    _session_argument(history)
    fork = _command_parser(
        sub, "fork", fork_command, "make a new session standing at a checkpoint of another"
    )
    _session_argument(fork, "the session to fork (it does not change)")
    fork.add_argument(
        "--at",
        required=True,
        metavar="CHECKPOINT",
        help="a checkpoint's id as `history` lists it (a question's short id, as `pending` "
        "shows it, or its full id)",
    )
    fork.add_argument(
        "--as", dest="new", metavar="NEW", help="the new session's id (default: made from it)"
    )
    _by_option(fork, "who forks, for the new session's audit trail")
    _agent_option(fork)
    _undo_command(sub)
    move_command(sub, _command_parser)

    discard = _command_parser(
        sub,
        "discard",
        _discard,
        "drop a session's pause (or stopped run): its open tool calls become cancelled",
    )
    _session_argument(discard)
    _agent_option(discard)

    delete = _command_parser(
        sub, "delete", _delete, "delete a session from the store (refused while a run holds it)"
    )
    _session_argument(delete)
    delete.add_argument(
        "--with-audit",
        action="store_true",
        help="also when the session has an audit trail (deleted with it)",
    )


def _undo_command(sub: _Commands) -> None:
    from ._undo import undo_command

    undo = _command_parser(
        sub,
        "undo",
        undo_command,
        "take a session back to a checkpoint: the calls made since are compensated, newest first",
    )
    _session_argument(undo, "the session to take back (a graph's or swarm's: with --node)")
    undo.add_argument(
        "--to",
        required=True,
        metavar="CHECKPOINT",
        help="a checkpoint's id as `history` lists it (a question's short id, or its full id)",
    )
    undo.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (which calls, which compensations) and change nothing",
    )
    undo.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="CALL",
        help="a call to leave as it is (one without a compensation); repeatable",
    )
    undo.add_argument(
        "--node",
        metavar="NAME",
        help="for a graph's or swarm's session: the node whose agent's calls to undo",
    )
    _by_option(undo, "who undoes, for the session's audit trail")
    _agent_option(undo)


def _duration(text: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhd]?)", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use 30s, 10m, 2h, 1d)")
    scale = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    return float(m.group(1)) * scale


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
