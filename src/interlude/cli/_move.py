"""``interlude move SESSION --to TARGET``: a paused session (or one stopped between steps)
leaves its store, Temporal or DBOS for another and is carried on there
(``interlude.operate.move``).

The source is the ``--store`` (or, with ``--temporal``, the workflow of that id; with
``--dbos URL``, the DBOS run of that id), as for every command, or ``--from PLACE``; the
target is a store URL, ``temporal`` (the server of ``--temporal`` / $INTERLUDE_TEMPORAL, else
localhost:7233), ``temporal://HOST:PORT`` or ``dbos:postgresql://...`` (a DBOS system
database its workers run on). Moving into Temporal takes the session from ``--store``
whatever ``--temporal`` says, and moving into DBOS whatever ``--dbos`` says."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._errors import CliError
from ._render import Output

if TYPE_CHECKING:
    from ..operate import Place

__all__ = ["move_command", "refuse_if_moved", "run_move"]

DEFAULT_TEMPORAL = "localhost:7233"


def move_command(sub: Any, command_parser: Callable[..., argparse.ArgumentParser]) -> None:
    """Declare ``move``."""
    p = command_parser(
        sub,
        "move",
        run_move,
        "move a paused session to another store or to Temporal, where it is answered from then on",
    )
    p.add_argument("session", metavar="SESSION", help="the session's id (kept where it goes)")
    p.add_argument(
        "--to",
        required=True,
        metavar="TARGET",
        help="where it goes: a store URL (sqlite:///..., postgresql://...), temporal (the "
        "--temporal server), temporal://HOST:PORT or dbos:postgresql://... (a DBOS system "
        "database)",
    )
    p.add_argument(
        "--from",
        dest="source",
        metavar="PLACE",
        help="where it is, when not the --store / --temporal / --dbos: a store URL, "
        "temporal://HOST:PORT or dbos:postgresql://...",
    )
    p.add_argument("--by", metavar="NAME", help="who moves it (default: your OS user name)")
    p.add_argument(
        "--task-queue",
        metavar="QUEUE",
        help="moving into Temporal: the task queue to start it on (agents)",
    )


def run_move(args: argparse.Namespace, out: Output) -> int:
    """Run ``move`` (also the command's form with ``--temporal``); in the ``interlude``
    process, it ends the process once done (temporalio's threads, see ``_temporal``)."""
    from ._temporal import _command

    return _command(_run_move)(args, out)


def _run_move(args: argparse.Namespace, out: Output) -> int:
    from ._commands import _operator

    try:
        moved = asyncio.run(_move(args, args.by or _operator()))
    finally:
        dbos = sys.modules.get("interlude.dbos")
        if dbos is not None:  # the DBOS clients this command opened, in its event loop
            dbos.close_clients()
    out.moved(moved)
    return 0


async def _move(args: argparse.Namespace, by: str) -> dict[str, Any]:
    from ..errors import InterludeError
    from ..operate import move_async

    target = args.to.strip()
    app = _app(args)
    source = await _source(args, target)
    dest = await _place(args, target, create=True)
    try:
        moved = await move_async(args.session, source=source, target=dest, app=app, by=by)
    except CliError:
        raise
    except InterludeError as exc:
        raise CliError(
            f"session {args.session!r} was not moved: {exc}",
            session=args.session,
            refusal=exc.code,
        ) from None
    return moved.to_dict()


async def _source(args: argparse.Namespace, target: str) -> Place:
    """Where the session is: ``--from``, else ``--dbos`` / ``--temporal`` (unless the target
    is that engine: moving into it takes the session from the store), else ``--store``."""
    if getattr(args, "source", None):
        return await _place(args, args.source.strip(), create=False)
    dbos = getattr(args, "dbos", None)
    if dbos and not target.startswith(DBOS_PREFIX):
        return _dbos(dbos)
    if args.temporal and not _is_temporal(target):
        return await _temporal(args, args.temporal)
    from ._stores import _store

    return _store_place(_store(args.store), args.store)


async def _place(args: argparse.Namespace, where: str, *, create: bool) -> Place:
    """``where`` (a store URL, ``temporal``, ``temporal://HOST:PORT``, ``dbos:URL``) as a
    place."""
    if where.startswith(DBOS_PREFIX):
        return _dbos(where.removeprefix(DBOS_PREFIX))
    if _is_temporal(where):
        address = where.removeprefix("temporal://") if where != "temporal" else None
        return await _temporal(args, address or args.temporal or _env() or DEFAULT_TEMPORAL)
    from ._stores import _store

    return _store_place(_store(where, create=create), where)


DBOS_PREFIX = "dbos:"


def _is_temporal(where: str) -> bool:
    return where == "temporal" or where.startswith("temporal://")


def _dbos(url: str) -> Place:
    """The DBOS system database at ``url`` as a place (named ``dbos:URL``, as given)."""
    if not url.startswith(("postgresql://", "postgres://", "postgresql+")):
        raise CliError(f"dbos: takes a PostgreSQL URL (dbos:postgresql://...), got {url!r}")
    try:
        from ..dbos import DbosPlace
    except ImportError as exc:
        raise CliError(
            f"moving to or from DBOS needs the [dbos] extra ({exc.name} is missing): "
            "pip install 'interlude-agents[dbos]'"
        ) from None
    place = DbosPlace(url, name=DBOS_PREFIX + url)
    try:
        place.connect()
    except Exception as exc:
        raise CliError(
            f"cannot reach the DBOS system database at {url} (has a DBOS worker run on it?): "
            f"{str(exc).splitlines()[0]}"
        ) from None
    return place


def _env() -> str | None:
    return os.environ.get("INTERLUDE_TEMPORAL") or None


def _app(args: argparse.Namespace) -> Any:
    """The ``--app`` (its agents' signing keys sign the move's audit entry), if given."""
    if args.app is None:
        return None
    from ._apps import _load_app

    return _load_app(args.app)[0]


def _store_place(store: Any, url: str) -> Place:
    from ..operate import StorePlace

    return StorePlace(store, name=url)


async def _temporal(args: argparse.Namespace, address: str) -> Place:
    """The Temporal server at ``address`` as a place (``--namespace``, ``--task-queue``)."""
    try:
        from temporalio.client import Client

        from ..temporal import TemporalPlace
    except ImportError as exc:
        raise CliError(
            f"moving to or from Temporal needs the [temporal] extra ({exc.name} is missing): "
            "pip install 'interlude-agents[temporal]'"
        ) from None
    try:
        client = await Client.connect(address, namespace=args.namespace)
    except Exception as exc:
        raise CliError(f"cannot reach Temporal at {address}: {exc}") from None
    queue = getattr(args, "task_queue", None)
    return TemporalPlace(client, task_queue=queue, name=f"temporal://{address}")


async def refuse_if_moved(client: Any, workflow_id: str) -> None:
    """CliError (``moved``) when the workflow ended moved to another place."""
    from ..temporal import moved_to

    went = await moved_to(client, workflow_id)
    if went is not None:
        raise CliError(
            f"session {workflow_id!r}: the answer was refused (session {workflow_id!r} was "
            f"moved to {went}: answer it there); the session is unchanged",
            session=workflow_id,
            refusal="moved",
        )
