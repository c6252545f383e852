"""Shared pieces of the interrupt suite: tools that count, a hook policy, a harness, checks.

Also imported by ``resume_child.py`` in a fresh process, so the agent defined here (tools,
hooks, the custom exception) is "the same agent definition" on both sides of a pause.
Everything here goes through Interlude's public API.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from interlude import (
    Agent,
    AgentResult,
    Interrupt,
    Message,
    Text,
    ToolContext,
    ToolResult,
    ToolUse,
    tool,
)
from interlude.hooks import (
    AfterModelCallEvent,
    AfterToolCallEvent,
    BeforeModelCallEvent,
    BeforeToolCallEvent,
    HookEvent,
    MessageAddedEvent,
)
from interlude.testing import ScriptedModel


class CustomToolError(Exception):
    """An exception class of the user's own, importable from this module."""


def iid(source: str, scope: str, name: str) -> str:
    """The documented interrupt id."""
    return f"v1:{source}:{scope}:{uuid.uuid5(uuid.NAMESPACE_OID, name)}"


def tu(id: str, name: str, **input: Any) -> ToolUse:
    return ToolUse(id, name, dict(input))


# --- tools that count their executions -----------------------------------------------------------


class Tally:
    """How often each tool body ran, and with what input, in order."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.log: list[tuple[str, Any]] = []

    def hit(self, name: str, value: Any = None) -> None:
        self.counts[name] += 1
        self.log.append((name, value))

    def inputs(self, name: str) -> list[Any]:
        return [v for n, v in self.log if n == name]


def make_tools(tally: Tally) -> list[Any]:
    """lookup (returns), fail_with (raises), confirm (interrupts from its body), flaky."""

    @tool
    def lookup(query: str) -> str:
        """Look something up."""
        tally.hit("lookup", query)
        return f"found {query}"

    @tool
    def fail_with(kind: str, message: str = "boom") -> str:
        """Always raises an exception of the given kind."""
        tally.hit("fail_with", kind)
        if kind == "custom":
            raise CustomToolError(message)
        if kind == "value":
            raise ValueError(message)
        if kind == "local":

            class LocalError(Exception):
                pass

            raise LocalError(message)
        raise RuntimeError(message)

    @tool
    def confirm(item: str, context: ToolContext) -> str:
        """Asks a person from inside its own body."""
        tally.hit("confirm", item)
        answer = context.interrupt("confirm", reason=f"confirm {item}?")
        tally.hit("confirm_after", item)
        return f"{item}: {answer}"

    @tool
    def flaky(key: str) -> str:
        """Fails on its first execution for a key, succeeds afterwards."""
        tally.hit("flaky", key)
        if tally.inputs("flaky").count(key) == 1:
            raise CustomToolError(f"first attempt for {key} failed")
        return f"ok {key}"

    return [lookup, fail_with, confirm, flaky]


# --- a configurable hook policy, rebuilt from JSON in another process ----------------------------


def exc_info(exc: BaseException | None) -> dict[str, Any] | None:
    if exc is None:
        return None
    from interlude.errors import ReplayedException

    info: dict[str, Any] = {
        "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "args": [str(a) for a in exc.args],
        "str": str(exc),
        "is_custom": isinstance(exc, CustomToolError),
        "is_value_error": isinstance(exc, ValueError),
        "is_replayed": isinstance(exc, ReplayedException),
    }
    if isinstance(exc, ReplayedException):
        info["type_name"] = exc.type_name
        info["message"] = exc.message
        info["traceback_text"] = exc.traceback_text
    return info


class Policy:
    """Hook callbacks driven by a JSON config; every call is logged.

    config keys:
      approve: tool names or tool use ids whose before-tool hook asks "approve"
      after_tool_on_error: the after-tool hook asks "on_error" for error results; the answer
          "retry" sets retry (on replay only), "rewrite:<text>" rewrites the result
      after_tool_second: after "on_error" is answered, the same callback asks "double_check"
      after_model: the after-model hook asks "review" for every model reply
      before_model: the before-model hook asks "go" before the first model call
      message_added_role: the message-added hook asks "seen" for messages of this role that
          contain tool uses (assistant) or text (user)
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)
        self.log: list[dict[str, Any]] = []

    def register_hooks(self, registry: Any) -> None:
        c = self.config
        if c.get("approve"):
            registry.add_callback(BeforeToolCallEvent, self.before_tool)
        if c.get("after_tool_on_error"):
            registry.add_callback(AfterToolCallEvent, self.after_tool)
        if c.get("after_model"):
            registry.add_callback(AfterModelCallEvent, self.after_model)
        if c.get("before_model"):
            registry.add_callback(BeforeModelCallEvent, self.before_model)
        if c.get("message_added_role"):
            registry.add_callback(MessageAddedEvent, self.message_added)

    def before_tool(self, event: BeforeToolCallEvent) -> None:
        use = event.tool_use
        if use.name in self.config["approve"] or use.id in self.config["approve"]:
            entry = {"event": "before_tool", "id": use.id, "replay": event.is_replay}
            self.log.append(entry)
            entry["answer"] = answer = event.interrupt("approve", reason=f"run {use.name}?")
            if answer != "yes":
                event.cancel(f"denied: {answer}")

    def after_tool(self, event: AfterToolCallEvent) -> None:
        if event.result.status != "error":
            return
        entry = {
            "event": "after_tool",
            "id": event.tool_use.id,
            "replay": event.is_replay,
            "exception": exc_info(event.exception),
            "result": event.result.text,
            "cancel_message": event.cancel_message,
            "tool": None if event.tool is None else event.tool.name,
        }
        self.log.append(entry)
        entry["answer"] = answer = event.interrupt("on_error", reason=event.result.text)
        if self.config.get("after_tool_second"):
            entry["second"] = event.interrupt("double_check")
        if answer == "retry" and event.is_replay:
            event.retry = True
        elif isinstance(answer, str) and answer.startswith("rewrite:"):
            event.result = ToolResult(event.tool_use.id, "success", [Text(answer[8:])])

    def after_model(self, event: AfterModelCallEvent) -> None:
        text = None if event.response is None else event.response.message.text
        entry = {"event": "after_model", "replay": event.is_replay, "text": text}
        self.log.append(entry)
        entry["answer"] = event.interrupt("review")

    def before_model(self, event: BeforeModelCallEvent) -> None:
        if len(event.agent.messages) == 1:
            entry = {"event": "before_model", "replay": event.is_replay}
            self.log.append(entry)
            entry["answer"] = event.interrupt("go")

    def message_added(self, event: MessageAddedEvent) -> None:
        m = event.message
        if m.role == self.config["message_added_role"] and (m.tool_uses or m.role == "user"):
            entry = {"event": "message_added", "replay": event.is_replay, "role": m.role}
            self.log.append(entry)
            entry["answer"] = event.interrupt("seen")


