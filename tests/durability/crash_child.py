"""The crash matrix's processes: a scenario agent that SIGKILLs itself at a chosen point.

Run from the repository root (``python -m tests.durability.crash_child matrix ...``), in a fresh
interpreter that has created no event loop, store or thread, so it can ``fork``: every process
below is a fork of it (the machinery, shared with the graph matrix, is ``tests/support/crash.py``).

The scenario: the prompt is added; the model asks for two tools in one reply (a concurrent
batch); ``deploy`` (tool use ``c1``) needs approval from a before-tool hook, so the run pauses
while ``notify`` (``c2``) runs; the resume approves, ``deploy`` runs, and the model answers with
text. Phase 1 is the first invocation (up to the pause), phase 2 the resume (to the end). Every
hook event has a callback.

Instrumented points (a *point* is ``<label>#<k>``: the k-th time this process reached it):

- ``hook.<Event>.<key>.before`` / ``.after``: entering / leaving a callback (``key``: the tool
  use id, the message index ``m<i>`` or the conversation length ``L<n>``);
- ``tool.<id>.before_effect`` / ``.after_effect``: inside a tool, around its one side effect;
- ``model.L<n>``: the model was asked (conversation length ``n``);
- ``save.before`` / ``save.after``: around the store's save (``#k``: the k-th save), so "right
  after the pause is saved" and "after the claim of a resume" are points too.

``CRASH_AT=<point>`` makes the process SIGKILL itself there; without it (a counting pass) it
logs every point it reaches. Whatever the role, each process appends to ``events.jsonl``: the
points, each model request (``ask``), each tool side effect (``effect``), each save that came
back from the store (``commit``), and, for the recovering process, every in-doubt question
(``in_doubt``) and every refusal (``conflict``). Lines are single ``write``s to an O_APPEND
file, so a kill loses none of them.

Reproduce one point by hand (phase 2 needs the phase-1 pause first, as ``setup``)::

    CHILD='python -m tests.durability.crash_child'  # from the repository root
    $CHILD run --store sqlite --dir /tmp/x --role setup --phase 1
    CRASH_AT='save.after#1' $CHILD run --store sqlite --dir /tmp/x --phase 2
    $CHILD recover --store sqlite --dir /tmp/x
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from typing import Any

from interlude import Agent, Interrupt, ToolContext, ToolResult, ToolUse, tool
from interlude.hooks import (
    AfterInvocationEvent,
    AfterModelCallEvent,
    AfterToolCallEvent,
    BeforeInvocationEvent,
    BeforeModelCallEvent,
    BeforeToolCallEvent,
    HookRegistry,
    MessageAddedEvent,
)
from interlude.policy import Policy, Rule
from interlude.sessions import SessionStore, SessionUpdate
from interlude.testing import FunctionModel, ModelRequest
from interlude.testing._models import Turn
from tests.support import crash
from tests.support.crash import APPROVAL, KILLED, Points

__all__ = ["CALLS", "KILLED", "LEASE", "describe"]

MODULE = "tests.durability.crash_child"
PROMPT = "Deploy the api and tell the team."
CALLS = {"c1": "deploy", "c2": "notify"}  # tool use id -> tool; c1 needs approval
LEASE = 120.0
"""The run's claim: a recovery that waited for it (rather than seeing the dead claimant at
once) would take this long, far longer than any cell takes on a busy machine."""


# --- the store wrapper ------------------------------------------------------------------------


def describe(pause: Any) -> str:
    """A short description of a stored pause slot, for reports: its steps and call phases."""
    if not isinstance(pause, dict):
        return "none"
    parts: list[str] = []
    step: Any = pause.get("step")
    while isinstance(step, dict):
        kind = str(step.get("kind"))
        if kind == "message_added":
            parts.append(f"message_added({step.get('index')})")
        elif kind == "tool_batch":
            calls = step.get("calls") or []
            phases = ",".join(f"{c['tool_use']['id']}={c['phase']}" for c in calls)
            parts.append(f"tool_batch[{phases}]")
        elif kind == "after_model_call":
            parts.append("after_model_call" + ("(reply)" if step.get("response") else ""))
        else:
            parts.append(kind)
        step = step.get("then")
    asked = [i.get("name") for i in pause.get("interrupts") or []]
    return ">".join(parts) + (f" asking {asked}" if asked else "")


class CrashStore(crash.CrashStore):
    """Saves are kill points (``save.before``/``save.after``, ``#k``: the k-th save); each
    commit logs its kind and ``count``, the messages stored after it."""

    def committed(self, session_id: str, update: SessionUpdate) -> dict[str, Any]:
        if update.pause is None:
            kind = "final" if update.claim is None else "journal"
        elif update.pending:
            kind = "pause"
        else:
            kind = "journal" if update.claim is not None else "release"
        return {
            "n": self.saves,
            "kind": kind,
            "count": update.first_index + len(update.new_messages),
            "claim": update.claim is not None,
            "desc": describe(update.pause),
        }


# --- the scenario agent -----------------------------------------------------------------------


class Tracer:
    """One callback for every hook event, each a kill point on entry and on exit; the
    before-tool callback also asks for approval of ``deploy``."""

    def __init__(self, points: Points) -> None:
        self.points = points

    def register_hooks(self, registry: HookRegistry) -> None:
        registry.add_callback(BeforeInvocationEvent, self._wrap("BeforeInvocation", "-"))
        registry.add_callback(AfterInvocationEvent, self._wrap("AfterInvocation", "-"))
        registry.add_callback(MessageAddedEvent, self._wrap("MessageAdded", "m"))
        registry.add_callback(BeforeModelCallEvent, self._wrap("BeforeModelCall", "L"))
        registry.add_callback(AfterModelCallEvent, self._wrap("AfterModelCall", "L"))
        registry.add_callback(BeforeToolCallEvent, self._before_tool)
        registry.add_callback(AfterToolCallEvent, self._after_tool)

    def _wrap(self, name: str, key: str) -> Callable[[Any], None]:
        def callback(event: Any) -> None:
            count = len(event.agent.messages)
            where = {"-": "-", "m": f"m{count - 1}", "L": f"L{count}"}[key]
            self.points.reach(f"hook.{name}.{where}.before")
            self.points.reach(f"hook.{name}.{where}.after")

        return callback

    def _before_tool(self, event: BeforeToolCallEvent) -> None:
        label = f"hook.BeforeToolCall.{event.tool_use.id}"
        self.points.reach(f"{label}.before")
        if event.tool_use.name == "deploy" and event.interrupt(APPROVAL) is not True:
            event.cancel("not approved")
        self.points.reach(f"{label}.after")

    def _after_tool(self, event: AfterToolCallEvent) -> None:
        label = f"hook.AfterToolCall.{event.tool_use.id}"
        self.points.reach(f"{label}.before")
        self.points.reach(f"{label}.after")


_POINTS: list[Points] = []  # this process's log (the tools are built once, before forking)


async def _effect(context: ToolContext, what: str) -> str:
    points = _POINTS[-1]
    tool_use_id = context.tool_use.id
    points.reach(f"tool.{tool_use_id}.before_effect")
    points.event("effect", id=tool_use_id, tool=context.tool_use.name)
    points.reach(f"tool.{tool_use_id}.after_effect")
    return what


@tool
async def deploy(service: str, context: ToolContext) -> str:
    """Deploy a service.

    Args:
        service: The service.
    """
    return await _effect(context, f"deployed {service}")


@tool
async def notify(text: str, context: ToolContext) -> str:
    """Tell the team.

    Args:
        text: The message.
    """
    return await _effect(context, f"notified: {text}")


POLICY = Policy([Rule(tool="*", then="allow")], version="crash")
"""``--policy``: every call judged (and recorded) by a policy that allows it."""


def build(
    store: SessionStore, session_id: str, points: Points, policy: Policy | None = None
) -> Agent:
    """The scenario agent on ``store`` (wrapped so saves are kill points)."""
    _POINTS[:] = [points]

    def reply(request: ModelRequest) -> Turn:
        n = len(request.messages)
        points.event("ask", length=n)
        points.reach(f"model.L{n}")
        if n == 1:
            return [
                ToolUse("c1", "deploy", {"service": "api"}),
                ToolUse("c2", "notify", {"text": "deploying api"}),
            ]
        if n == 3:
            results = request.messages[2].content
            summary = ", ".join(
                f"{r.tool_use_id}={r.status}" for r in results if isinstance(r, ToolResult)
            )
            return f"finished: {summary}"
        raise AssertionError(f"the scenario has no reply for {n} messages")

    return Agent(
        FunctionModel(reply),
        tools=[deploy, notify],
        hooks=[Tracer(points)],
        session=CrashStore(store, points),
        session_id=session_id,
        session_lease=LEASE,
        policy=policy,
    )


# --- the recovery ------------------------------------------------------------------------


def stored(store: SessionStore, session_id: str) -> dict[str, Any] | None:
    loaded = crash.load(store, session_id)
    return None if loaded is None else dataclasses.asdict(loaded)


def fail_in_doubt(question: Interrupt, points: Points, directory: object) -> str:
    """An in-doubt call is answered "fail" (and logged)."""
    assert question.tool_use is not None
    points.event("in_doubt", id=question.tool_use.id, name=question.name)
    return "fail"


SCENARIO = crash.Scenario(
    prompt=PROMPT,
    build=build,
    session_prefix="crash-",
    answer_in_doubt=fail_in_doubt,
    never_started=lambda agent, store, session_id: not agent.messages,
    before_recovery=lambda store, session_id: {"snapshot": stored(store, session_id)},
    after_recovery=lambda store, session_id: {"final": stored(store, session_id)},
)


def main(argv: list[str]) -> int:
    deploy.spec, notify.spec  # noqa: B018  (builds the tools' validators once, for every fork)

    def scenario(args: argparse.Namespace) -> crash.Scenario:
        if not args.policy:
            return SCENARIO
        return dataclasses.replace(
            SCENARIO, build=lambda store, sid, points: build(store, sid, points, POLICY)
        )

    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--policy", action="store_true", help="run under an allow-all policy")

    return crash.main(argv, scenario, options=options)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
