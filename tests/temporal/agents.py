"""The agents the Temporal tests run: an App, its factories, tools that count their runs.

Each tool appends a line to the file its input names, so a test counts how often it ran
(activities may run in any worker thread or process). A relative path is taken under
``RUNS_DIR`` (set by the test: the same tool input then runs in either engine, in a directory
of its own). Hook callbacks are deterministic: they run in workflow code.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel

from interlude import Agent, AgentSession, App, ToolContext, ToolUse, tool
from interlude.hooks import AfterToolCallEvent, BeforeToolCallEvent
from interlude.multiagent import BeforeNodeCallEvent, Graph, Swarm
from interlude.policy import Policy, Rule
from interlude.temporal import ActivityOptions, as_activity
from interlude.testing import FunctionModel
from interlude.testing._models import ModelRequest

app = App()

RUNS_DIR: Path | None = None
"""Where relative paths given to the tools are (None: the working directory)."""


def _full(path: str) -> Path:
    return Path(path) if RUNS_DIR is None else RUNS_DIR / path


def _record(path: str, what: str) -> int:
    full = _full(path)
    with open(full, "a", encoding="utf-8") as f:
        f.write(f"{os.getpid()} {what}\n")
    return len(full.read_text(encoding="utf-8").splitlines())


@tool
def touch(path: str) -> str:
    """Record a run in a file.

    Args:
        path: The file.
    """
    _record(path, "touch")
    return f"touched {path}"


@tool
def flaky(path: str) -> str:
    """Record a run; the first one times out.

    Args:
        path: The file.
    """
    if _record(path, "flaky") == 1:
        raise TimeoutError("timed out")
    return "ok"


def release(path: str | Path) -> None:
    """Let every ``slow`` body on ``path`` (running or to come) finish at once."""
    _full(str(path) + ".release").touch()


@tool
def slow(path: str, seconds: float) -> str:
    """Take a while, then record a run (a worker may die meanwhile): ``seconds``, or until the
    test calls ``release(path)`` (so a body is surely still running when its worker is killed,
    and one run again after that finishes without waiting).

    Args:
        path: The file.
        seconds: How long.
    """
    _record(path + ".started", "slow")
    released = _full(path + ".release")
    deadline = time.monotonic() + seconds
    while not released.exists() and (left := deadline - time.monotonic()) > 0:
        time.sleep(min(0.02, left))
    _record(path, "slow")
    return "slow done"


@tool(idempotent=True)
def slow_safe(path: str, seconds: float) -> str:
    """Take a while, then record a run; safe to run again.

    Args:
        path: The file.
        seconds: How long.
    """
    return str(slow(path, seconds))


@tool
async def nap(path: str, seconds: float) -> str:
    """Record a start, sleep (cancellable), then record a run.

    Args:
        path: The file.
        seconds: How long.
    """
    _record(path + ".started", "nap")
    await asyncio.sleep(seconds)
    _record(path, "nap")
    return "rested"


@tool
def remember(key: str, value: str, context: ToolContext) -> str:
    """Keep ``value`` under ``key`` in the agent state (an empty value: drop the key).

    Args:
        key: The key.
        value: The value.
    """
    if value:
        context.agent.state[key] = value
    else:
        context.agent.state.pop(key, None)
    return f"remembered {key}"


@tool
def big(path: str, size: int) -> str:
    """Record a run and return ``size`` characters.

    Args:
        path: The file.
        size: How many characters.
    """
    _record(path, "big")
    return "x" * size


@tool
def confirmed(path: str, context: ToolContext) -> str:
    """Record a start, ask to confirm from the body, then record a run.

    Args:
        path: The file.
    """
    _record(path + ".started", "confirmed")
    if context.interrupt("confirm", reason=path) is not True:
        return "not confirmed"
    _record(path, "confirmed")
    return f"confirmed {path}"


_HEARTBEAT_1S = ActivityOptions(
    start_to_close_timeout=timedelta(seconds=30), heartbeat_timeout=timedelta(seconds=1)
)
KILL_TEST_TOOLS = {"slow": _HEARTBEAT_1S, "slow_safe": _HEARTBEAT_1S, "nap": _HEARTBEAT_1S}
"""The slow tools' activity options: a lost worker (or a cancel) is noticed after a second."""


def _reply(request: ModelRequest) -> str | list[ToolUse]:
    """The first user message is JSON: ``[[tool, input], ...]`` the model asks for, once."""
    last = request.messages[-1]
    if len(request.messages) > 1 and last.role == "user":
        return "Done."
    first = request.messages[0].content[0]
    calls = json.loads(getattr(first, "text", "[]"))
    return [ToolUse(f"call_{i}", name, args) for i, (name, args) in enumerate(calls)]