def turns_from_json(turns: Sequence[Any]) -> list[Any]:
    """Script turns as JSON (text, or a list of tool uses as dicts) to ScriptedModel turns."""
    return [
        t if isinstance(t, str) else [ToolUse(d["id"], d["name"], d["input"]) for d in t]
        for t in turns
    ]


def turns_to_json(turns: Sequence[Any]) -> list[Any]:
    return [
        t if isinstance(t, str) else [{"id": u.id, "name": u.name, "input": u.input} for u in t]
        for t in turns
    ]


def build_agent(
    config: Mapping[str, Any], turns: Sequence[Any], executor: str = "concurrent"
) -> tuple[Agent, ScriptedModel, Tally, Policy]:
    """The suite's standard agent: the four tools above and a Policy hook provider."""
    tally = Tally()
    policy = Policy(config)
    model = ScriptedModel(list(turns))
    agent = Agent(model, tools=make_tools(tally), hooks=[policy], tool_executor=executor)  # type: ignore[arg-type]
    return agent, model, tally, policy


def summary(
    agent: Agent, result: AgentResult, model: ScriptedModel, tally: Tally, policy: Policy
) -> dict[str, Any]:
    """What a resume did, as JSON."""
    results = [
        {"id": b.tool_use_id, "status": b.status, "text": b.text}
        for m in agent.messages
        for b in m.content
        if isinstance(b, ToolResult)
    ]
    return {
        "stop_reason": result.stop_reason,
        "text": str(result),
        "paused": agent.is_paused,
        "pending": [i.name for i in agent.interrupts],
        "pending_ids": [i.id for i in agent.interrupts],
        "model_calls": len(model.requests),
        "counts": dict(tally.counts),
        "log": policy.log,
        "tool_results": results,
        "messages": len(agent.messages),
    }


