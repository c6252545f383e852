"""The session commands: demo, pending, answer, expire, recover, discard, show, sessions and
delete."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from .._agent import Agent
from .._json import DuplicateKeyError
from .._json import loads as strict_json
from .._result import AgentResult
from .._sync import run_sync
from ..errors import AlreadyAnsweredError, InterludeError, ResumeError, SessionMovedError
from ._apps import _app_agents, _session_agent
from ._errors import CliError, _run, _what
from ._hints import app_flag, program, short_id, store_flag
from ._render import Output
from ._stores import _await, _decode, _live_claim, _refuse_if_running, _store

if TYPE_CHECKING:
    from .._interrupt import Interrupt
    from ..operate import Outcome, Resumable
    from ..sessions import SessionStore

__all__ = [
    "_answer",
    "_delete",
    "_demo",
    "_discard",
    "_expire",
    "_operator",
    "_pending",
    "_recover",
    "_run_agent",
    "_sessions",
    "_show",
]


def _next_demo_session(store: SessionStore) -> str:
    """The first free ``demo-<n>``: a fresh clone's first demo is ``demo-1``, so the commands
    the README shows for it work as written."""

    taken = set(run_sync(store.list_sessions()))
    n = 1
    while f"demo-{n}" in taken:
        n += 1
    return f"demo-{n}"


def _demo(args: argparse.Namespace, out: Output) -> int:
    import sys

    from ._demo import NAME, PROMPT, app, choose_model

    if args.app:  # the demo is the built-in app's; the commands it suggests must be too
        print(
            f"demo runs the built-in demo agent and ignores --app {args.app} (start your own "
            f"agent with `{program()} run --app {args.app} AGENT SESSION PROMPT`)",
            file=sys.stderr,
        )
        out.app = None
    store = _store(args.store, create=True)
    session_id = args.session or _next_demo_session(store)
    if _await(store.load(session_id)) is not None:
        raise CliError(
            f"session {session_id!r} already exists; pick another --session", session=session_id
        )
    agent = app.start(NAME, session_id, store)
    assert isinstance(agent, Agent)
    choose_model(agent, args.model)
    out.intro(args.store, session_id, PROMPT)
    result = _run(out, lambda: agent(PROMPT), session_id, args.store, agent)
    out.outcome(session_id, result, agent.messages, args.store, first=True)
    return 0


def _run_agent(args: argparse.Namespace, out: Output) -> int:
    """``run AGENT SESSION PROMPT``: start a session of the --app's agent AGENT on PROMPT, or
    carry a session of it that is not waiting on anything on with a new prompt."""
    from ._apps import _load_app

    app, which = _load_app(args.app)
    if args.agent_name not in app:
        raise CliError(
            f"{which} has no agent {args.agent_name!r} (its agents: "
            f"{', '.join(map(repr, app.names)) or 'none'}): pass --app module:attribute naming "
            "the interlude.App that registers it"
        )
    store = _store(args.store, create=True)
    stored = _await(store.load(args.session))
    try:
        if stored is None:
            agent = app.start(args.agent_name, args.session, store)
        else:
            agent = app.open(args.session, store, unnamed=args.agent_name)
    except InterludeError as exc:
        raise CliError(f"session {args.session!r}: {_what(exc)}", session=args.session) from None
    if not isinstance(agent, Agent):
        from ._graphs import run_graph

        return run_graph(args, out, agent, new=stored is None)
    if stored is not None:
        _refuse_if_running(args.session, _live_claim(stored))
        if agent.is_paused or agent.needs_recovery:
            waits = (
                "questions: answer them first"
                if agent.is_paused
                else "a stopped run: carry it on with `recover` first"
            )
            raise CliError(f"session {args.session!r} waits on {waits}", session=args.session)
    before = len(agent.messages)
    result = _run(out, lambda: agent(args.prompt), args.session, args.store, agent)
    out.outcome(args.session, result, agent.messages[before:], args.store, first=stored is None)
    return 0


def _pending(args: argparse.Namespace, out: Output) -> int:
    from ..sessions import PendingQuery

    store = _store(args.store)
    now = time.time()
    query = PendingQuery(
        name=args.name,
        tool_name=args.tool,
        older_than=None if args.older_than is None else now - args.older_than,
        newer_than=None if args.newer_than is None else now - args.newer_than,
    )
    entries = run_sync(store.pending_interrupts(query))
    # the answer command shown is for a session the app in use can carry on
    agents = None if out.json_mode or not entries else _app_agents(args.app)
    out.pending(entries, now, args.store, agents=agents)
    return 0


def _answer(args: argparse.Namespace, out: Output) -> int:
    """``answer SESSION ID VALUE``: the session's agent, graph or swarm resumes in this
    process with the answer (checked first, as every door checks it: refused, nothing
    changes)."""
    try:
        answer = strict_json(args.answer)
    except DuplicateKeyError as exc:
        raise CliError(f"the answer {args.answer!r:.80}: {exc}") from None
    except ValueError:
        raise CliError(
            f'the answer {args.answer!r} is not JSON (use true, false, 42, "text", {{...}})'
        ) from None
    opened = _session_agent(args)
    by = args.by or _operator()
    if opened.needs_recovery:
        raise CliError(
            f"session {args.session!r} holds a run that stopped before it finished; carry it "
            f"on first: {program()} recover{store_flag(args.store)}{app_flag(args.app)} "
            f"{args.session}",
            session=args.session,
        )
    _answered_first(args, opened, answer, by)
    questions = _paused(args, opened)
    interrupt_id = _interrupt_id(args.session, args.interrupt_id, [i.id for i in questions])
    out.answering(next(i for i in questions if i.id == interrupt_id))  # as the pause holds it
    shown = None if args.shown is None else {interrupt_id: args.shown}
    return _carry(
        args, out, opened, lambda: opened.resume_async({interrupt_id: answer}, by=by, shown=shown)
    )


def _answered_first(args: argparse.Namespace, opened: Resumable, answer: Any, by: str) -> None:
    """CliError (``already_answered``) for an answer to a question someone answered first,
    whatever the door (recorded in the inbox, or applied): nothing is changed."""
    if args.interrupt_id in {i.id for i in opened.interrupts}:
        return
    try:
        opened.check_resume({args.interrupt_id: answer}, by=by)
    except (AlreadyAnsweredError, SessionMovedError) as exc:
        raise CliError(
            f"session {args.session!r}: the answer was refused ({_what(exc)}); the session is "
            "unchanged",
            session=args.session,
            refusal=exc.code,
        ) from None
    except InterludeError:
        return  # not pending for another reason: said below


def _paused(args: argparse.Namespace, opened: Resumable) -> list[Interrupt]:
    """The session's questions; CliError when it waits on none."""
    if not opened.is_paused:
        raise CliError(f"session {args.session!r} has no pending interrupt", session=args.session)
    return opened.interrupts