class Decision(BaseModel):
    approved: bool
    note: str = ""


def _approve(event: BeforeToolCallEvent) -> None:
    if event.interrupt("approve", reason=dict(event.tool_use.input)) is not True:
        event.cancel("not approved")


def _approve_typed(event: BeforeToolCallEvent) -> None:
    decision = event.interrupt("approve", reason=event.tool_use.name, response_type=Decision)
    if not decision.approved:
        event.cancel(f"declined: {decision.note}")


def _approve_by_deadline(event: BeforeToolCallEvent) -> None:
    answer = event.interrupt("approve", reason=event.tool_use.name, expires_in=1.5, default=True)
    if answer is not True:
        event.cancel("not approved")


def _retry(event: AfterToolCallEvent) -> None:
    if event.result.status == "error" and event.interrupt("retry", reason=event.result.text):
        event.retry = True


@tool(needs_approval=True)
def guarded(path: str) -> str:
    """Record a run, once a person approved it.

    Args:
        path: The file.
    """
    _record(path, "guarded")
    return f"guarded {path}"


def _two_of_ops(event: BeforeToolCallEvent) -> None:
    if (
        event.interrupt("deploy", reason=event.tool_use.name, approvers=["ops"], quorum=2)
        is not True
    ):
        event.cancel("not approved")


def _approve_scratch(question: object) -> object:
    """A deterministic approver (it runs in workflow code): a guarded call on a path ending
    in "scratch" is fine; the rest waits for a person."""
    tool_use = getattr(question, "tool_use", None)
    ok = tool_use is not None and str(tool_use.input.get("path", "")).endswith("scratch")
    return True if ok else None


@app.agent("guarded")
def build_guarded(session: AgentSession) -> Agent:
    """``guarded`` needs approval (the built-in question); scratch paths are approved in
    process."""
    return Agent(
        FunctionModel(_reply),
        tools=[guarded, touch],
        session=session.store,
        session_id=session.id,
        approver=_approve_scratch,
    )


def _ask_timed(event: BeforeToolCallEvent) -> None:
    answer = event.interrupt(
        "deploy",
        reason=event.tool_use.name,
        escalate_after=0.3,
        escalate_to=["leads"],
        expires_in=60,
        warn_before=59.4,
    )
    if answer is not True:
        event.cancel("not approved")


def build_timed(session: AgentSession) -> Agent:
    """Escalated after 0.3 s, warned 0.6 s after it was asked (registered by the
    notification tests on an App of their own)."""
    agent = _agent(session)
    agent.hooks.add_callback(BeforeToolCallEvent, _ask_timed)
    return agent


POLICY = Policy(
    [
        Rule(tool="touch", when="input.path.endsWith('scratch')", then="allow"),
        Rule(tool="touch", then="ask", approvers=["ops"]),
        Rule(tool="flaky", then="deny", note="not in workflows"),
    ],
    version="temporal-1",
)


@app.agent("policed")
def build_policed(session: AgentSession) -> Agent:
    """Every call judged by ``POLICY`` (CEL, evaluated in workflow code)."""
    agent = _agent(session)
    agent.policy = POLICY
    return agent


@app.agent("quorum")
def build_quorum(session: AgentSession) -> Agent:
    agent = _agent(session)
    agent.hooks.add_callback(BeforeToolCallEvent, _two_of_ops)
    return agent


def _agent(session: AgentSession, state: dict[str, str] | None = None) -> Agent:
    return Agent(
        FunctionModel(_reply),
        tools=[touch, flaky, slow, slow_safe, nap, remember, big, confirmed],
        session=session.store,
        session_id=session.id,
        state=state,
    )


@app.agent("approve")
def build_approve(session: AgentSession) -> Agent:
    agent = _agent(session)
    agent.hooks.add_callback(BeforeToolCallEvent, _approve)
    return agent


@app.agent("approve_signed")
def build_approve_signed(session: AgentSession) -> Agent:
    """As "approve", signing its pauses; no name= (the app names it "approve_signed")."""
    agent = Agent(
        FunctionModel(_reply),
        tools=[touch],
        session=session.store,
        session_id=session.id,
        signing_key=b"k" * 32,
    )
    agent.hooks.add_callback(BeforeToolCallEvent, _approve)
    return agent


