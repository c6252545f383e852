"""``interlude --temporal HOST:PORT demo``: the demo agent as a Temporal workflow.

It registers Interlude's search attributes on the namespace (once; a dev server allows it),
starts the demo agent on the task queue as workflow ``demo-<n>`` (the first id not used on the
server), waits until a worker has run it to its pause, and prints the question with the
commands that answer it from anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

from ._errors import CliError, _what
from ._hints import answer_hints, program
from ._render import Output
from ._temporal import (
    CONNECT_WAIT,
    DEFAULT_TASK_QUEUE,
    _command,
    _connect,
    _flags,
    _require,
    _where,
)
from ._words import _interrupt_json, _shown

if TYPE_CHECKING:
    from temporalio.client import Client

    from ..temporal import AgentClient

__all__ = ["WAIT_FOR_WORKER", "temporal_demo"]

WAIT_FOR_WORKER = 30.0
"""Seconds ``demo`` waits for a worker to run the new workflow to its pause."""


@_command
def temporal_demo(args: argparse.Namespace, out: Output) -> int:
    _require()
    if args.model:
        raise CliError(
            "--model does not apply with --temporal: the worker's app builds the agent "
            "(run the demo without --temporal to try a real model)"
        )
    return asyncio.run(_demo(args, out))


async def _demo(args: argparse.Namespace, out: Output) -> int:
    from temporalio.service import RPCError

    from ..temporal import AgentClient, register_search_attributes
    from ._demo import NAME, PROMPT

    client = await _connect(args, wait=CONNECT_WAIT)
    try:
        await register_search_attributes(client)
    except (RPCError, ValueError) as exc:
        raise CliError(
            f"{_where(args)}: Interlude's search attributes could not be registered "
            f"({_what(exc)}); create them with `temporal operator search-attribute create`"
        ) from None
    queue = args.task_queue or DEFAULT_TASK_QUEUE
    agents = AgentClient(client, task_queue=queue)
    workflow_id = args.session or await _free_demo_id(client)
    if args.session and await _exists(client, workflow_id):
        raise CliError(
            f"workflow {workflow_id!r} already exists; pick another --session",
            session=workflow_id,
        )
    await agents.start(NAME, PROMPT, workflow_id=workflow_id)
    if not out.json_mode:
        out._say("Interlude demo: an agent that stops to ask before a risky tool.", "bold")
        out._say(f"{_where(args)}, task queue {queue}   workflow: {workflow_id}\n", "dim")
        out._say(f"user: {PROMPT}")
    with out.working("waiting for a worker to run the agent to its pause"):
        finished = await _until_paused_or_done(agents, workflow_id, WAIT_FOR_WORKER)
    if finished is None:
        raise CliError(
            f"no worker ran workflow {workflow_id!r} within {WAIT_FOR_WORKER:.0f} s: start one "
            f"with `{program()}{_flags(args)} temporal-worker"
            f"{'' if queue == DEFAULT_TASK_QUEUE else ' --task-queue ' + queue}`; the run "
            "starts as soon as one polls the task queue",
            session=workflow_id,
        )
    _report(out, args, workflow_id, finished)
    return 0


async def _exists(client: Client, workflow_id: str) -> bool:
    from temporalio.service import RPCError, RPCStatusCode

    try:
        await client.get_workflow_handle(workflow_id).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


async def _free_demo_id(client: Client) -> str:
    """The first ``demo-<n>`` the server has no workflow for (open or closed), so a fresh
    server's first demo is ``demo-1`` and the README's commands work as written."""
    n = 1
    while await _exists(client, f"demo-{n}"):
        n += 1
    return f"demo-{n}"


async def _until_paused_or_done(
    agents: AgentClient, workflow_id: str, within: float
) -> dict[str, Any] | None:
    """``{"stop_reason", "interrupts"}`` once the run pauses or ends; None if nothing happened
    within ``within`` seconds (no worker)."""
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError

    from ..temporal import PENDING

    deadline = time.monotonic() + within
    handle = agents.handle(workflow_id)
    while time.monotonic() < deadline:
        described = await handle.describe()
        status = described.status
        if status is not None and status != WorkflowExecutionStatus.RUNNING:
            try:
                result = await agents.result(workflow_id)
            except Exception as exc:
                why = _what(exc.__cause__ or exc)
                raise CliError(
                    f"workflow {workflow_id!r} ended without a result: {why}",
                    session=workflow_id,
                ) from None
            return {"stop_reason": result.get("stop_reason"), "text": result.get("text")}
        questions = []
        if described.typed_search_attributes.get(PENDING):  # paused: a worker answers queries
            with contextlib.suppress(RPCError):  # its worker stopped meanwhile: try again
                questions = await agents.pending(workflow_id)
        if questions:
            return {"stop_reason": "interrupt", "interrupts": questions}
        await asyncio.sleep(0.1)
    return None


def _report(out: Output, args: argparse.Namespace, workflow_id: str, got: dict[str, Any]) -> None:
    questions = got.get("interrupts") or []
    if out.json_mode:
        out._json(
            {
                "session": workflow_id,
                "stop_reason": got["stop_reason"],
                "reply": got.get("text"),
                "interrupts": [_interrupt_json(i) for i in questions],
            }
        )
        return
    if not questions:
        out._say(f"\nThe run ended ({got['stop_reason']}): {got.get('text')}", "bold green")
        return
    out._say(f"\nPaused: {len(questions)} question(s) wait for a person.", "bold")
    for i in questions:
        out._say(f"  {i.name}: {_shown(i)}")
        out._say(f"    id: {i.id}", "dim")
    out._say(
        "\nThe workflow waits on the server, holding no worker; this process can end now. "
        "From any other process:"
    )
    me, flags = program(), _flags(args)
    out._say(f"  {me}{flags} pending")
    out.hints(answer_hints(workflow_id, questions, "", lead=flags, expire=False))