def _carry(
    args: argparse.Namespace,
    out: Output,
    opened: Resumable,
    move: Callable[[], Coroutine[Any, Any, Outcome]],
) -> int:
    """Make ``move`` on the session and print how it ended (an agent's new messages and
    reply, or a graph's nodes)."""
    before = len(opened.messages) if isinstance(opened, Agent) else 0
    result: Outcome = _run(out, lambda: run_sync(move()), args.session, args.store, opened)
    if isinstance(opened, Agent):
        assert isinstance(result, AgentResult)
        out.outcome(args.session, result, opened.messages[before:], args.store, first=False)
    else:
        from ..multiagent import MultiAgentResult
        from ._graphs import graph_outcome

        assert isinstance(result, MultiAgentResult)
        graph_outcome(out, args.session, result, args.store)
    return 0


def _interrupt_id(session: str, given: str, pending: list[str]) -> str:
    """The pending interrupt ``given`` names: its id, its answer key (``SESSION/ID``), or its
    short id (see ``short_id``)."""
    from ..operate import question_id_of

    try:
        given = question_id_of(session, given)
    except InterludeError as exc:
        raise CliError(f"session {session!r}: {exc}", session=session) from None
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
    opened = _session_agent(args)
    _paused(args, opened)
    return _carry(args, out, opened, opened.resume_expired_async)


def _recover(args: argparse.Namespace, out: Output) -> int:
    opened = _session_agent(args)
    if not opened.needs_recovery:
        state = "paused: answer it with `interlude answer`" if opened.is_paused else "not running"
        raise CliError(
            f"session {args.session!r} holds no stopped run ({state})", session=args.session
        )
    return _carry(args, out, opened, opened.recover_async)


def _discard(args: argparse.Namespace, out: Output) -> int:
    """``discard SESSION``: drop the pause or stopped run (a graph's: with every started
    node's)."""
    opened = _session_agent(args)
    if not opened.is_paused and not opened.needs_recovery:
        raise CliError(
            f"session {args.session!r} has no pause or stopped run to discard",
            session=args.session,
        )
    what = "pause" if opened.is_paused else "stopped run"
    dropped = [i.id for i in opened.interrupts]
    try:
        opened.discard_pause()
    except ResumeError as exc:
        raise CliError(f"session {args.session!r}: {_what(exc)}", session=args.session) from None
    out.discarded(args.session, what, dropped)
    return 0


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
    if "interlude.orchestration" in stored.state:  # a graph's or swarm's session
        from ._graphs import show_graph

        return show_graph(out, args.session, stored, args.store, _hinted(args, out))
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
        chain=_audit_chain(args.session, list(stored.audit)),
        store=args.store,
        agents=_hinted(args, out),
    )
    return 0


def _hinted(args: argparse.Namespace, out: Output) -> frozenset[str]:
    """The agents of the app in use, for the commands ``show`` suggests (none with --json:
    it suggests none, and imports no --app)."""
    return frozenset() if out.json_mode else _app_agents(args.app)


def _audit_chain(session_id: str, audit: list[Any]) -> str:
    """What the audit trail's chain says: "verified", "signed" (its links need the agent's
    key), "unlinked" (written before the chain existed) or "broken at entry N: why"."""
    from .._audit import AuditEntry, check_chain
    from ..errors import StateFormatError

    try:
        entries = [AuditEntry.from_dict(e, f"audit[{i}]") for i, e in enumerate(audit)]
    except StateFormatError as exc:
        raise CliError(f"session {session_id!r}: its audit trail is corrupt ({exc})") from None
    broken = check_chain(entries)
    if broken is not None:
        return f"broken at entry {broken.index + 1}: {broken.problem}"
    if any(e.chain and e.chain.startswith("hmac-") for e in entries):
        return "signed (its links are checked by the agent, which holds the key)"
    return "verified" if any(e.chain for e in entries) else "unlinked"


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
    if stored.audit and not args.with_audit:
        raise CliError(
            f"session {args.session!r} has an audit trail of {len(stored.audit)} answer(s), "
            "which deleting it removes too: add --with-audit to delete both"
        )
    run_sync(store.delete(args.session))
    out.deleted(args.session)
    return 0