@app.agent("typed")
def build_typed(session: AgentSession) -> Agent:
    agent = _agent(session)
    agent.hooks.add_callback(BeforeToolCallEvent, _approve_typed)
    return agent


@app.agent("deadline")
def build_deadline(session: AgentSession) -> Agent:
    agent = _agent(session)
    agent.hooks.add_callback(BeforeToolCallEvent, _approve_by_deadline)
    return agent


@app.agent("retry")
def build_retry(session: AgentSession) -> Agent:
    agent = _agent(session)
    agent.hooks.add_callback(AfterToolCallEvent, _retry)
    return agent


@app.agent("plain")
def build_plain(session: AgentSession) -> Agent:
    return _agent(session)


@app.agent("stateful")
def build_stateful(session: AgentSession) -> Agent:
    """Starts with ``state={"old": "yes", "keep": "me"}`` (a stored session's state wins)."""
    return _agent(session, {"old": "yes", "keep": "me"})


def _explode_after(event: AfterToolCallEvent) -> None:
    raise RuntimeError("hook exploded after the answer")


@app.agent("approve_then_crash")
def build_approve_then_crash(session: AgentSession) -> Agent:
    """After the approved tool ran, an after-tool hook raises a non-Interlude error."""
    agent = build_approve(session)
    agent.hooks.add_callback(AfterToolCallEvent, _explode_after)
    return agent


def _raise_value_error(request: ModelRequest) -> str:
    raise ValueError("model exploded")


def _malformed(request: ModelRequest) -> str:
    return 12345  # type: ignore[return-value]  # not a reply the loop understands


@app.agent("raisemodel")
def build_raisemodel(session: AgentSession) -> Agent:
    return Agent(FunctionModel(_raise_value_error), session=session.store, session_id=session.id)


@app.agent("badmodel")
def build_badmodel(session: AgentSession) -> Agent:
    return Agent(FunctionModel(_malformed), session=session.store, session_id=session.id)


def _reply_then_model_error(request: ModelRequest) -> str | list[ToolUse]:
    from interlude.errors import ModelError

    if len(request.messages) > 1:
        raise ModelError("provider down for good")
    return _reply(request)


@app.agent("approve_then_model_error")
def build_approve_then_model_error(session: AgentSession) -> Agent:
    agent = Agent(
        FunctionModel(_reply_then_model_error),
        tools=[touch],
        session=session.store,
        session_id=session.id,
    )
    agent.hooks.add_callback(BeforeToolCallEvent, _approve)
    return agent


def _sub_reply(request: ModelRequest) -> str | list[ToolUse]:
    """The sub-agent's model: records each call (in ``sub-model``), then plays ``_reply``."""
    _record("sub-model", "call")
    return _reply(request)


def _lead_reply(request: ModelRequest) -> str | list[ToolUse]:
    """The lead hands its whole prompt to the ``ops`` sub-agent, then reports."""
    last = request.messages[-1]
    if len(request.messages) > 1 and last.role == "user":
        return "Lead done."
    first = request.messages[0].content[0]
    return [ToolUse("lead_0", "ops", {"prompt": getattr(first, "text", "")})]


@app.agent("lead")
def build_lead(session: AgentSession) -> Agent:
    """A lead agent whose one tool is the ``ops`` sub-agent (approval before each tool)."""
    ops = Agent(FunctionModel(_sub_reply), tools=[touch], name="ops")
    ops.hooks.add_callback(BeforeToolCallEvent, _approve)
    return Agent(
        FunctionModel(_lead_reply),
        tools=[ops.as_tool(description="Runs file chores.")],
        session=session.store,
        session_id=session.id,
    )


def _small_window(request: ModelRequest) -> str:
    """A model whose context holds 3 messages: more is refused as providers refuse it."""
    from interlude.errors import ContextWindowOverflowError

    if len(request.messages) > 3:
        raise ContextWindowOverflowError("prompt is too long: 4 messages > 3", status=400)
    return f"Fits: {len(request.messages)} message(s), first {request.messages[0].text!r}."


@app.agent("windowed")
def build_windowed(session: AgentSession) -> Agent:
    from interlude.conversation import SlidingWindow

    return Agent(
        FunctionModel(_small_window),
        session=session.store,
        session_id=session.id,
        conversation=SlidingWindow(max_messages=40),
    )


