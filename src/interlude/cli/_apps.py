"""``--app``: loading the App whose agents run sessions, and building a session's agent with
the factory it registers under the agent name the session records (``--agent`` for a session
that records none). Nothing named in stored data is imported."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from ..errors import InterludeError
from ._errors import CliError, _what
from ._stores import _await, _live_claim, _refuse_if_running, _store

if TYPE_CHECKING:
    from .. import App
    from ..operate import Opened

__all__ = ["BUILT_IN_APP", "_app_agents", "_load_app", "_session_agent"]

BUILT_IN_APP = "the built-in demo app"


def _session_agent(args: argparse.Namespace) -> Opened:
    """The session's agent (or graph, or swarm), built in this process by the ``--app``
    factory of the name the session records (refused while another process runs the session,
    and for a node agent's session: its graph carries it on)."""
    store = _store(args.store)
    stored = _await(store.load(args.session))
    if stored is None:
        raise CliError(f"no session {args.session!r} in {args.store}")
    if ":node:" in args.session:
        from ..multiagent import graph_of

        graph = _await(graph_of(store, args.session))
        if graph is not None:
            raise CliError(
                f"session {args.session!r} is a node's agent of graph session {graph!r}: "
                f"nothing was done; carry the graph on instead (answer, recover {graph})",
                session=args.session,
            )
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


def _app_agents(spec: str | None) -> frozenset[str]:
    """The names of the agents (graphs, swarms) the ``--app`` registers (the built-in demo
    app's without one): the sessions the commands a command suggests can carry on."""
    return frozenset(_load_app(spec)[0].names)


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
