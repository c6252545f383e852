"""``interlude policy check FILE`` and ``interlude policy replay --policy FILE``.

``check`` reads a policy file and reports what is wrong with it (see ``Policy.check``): with
``--app``, also rules that cover none of the tools the app's agents (and graph nodes) have.
Exit code 1 when it finds anything, so a CI job can run it on every change of the file.

``replay`` says what the policy would have decided about every tool call in the ``--store``'s
sessions (``--agent`` names, ``--since`` a date), against what happened; nothing runs.
"""

from __future__ import annotations

import argparse
import datetime
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ._errors import CliError
from ._render import Output
from ._stores import _await, _store

if TYPE_CHECKING:
    from ..operate import App
    from ..policy import Policy

__all__ = ["policy_commands"]

_AGO = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}
CommandParser = Callable[..., argparse.ArgumentParser]


def policy_commands(
    sub: Any, command_parser: CommandParser, hidden_options: Callable[..., None]
) -> None:
    """Add ``policy check`` and ``policy replay`` to the command line."""
    p = command_parser(
        sub, "policy", _check, "check an approval policy file, or replay stored sessions under it"
    )
    actions = p.add_subparsers(required=True, metavar="ACTION")
    check = actions.add_parser(
        "check",
        help="report unreachable rules, bad expressions and (with --app) unknown tools",
        description="Report what is wrong with a policy file; exit code 1 if anything is.",
    )
    check.add_argument("file", metavar="FILE", help="the policy's TOML file")
    check.set_defaults(command=_check, command_name="policy")
    hidden_options(check)
    replay = actions.add_parser(
        "replay",
        help="what the policy would have decided about every stored call; runs nothing",
        description="What the policy would have decided about every tool call in the "
        "store's sessions, against what happened. No model is called, no tool runs.",
    )
    replay.add_argument("--policy", metavar="FILE", required=True, help="the policy's TOML file")
    replay.add_argument(
        "--since",
        metavar="WHEN",
        help="only calls decided since then: an ISO date or time (2026-11-01, UTC unless it "
        "says), or a time ago (30d, 12h, 90m)",
    )
    replay.add_argument(
        "--agent",
        metavar="NAME",
        action="append",
        dest="agents",
        help="only this agent's sessions (repeatable)",
    )
    replay.set_defaults(command=_replay, command_name="policy")
    hidden_options(replay)


def _read(path: str) -> Policy:
    from ..policy import Policy

    try:
        return Policy.from_file(path)
    except ConfigurationError as exc:
        raise CliError(str(exc)) from None


def _check(args: argparse.Namespace, out: Output) -> int:
    tools = None if args.app is None else sorted(_tools_of(args.app))  # (a bad --app first)
    policy = _read(args.file)
    problems = policy.check(tools)
    if out.json_mode:
        out._json({"file": args.file, "rules": len(policy.rules), "problems": problems})
    else:
        for line in problems:
            out._say(f"{args.file}: {line}", "yellow")
        checked = f" against {len(tools)} tools of {args.app}" if tools is not None else ""
        verdict = f"{len(problems)} problem(s)" if problems else "no problems"
        out._say(f"{args.file}: {len(policy.rules)} rules{checked}: {verdict}")
    return 1 if problems else 0


def _tools_of(spec: str) -> set[str]:
    """The tool names of every agent the app registers (graph and swarm nodes' too)."""
    from .. import Agent
    from ..sessions import MemoryStore
    from ._apps import _load_app

    app: App = _load_app(spec)[0]
    names: set[str] = set()
    for name in app.names:
        try:
            built = app.start(name, f"policy-check-{name}", MemoryStore())
        except Exception as exc:
            raise CliError(
                f"--app {spec}: building {name!r} to list its tools failed: {exc}"
            ) from None
        agents = [built] if isinstance(built, Agent) else _node_agents(built)
        for agent in agents:
            names.update(agent.tools)
    return names


def _node_agents(orchestration: Any) -> list[Any]:
    found = []
    for node in orchestration.nodes.values():
        inner = getattr(node, "inner", None)
        found.extend(_node_agents(inner) if inner is not None else [node.agent])
    return found


def _replay(args: argparse.Namespace, out: Output) -> int:
    policy = _read(args.policy)
    since = None if args.since is None else _when(args.since)
    store = _store(args.store)
    report = _await(policy.replay(store, agents=args.agents, since=since))
    if out.json_mode:
        out._json({"policy": policy.version, **report.to_dict()})
        return 0
    would = ", ".join(f"{k} {n}" for k, n in report.would.items())
    out._say(
        f"{report.calls} calls in {report.sessions} sessions: the policy would {would}"
        + (f"; {report.skipped} before --since" if report.skipped else "")
    )
    for change in report.changes:
        out._say(
            f"  {change.session_id} {change.call_id} {change.tool}: {change.happened}, "
            f"would {change.would} ({change.rule})"
        )
    for call in report.unjudged:
        out._say(
            f"  {call.session_id} {call.call_id} {call.tool}: not judged (the record does "
            f"not say its {call.field})",
            "yellow",
        )
    out._say(f"{len(report.changes)} change(s), {len(report.unjudged)} not judged")
    return 0


def _when(text: str) -> float:
    """Epoch seconds of ``--since``: an ISO date or time (UTC unless it names a zone), or a
    time ago (``30d``)."""
    ago = _AGO.fullmatch(text.strip())
    if ago is not None:
        now = datetime.datetime.now(datetime.UTC).timestamp()
        return now - float(ago.group(1)) * _UNIT[ago.group(2)]
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise CliError(
            f"--since takes an ISO date or time (2026-11-01) or a time ago (30d), got {text!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return when.timestamp()