def _node_reply(node: str) -> Callable[[ModelRequest], str | list[ToolUse]]:
    """A node's model: the task (the first line of the first user message) is JSON
    ``{node: [[tool, input], ...]}``; the node asks for its calls once, then says what it
    did."""

    def reply(request: ModelRequest) -> str | list[ToolUse]:
        last = request.messages[-1]
        if len(request.messages) > 1 and last.role == "user":
            return f"{node} done."
        first = getattr(request.messages[0].content[0], "text", "{}")
        calls = json.loads(first.split("\n", 1)[0]).get(node, [])
        return [ToolUse(f"{node}_{i}", name, args) for i, (name, args) in enumerate(calls)]

    return reply


@app.graph("review")
def build_review(session: AgentSession) -> Graph:
    """Two nodes, ``draft`` then ``publish``; each tool call of ``draft`` needs an approval
    (a before-tool hook of the node's agent)."""
    return _review(session, noted=False)


@app.graph("review_deadline")
def build_review_deadline(session: AgentSession) -> Graph:
    """As "review", ``draft``'s approval expiring after 1.5 s with the default True."""
    return _review(session, noted=False, deadline=True)


def _review(session: AgentSession | None, *, noted: bool, deadline: bool = False) -> Graph:
    """The "review" graph (on ``session``; None: none, for a node of another graph)."""
    draft = Agent(FunctionModel(_node_reply("draft")), tools=[touch], name="draft")
    draft.hooks.add_callback(BeforeToolCallEvent, _approve_by_deadline if deadline else _approve)
    publish = Agent(FunctionModel(_node_reply("publish")), tools=[touch, slow], name="publish")
    if noted:
        publish.hooks.add_callback(BeforeToolCallEvent, as_activity(_note_node))
    return Graph(
        {"draft": draft, "publish": publish},
        [("draft", "publish")],
        entry="draft",
        session=None if session is None else session.store,
        session_id=None if session is None else session.id,
    )


@app.graph("fork")
def build_fork(session: AgentSession) -> Graph:
    """Entry nodes ``a`` and ``b``, each asking to approve its tool call; ``after_a`` after
    ``a`` (no question)."""

    def node(name: str, approve: bool) -> Agent:
        agent = Agent(FunctionModel(_node_reply(name)), tools=[touch], name=name)
        if approve:
            agent.hooks.add_callback(BeforeToolCallEvent, _approve)
        return agent

    nodes = {"a": node("a", True), "b": node("b", True), "after_a": node("after_a", False)}
    return Graph(
        nodes, [("a", "after_a")], entry=["a", "b"], session=session.store, session_id=session.id
    )


def _gate_publish(event: BeforeNodeCallEvent) -> None:
    """A graph node hook (workflow code): publishing waits for a person's "yes"."""
    if event.node == "publish" and event.interrupt("publish?", reason=event.node) != "yes":
        event.cancel("not published")


@app.graph("review_gated")
def build_review_gated(session: AgentSession) -> Graph:
    """As "review", with a graph hook asking before the ``publish`` node runs."""
    graph = _review(session, noted=False)
    graph.hooks.add_callback(BeforeNodeCallEvent, _gate_publish)
    return graph


@app.graph("review_swarm")
def build_review_swarm(session: AgentSession) -> Swarm:
    """A swarm: ``writer`` (each tool call approved by a person, the handoff too) hands the
    task to ``publisher``."""
    writer = Agent(FunctionModel(_node_reply("writer")), tools=[touch], name="writer")
    writer.hooks.add_callback(BeforeToolCallEvent, _approve)
    publisher = Agent(FunctionModel(_node_reply("publisher")), tools=[touch], name="publisher")
    return Swarm([writer, publisher], entry="writer", session=session.store, session_id=session.id)


@app.graph("nested")
def build_nested(session: AgentSession) -> Graph:
    """A graph with a graph as a node: ``inner`` (the "review" graph: ``draft``, approved,
    then ``publish``), then ``final``."""
    inner = _review(None, noted=False)
    final = Agent(FunctionModel(_node_reply("final")), tools=[touch], name="final")
    return Graph(
        {"inner": inner, "final": final},
        [("inner", "final")],
        entry="inner",
        session=session.store,
        session_id=session.id,
    )


def _note_node(event: BeforeToolCallEvent) -> None:
    """I/O in a node agent's hook (run as an activity): record the call in ``<path>.hook``."""
    with open(_full(str(event.tool_use.input["path"]) + ".hook"), "a", encoding="utf-8") as f:
        f.write(f"{os.getpid()} {event.tool_use.name}\n")


@app.graph("review_noted")
def build_review_noted(session: AgentSession) -> Graph:
    """As "review", the ``publish`` node's agent noting each tool call from a hook run as an
    activity."""
    return _review(session, noted=True)