# --- a harness for in-process tests: same agent, or a brand-new one via JSON ---------------------


Callback = tuple[type[HookEvent], Callable[[Any], Any]]


class Harness:
    """An agent under test whose state can hop to a fresh agent (JSON round trip) between runs.

    With ``fresh=True`` every :meth:`resume` first exports the state, serialises it to JSON
    text and back, builds a brand-new Agent (same tools and callbacks, a new ScriptedModel
    holding the turns not yet played) and imports the state into it. ``model_calls`` adds up
    the requests of every model used, so "the model was not called again" is checked across
    the hop.
    """

    def __init__(
        self,
        turns: Sequence[Any],
        *,
        tools: Iterable[Any] = (),
        callbacks: Iterable[Callback] = (),
        executor: str = "concurrent",
        fresh: bool = False,
        **agent_kw: Any,
    ) -> None:
        self.tools = list(tools)
        self.callbacks = list(callbacks)
        self.executor = executor
        self.fresh = fresh
        self.agent_kw = agent_kw
        self.models: list[ScriptedModel] = []
        self.agents: list[Agent] = []
        self.agent = self._build(list(turns))

    def _build(self, turns: list[Any]) -> Agent:
        model = ScriptedModel(turns)
        self.models.append(model)
        agent = Agent(model, tools=self.tools, tool_executor=self.executor, **self.agent_kw)  # type: ignore[arg-type]
        for event_type, callback in self.callbacks:
            agent.hooks.add_callback(event_type, callback)
        self.agents.append(agent)
        return agent

    @property
    def model_calls(self) -> int:
        return sum(len(m.requests) for m in self.models)

    def hop(self) -> Agent:
        if self.fresh:
            text = json.dumps(self.agent.export_state())
            agent = self._build(list(self.models[-1].unused))
            agent.import_state(json.loads(text))
            self.agent = agent
        return self.agent

    def run(self, prompt: Any = "hi") -> AgentResult:
        return self.agent(prompt)

    def resume(self, answers: Mapping[str, Any]) -> AgentResult:
        return self.hop().resume(answers)

    async def resume_async(self, answers: Mapping[str, Any]) -> AgentResult:
        return await self.hop().resume_async(answers)


def by_name(interrupts: Iterable[Interrupt]) -> dict[str, Interrupt]:
    out: dict[str, Interrupt] = {}
    for i in interrupts:
        assert i.name not in out or i.tool_use is not None, f"ambiguous name {i.name!r}"
        out[i.name] = i
    return out


def by_tool(interrupts: Iterable[Interrupt]) -> dict[str, Interrupt]:
    return {i.tool_use.id: i for i in interrupts if i.tool_use is not None}


def tool_results(messages: Sequence[Message]) -> list[ToolResult]:
    return [b for m in messages for b in m.content if isinstance(b, ToolResult)]


def assert_valid_conversation(messages: Sequence[Message], *, open_tail: bool = False) -> None:
    """Every tool use is answered by exactly one result, in order, in the next message.

    ``open_tail`` allows the last message to be an assistant message whose tool uses have no
    results yet (a pause inside its batch).
    """
    answered: set[str] = set()
    for i, m in enumerate(messages):
        results = [b for b in m.content if isinstance(b, ToolResult)]
        if results:
            prev = messages[i - 1] if i else None
            assert m.role == "user", f"message {i}: tool results in a {m.role} message"
            assert prev is not None and prev.role == "assistant", f"message {i}: orphan results"
            assert [r.tool_use_id for r in results] == [u.id for u in prev.tool_uses], (
                f"message {i}: results {[r.tool_use_id for r in results]} do not match tool uses "
                f"{[u.id for u in prev.tool_uses]}"
            )
            answered.update(r.tool_use_id for r in results)
        if m.tool_uses:
            last = i == len(messages) - 1
            if last:
                assert open_tail, f"message {i}: tool uses without results"
            else:
                nxt = messages[i + 1]
                ids = [b.tool_use_id for b in nxt.content if isinstance(b, ToolResult)]
                assert ids == [u.id for u in m.tool_uses], f"message {i}: unanswered tool uses"
