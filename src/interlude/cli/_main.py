"""``interlude``: run the demo, list pending interrupts, answer one, recover a stopped run,
show, list, discard or delete sessions; serve the web inbox and run workers.

Every command takes ``--store URL`` (default: the demo's SQLite file, or $INTERLUDE_STORE),
``--app module:attribute`` (default: $INTERLUDE_APP, else the built-in demo app) and ``--json``
for scripts, before or after the command's name. Only ``demo`` creates a store; the other
commands report a store that does not exist.

Commands that run a session's agent (``answer``, ``recover``, ``discard``) build it with the
factory the ``--app`` registers under the agent name the session records. Nothing named in
stored data is ever imported: write access to a store does not choose the code that runs here.

Errors are one line on stderr with exit code 1 (with ``--json``, also a
``{"error": ..., "session": ...}`` document on stdout). An error found before a run changes
nothing; when a run itself fails, the line names the session and what became of it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from .._sync import run_sync
from ..errors import InterludeError, ResumeError, SessionConflictError, SessionError
from ._render import Output, claim_words, program, short_id, show_command

if TYPE_CHECKING:
    from types import FrameType

    from .. import Agent, AgentResult, App
    from .._agent._state import Pause
    from .._messages import Message
    from ..sessions import SessionStore, StoredSession

__all__ = ["run"]

T = TypeVar("T")

DEFAULT_STORE = "sqlite:///.interlude/demo.db"
BUILT_IN_APP = "the built-in demo app"


class CliError(InterludeError):
    """A problem to report in one line (exit code 1), about ``session`` if it names one; part
    of the one error tree, so code that calls the command catches it with InterludeError."""

    def __init__(self, message: str, *, session: str | None = None) -> None:
        super().__init__(message)
        self.session = session


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
        return int(args.command(args, out))
    except CliError as exc:
        out.error(str(exc), session=exc.session)
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


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="interlude", description="Agents that stop for a person and carry on later."
    )
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
    sub = parser.add_subparsers(required=True, metavar="COMMAND")

    def command(name: str, fn: Callable[..., int], help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.set_defaults(command=fn)
        p.add_argument("--store", default=argparse.SUPPRESS, help=STORE_HELP)
        p.add_argument("--app", metavar="MODULE:ATTR", default=argparse.SUPPRESS, help=APP_HELP)
        p.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for scripts"
        )
        return p

    def agent_option(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--agent",
            metavar="NAME",
            help="the --app agent to run a session that records no agent name (one saved by "
            "an older version); the session records it from then on",
        )

    demo = command("demo", _demo, "run an agent that stops to ask before a risky tool")
    demo.add_argument("--model", help="run on a real model, e.g. openai:gpt-4.1-mini")
    demo.add_argument("--session", help="session id (default: a new demo-<id>)")

    pending = command("pending", _pending, "list the interrupts waiting for an answer")
    pending.add_argument("--name", help="only interrupts with this name")
    pending.add_argument("--tool", help="only interrupts about this tool")
    pending.add_argument("--older-than", type=_duration, help="e.g. 30s, 10m, 2h, 1d")
    pending.add_argument("--newer-than", type=_duration, help="e.g. 30s, 10m, 2h, 1d")

    answer = command("answer", _answer, "answer an interrupt and carry the session on")
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
    agent_option(answer)

    expire = command(
        "expire", _expire, "settle a session's questions whose deadline passed, and carry on"
    )
    expire.add_argument("session")
    agent_option(expire)

    recover = command(
        "recover", _recover, "carry on a run whose process stopped before it finished"
    )
    recover.add_argument("session")
    agent_option(recover)

    show = command("show", _show, "show a session's conversation, pause and audit trail")
    show.add_argument("session")

    command("sessions", _sessions, "list the sessions in the store and their state")

    discard = command(
        "discard",
        _discard,
        "drop a session's pause (or stopped run): its open tool calls become cancelled",
    )
    discard.add_argument("session")
    agent_option(discard)

    delete = command(
        "delete", _delete, "delete a session from the store (refused while a run holds it)"
    )
    delete.add_argument("session")

    serve = command(
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

    worker = command(
        "worker",
        _worker,
        "carry on sessions that have recorded answers, expired questions or stopped runs",
    )
    worker.add_argument("--once", action="store_true", help="handle what is there now, then exit")
    worker.add_argument("--poll", type=float, default=0.5, help="seconds between checks (0.5)")
    return parser


# --- commands ------------------------------------------------------------------------------


def _next_demo_session(store: SessionStore) -> str:
    """The first free ``demo-<n>``: a fresh clone's first demo is ``demo-1``, so the commands
    the README shows for it work as written."""

    taken = set(run_sync(store.list_sessions()))
    n = 1
    while f"demo-{n}" in taken:
        n += 1
    return f"demo-{n}"


def _demo(args: argparse.Namespace, out: Output) -> int:
    from ._demo import NAME, PROMPT, app, choose_model

    store = _store(args.store, create=True)
    session_id = args.session or _next_demo_session(store)
    if _await(store.load(session_id)) is not None:
        raise CliError(
            f"session {session_id!r} already exists; pick another --session", session=session_id
        )
    agent = app.start(NAME, session_id, store)
    choose_model(agent, args.model)
    out.intro(args.store, session_id, PROMPT)
    result = _run(out, lambda: agent(PROMPT), session_id, args.store, agent)
    out.outcome(session_id, result, agent.messages, args.store, first=True)
    return 0


def _pending(args: argparse.Namespace, out: Output) -> int:

    store = _store(args.store)
    now = time.time()
    entries = run_sync(
        store.pending_interrupts(
            name=args.name,
            tool_name=args.tool,
            older_than=None if args.older_than is None else now - args.older_than,
            newer_than=None if args.newer_than is None else now - args.newer_than,
        )
    )
    out.pending(entries, now, args.store)
    return 0


def _answer(args: argparse.Namespace, out: Output) -> int:
    try:
        answer = json.loads(args.answer)
    except ValueError:
        raise CliError(
            f'the answer {args.answer!r} is not JSON (use true, false, 42, "text", {{...}})'
        ) from None
    agent = _session_agent(args)
    if agent.needs_recovery:
        raise CliError(
            f"session {args.session!r} holds a run that stopped before it finished; carry it "
            f"on first: {program()} recover {args.session}",
            session=args.session,
        )
    if not agent.is_paused:
        raise CliError(f"session {args.session!r} has no pending interrupt", session=args.session)
    interrupt_id = _interrupt_id(args.session, args.interrupt_id, [i.id for i in agent.interrupts])
    by = args.by or _operator()
    question = next(i for i in agent.interrupts if i.id == interrupt_id)
    out.answering(question)  # what is answered, from the session's pause (not the index)
    shown = None if args.shown is None else {interrupt_id: args.shown}
    before = len(agent.messages)
    result = _run(
        out,
        lambda: agent.resume({interrupt_id: answer}, by=by, shown=shown),
        args.session,
        args.store,
        agent,
    )
    out.outcome(args.session, result, agent.messages[before:], args.store, first=False)
    return 0


def _interrupt_id(session: str, given: str, pending: list[str]) -> str:
    """The pending interrupt ``given`` names: its id, or its short id (see ``short_id``)."""
    if given in pending:
        return given
    matches = [i for i in pending if short_id(i) == given.lower()]
    if len(matches) == 1:
        return matches[0]
    listed = ", ".join(f"{short_id(i)} ({i})" for i in pending)
    what = "names several" if matches else "has no"
    raise CliError(
        f"session {session!r} {what} pending interrupt {given!r} (pending: {listed})",
        session=session,
    )


def _expire(args: argparse.Namespace, out: Output) -> int:
    agent = _session_agent(args)
    if not agent.is_paused:
        raise CliError(f"session {args.session!r} has no pending interrupt", session=args.session)
    before = len(agent.messages)
    result = _run(out, agent.resume_expired, args.session, args.store, agent)
    out.outcome(args.session, result, agent.messages[before:], args.store, first=False)
    return 0


def _recover(args: argparse.Namespace, out: Output) -> int:
    agent = _session_agent(args)
    if not agent.needs_recovery:
        state = "paused: answer it with `interlude answer`" if agent.is_paused else "not running"
        raise CliError(
            f"session {args.session!r} holds no stopped run ({state})", session=args.session
        )
    before = len(agent.messages)
    result = _run(out, agent.recover, args.session, args.store, agent)
    out.outcome(args.session, result, agent.messages[before:], args.store, first=False)
    return 0


def _discard(args: argparse.Namespace, out: Output) -> int:
    agent = _session_agent(args)
    if not agent.is_paused and not agent.needs_recovery:
        raise CliError(
            f"session {args.session!r} has no pause or stopped run to discard",
            session=args.session,
        )
    what = "pause" if agent.is_paused else "stopped run"
    dropped = [i.id for i in agent.interrupts]
    agent.discard_pause()
    out.discarded(args.session, what, dropped)
    return 0


def _session_agent(args: argparse.Namespace) -> Agent:
    """The session's agent, built in this process by the ``--app`` factory of the agent name
    the session records (refused while another process runs the session)."""
    store = _store(args.store)
    stored = _await(store.load(args.session))
    if stored is None:
        raise CliError(f"no session {args.session!r} in {args.store}")
    _refuse_if_running(args.session, _live_claim(stored))
    given = args.agent
    if given is not None and ":" in given:
        raise CliError(
            f"--agent takes an agent name, not module:function ({given!r}): register the "
            "factory in an interlude.App and pass --app module:attribute",
            session=args.session,
        )
    app, which = _load_app(args.app)
    name = stored.agent
    if name is None and given is None:
        raise CliError(
            f"session {args.session!r} records no agent name (it was saved by an older version "
            "of Interlude, or by an Agent without name=), so nothing here knows how to build "
            "its agent; pass --app module:attribute naming your interlude.App and --agent NAME "
            "naming the agent of that app that runs this session (it is recorded from then on)",
            session=args.session,
        )
    if name is not None and given is not None and given != name:
        raise CliError(
            f"session {args.session!r} records agent {name!r}, not --agent {given!r}",
            session=args.session,
        )
    name = name or given
    if name not in app:
        hint = (
            "pass --app module:attribute (or set INTERLUDE_APP) naming the interlude.App that "
            "registers it"
            if args.app is None
            else "check --app, or register the agent in that app"
        )
        raise CliError(
            f"session {args.session!r} records agent {name!r}, which {which} does not have "
            f"(its agents: {', '.join(map(repr, app.names)) or 'none'}); nothing was run: {hint}",
            session=args.session,
        )
    try:
        return app.open(args.session, store, unnamed=given)
    except InterludeError as exc:
        raise CliError(f"session {args.session!r}: {_what(exc)}", session=args.session) from None
    except Exception as exc:
        raise CliError(
            f"session {args.session!r}: the factory of agent {name!r} in {which} failed: "
            f"{_what(exc)}",
            session=args.session,
        ) from None


def _load_app(spec: str | None) -> tuple[App, str]:
    """The ``--app`` application and how to name it in messages; the built-in demo app when
    no ``--app`` is given. This folder is first on the import path while the module imports
    (only then), as users expect of ``module:attribute``."""
    if spec is None:
        from ._demo import app

        return app, BUILT_IN_APP
    import importlib

    from .. import App

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise CliError(f"--app takes module:attribute (e.g. myapp:app), got {spec!r}")
    here = os.getcwd()
    sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise CliError(f"cannot import the --app module {module_name!r}: {exc}") from None
    except Exception as exc:
        raise CliError(f"importing the --app module {module_name!r} failed: {_what(exc)}") from None
    finally:
        if here in sys.path:
            sys.path.remove(here)  # the first entry, the one inserted above
    try:
        found: object = module
        for part in attr.split("."):
            found = getattr(found, part)
    except AttributeError:
        raise CliError(f"--app {spec!r}: module {module_name!r} has no {attr!r}") from None
    if not isinstance(found, App):
        raise CliError(f"--app {spec!r} is a {type(found).__name__}, not an interlude.App")
    return found, f"--app {spec}"


def _operator() -> str:
    """Who answers when ``--by`` is not given: the OS user name."""
    import getpass

    try:
        return getpass.getuser() or "unknown"
    except Exception:  # no user name in the environment nor the password database
        return "unknown"


def _show(args: argparse.Namespace, out: Output) -> int:
    store = _store(args.store)
    stored = _await(store.load(args.session))
    if stored is None:
        raise CliError(f"no session {args.session!r} in {args.store}")
    messages, pause = _decode(stored)
    out.show(
        args.session,
        stored.version,
        messages,
        pause,
        stored.state,
        claim=_live_claim(stored),
        agent=stored.agent,
        audit=list(stored.audit),
    )
    return 0


def _sessions(args: argparse.Namespace, out: Output) -> int:

    store = _store(args.store)

    async def statuses() -> list[dict[str, Any]]:
        rows = []
        for session_id in sorted(await store.list_sessions()):
            stored = await store.load(session_id)
            if stored is None:  # deleted meanwhile
                continue
            messages, pause = _decode(stored)
            interrupts = [] if pause is None else pause.interrupts
            claim = _live_claim(stored)
            state = (
                "running"
                if claim is not None
                else "paused"
                if interrupts
                else "stopped"
                if pause is not None
                else "idle"
            )
            rows.append(
                {
                    "session": session_id,
                    "state": state,
                    "questions": len(interrupts),
                    "messages": len(messages),
                    "version": stored.version,
                }
            )
        return rows

    out.sessions(run_sync(statuses()))
    return 0


def _delete(args: argparse.Namespace, out: Output) -> int:

    store = _store(args.store)
    stored = run_sync(store.load(args.session))
    if stored is None:
        raise CliError(f"no session {args.session!r} in {args.store}")
    _refuse_if_running(args.session, _live_claim(stored))
    run_sync(store.delete(args.session))
    out.deleted(args.session)
    return 0


def _serve(args: argparse.Namespace, out: Output) -> int:
    try:
        import uvicorn

        from ..server import create_app, load_tokens
    except ImportError as exc:
        raise CliError(
            f"interlude serve needs the [server] extra ({exc.name} is missing): "
            "pip install 'interlude[server]'"
        ) from None
    if not args.poll > 0:
        raise CliError(f"--poll takes seconds > 0, got {args.poll}")
    store = _store(args.store)
    tokens = load_tokens(args.tokens)
    made = None
    if not tokens:
        if not _loopback(args.host):
            raise CliError(
                f"no tokens, and --host {args.host} is not a loopback address: set "
                "INTERLUDE_TOKENS=token=name (tokens of 16+ characters) or pass --tokens FILE"
            )
        import secrets

        made = secrets.token_urlsafe(24)
        tokens = {made: _operator()}
    app = _load_app(args.app)[0] if args.worker else None
    asgi = create_app(store, app, tokens=tokens, worker=args.worker, poll=args.poll)
    shown_host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{shown_host}:{args.port}"
    out.serving(url, made, tokens.get(made or "", ""), args.store, worker=args.worker)
    config = uvicorn.Config(
        asgi,
        host=args.host,
        port=args.port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=3,
    )
    from ..server._app import stop_streams

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            stop_streams(asgi)  # end the event streams now, not after the graceful timeout
            super().handle_exit(sig, frame)

    import contextlib

    with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises Ctrl-C once it has stopped
        Server(config).run()
    return 0


def _loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def _worker(args: argparse.Namespace, out: Output) -> int:
    import asyncio
    import contextlib
    import logging

    from .. import Worker

    if not args.poll > 0:
        raise CliError(f"--poll takes seconds > 0, got {args.poll}")
    store = _store(args.store)
    app, which = _load_app(args.app)
    worker = Worker(app, store, poll=args.poll)
    if args.once:
        handled = asyncio.run(worker.run_once())
        out.worked(handled, dict(worker.failed))
        return 1 if worker.failed else 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    out.working_forever(args.store, which)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: stop between sessions
        asyncio.run(worker.run())
    out.worked(worker.handled, dict(worker.failed))
    return 0


# --- helpers -------------------------------------------------------------------------------


def _decode(stored: StoredSession) -> tuple[list[Message], Pause | None]:
    """A stored session's conversation and pause (None while a run's journal is stored)."""
    from .._agent._codec import FORMAT, decode_state
    from .._agent._persist import split_marker

    pause, _ = split_marker(stored.pause)
    state = decode_state(
        {
            "format": FORMAT,
            "version": stored.format_version,
            "messages": stored.messages,
            "state": stored.state,
            "pause": pause,
            "tools": stored.tools,
        }
    )
    return state.messages, state.pause


def _live_claim(stored: StoredSession) -> dict[str, Any] | None:
    """The claim of the run that holds the session now, if one does."""
    from .._agent._persist import claim_is_live, split_marker

    _, marker = split_marker(stored.pause)
    claim = stored.claim if marker is None else marker
    return dict(claim) if claim is not None and claim_is_live(claim) else None


def _refuse_if_running(session_id: str, claim: dict[str, Any] | None) -> None:
    if claim is not None:
        raise CliError(
            f"session {session_id!r} is being run by another process ({claim_words(claim)}); "
            "nothing was done here: wait for the run to finish",
            session=session_id,
        )


def _store(url: str, *, create: bool = False) -> SessionStore:
    """The store at ``url``; unless ``create``, a SQLite or file store must already exist."""
    from ..sessions import open_store
    from ..sessions._url import local_store_path

    local = local_store_path(url)  # a malformed URL: ConfigurationError, one line
    if local is not None and not create:
        kind, path, _ = local
        if not (os.path.isfile(path) if kind == "sqlite" else os.path.isdir(path)):
            hint = "run `interlude demo` to create one" if url == DEFAULT_STORE else "check --store"
            raise CliError(f"no store at {path} ({url}): {hint}")
    try:
        return open_store(url)
    except InterludeError:
        raise
    except Exception as exc:  # a driver's own connection error
        raise CliError(f"cannot open store {url}: {exc}") from None


def _run(
    out: Output, call: Callable[[], AgentResult], session_id: str, store: str, agent: Agent
) -> AgentResult:
    """Run the agent; a failure becomes a CliError that says what became of the session."""
    try:
        with out.working("the agent is working"):
            return call()
    except Exception as exc:
        where = f"session {session_id!r}"
        see = f"see `{show_command(session_id, store)}`"
        if isinstance(exc, ResumeError):
            message = f"{where}: the answer was refused ({_what(exc)}); the session is unchanged"
        elif isinstance(exc, SessionConflictError) and not _lost_mid_run(agent):
            message = (
                f"{where}: another process answered/ran this session first; nothing was run "
                f"here ({exc}): {see}"
            )
        elif isinstance(exc, SessionError):
            message = (
                f"{where}: the store failed during the run ({_what(exc)}); what was saved "
                f"before that is kept: {see}"
            )
        else:
            message = f"{where}: the run failed ({_what(exc)}); what completed is saved: {see}"
        raise CliError(message, session=session_id) from None


def _lost_mid_run(agent: Agent) -> bool:
    """Whether another process took the session over while this run was going (rather than
    winning the race to start it, when this process ran nothing)."""
    link = getattr(agent, "_session", None)
    return getattr(link, "lost", None) is not None


def _await(coro: Coroutine[Any, Any, T]) -> T:

    return run_sync(coro)


def _what(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _duration(text: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhd]?)", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use 30s, 10m, 2h, 1d)")
    scale = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    return float(m.group(1)) * scale


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
