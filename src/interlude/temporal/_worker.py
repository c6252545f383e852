"""The worker factory: a temporalio Worker running the agent workflow and its activities."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import Any

from temporalio.client import Client
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from ..operate import App
from ._activities import model_activity, tool_activity
from ._hooks import hook_activity
from ._notify import notify_activity
from ._registry import DEFAULT_MODEL, ActivityOptions, Registration, register, register_default
from ._workflow import AgentWorkflow

__all__ = ["replayer", "worker"]


def worker(
    client: Client,
    app: App,
    *,
    task_queue: str,
    tools: Mapping[str, ActivityOptions] | None = None,
    model: ActivityOptions | None = None,
    passthrough: Iterable[str] = (),
    local_activities: bool = True,
    sandboxed: bool = True,
    **worker_options: Any,
) -> Worker:
    """A Worker for ``app``'s agents on ``task_queue``: the agent workflow and the
    ``interlude.model`` / ``interlude.tool`` / ``interlude.hook`` activities.

    ``tools`` maps a tool name (or ``"*"``, every other tool) to its activity options;
    ``model`` gives the model call's. ``local_activities=False`` runs every call whose options
    leave ``local`` unset as a regular activity (by default the model call and the tools that
    may run again are local activities: see :class:`ActivityOptions`). The modules of
    ``app``'s factories, ``interlude`` and ``passthrough`` are passed through the workflow
    sandbox (loaded once, not per run): the agent's hooks run in workflow code and must be
    deterministic (docs/temporal.md). ``sandboxed=False`` runs the workflow without Temporal's
    sandbox: it checks only modules that are not passed through (above), and costs CPU on every
    workflow activation.
    Other keyword arguments go to ``Worker`` (e.g. ``max_concurrent_activities``).
    """
    register(
        task_queue, Registration(app, model or DEFAULT_MODEL, dict(tools or {}), local_activities)
    )
    worker_options.setdefault("workflow_runner", _runner(app, passthrough, sandboxed))
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentWorkflow],
        activities=[model_activity, tool_activity, hook_activity, notify_activity],
        **worker_options,
    )


def replayer(
    app: App, *, passthrough: Iterable[str] = (), sandboxed: bool = True, **replayer_options: Any
) -> Replayer:
    """A Replayer of agent workflows of ``app`` (e.g. to check that a code change replays the
    histories of running workflows): ``await replayer(app).replay_workflow(history)``."""
    register_default(Registration(app, DEFAULT_MODEL, {}))
    replayer_options.setdefault("workflow_runner", _runner(app, passthrough, sandboxed))
    return Replayer(workflows=[AgentWorkflow], **replayer_options)


def _runner(
    app: App, passthrough: Iterable[str], sandboxed: bool = True
) -> SandboxedWorkflowRunner | UnsandboxedWorkflowRunner:
    """The sandbox, with Interlude, its dependencies and the app's modules passed through (or
    none: ``sandboxed=False``)."""
    if not sandboxed:
        return UnsandboxedWorkflowRunner()
    modules = {"interlude", "pydantic", "pydantic_core", "jsonschema", "cel", *passthrough}
    for factory in app._factories.values():
        module = getattr(factory, "__module__", None)
        if module and module in sys.modules and module != "__main__":
            modules.add(module.partition(".")[0])
    restrictions = SandboxRestrictions.default.with_passthrough_modules(*sorted(modules))
    return SandboxedWorkflowRunner(restrictions=restrictions)
