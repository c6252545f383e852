"""Hook callbacks run as activities: for callbacks that need I/O (a log, a ticket, a file).

``as_activity(callback)`` wraps a callback. Inside an agent workflow the wrapper runs it in the
activity ``interlude.hook`` (on any worker, by the agent rebuilt there by name), with the
event's data, and carries back a small, fixed set of the event's writable fields; outside a
workflow it simply calls the callback.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import activity, workflow
from temporalio.exceptions import ActivityError, ApplicationError

from .._exceptions import exception_from_dict, exception_to_dict
from .._messages import (
    JsonValue,
    block_to_dict,
    message_from_dict,
    tool_result_from_dict,
    tool_use_from_dict,
)
from ..errors import ConfigurationError, InterruptSignal
from ..hooks import (
    AfterModelCallEvent,
    AfterToolCallEvent,
    BeforeInvocationEvent,
    BeforeModelCallEvent,
    BeforeToolCallEvent,
    HookEvent,
    MessageAddedEvent,
)
from ._registry import ActivityOptions

__all__ = ["HOOK_ACTIVITY", "HookActivity", "as_activity", "hook_activity"]

HOOK_ACTIVITY = "interlude.hook"

_EVENTS: dict[str, type[HookEvent]] = {
    e.__name__: e
    for e in (
        BeforeInvocationEvent,
        MessageAddedEvent,
        BeforeModelCallEvent,
        AfterModelCallEvent,
        BeforeToolCallEvent,
        AfterToolCallEvent,
    )
}
"""The events a callback run as an activity may handle (not BeforeToolsEvent, whose cancels
per call, nor AfterInvocationEvent, whose result, are not carried back)."""

_BY_KEY: dict[str, HookActivity] = {}


class HookActivity:
    """A hook callback that runs as the activity ``interlude.hook`` inside an agent workflow
    (made by :func:`as_activity`)."""

    def __init__(
        self, callback: Callable[[Any], Awaitable[None] | None], key: str, options: ActivityOptions
    ) -> None:
        self.callback = callback
        self.key = key
        self.options = options
        self.__wrapped__ = callback

    def __repr__(self) -> str:
        return f"as_activity({self.callback!r}, name={self.key!r})"

    async def __call__(self, event: HookEvent) -> None:
        if not workflow.in_workflow():
            await _call(self.callback, event)
            return
        from ._executor import activity_failure, execute
        from ._limits import Limits, json_size, too_large

        kind = type(event).__name__
        if kind not in _EVENTS:
            raise ConfigurationError(
                f"{self!r}: a hook run as an activity cannot handle {kind} "
                f"(it can handle: {', '.join(_EVENTS)})"
            )
        agent = event.agent
        executor = getattr(agent, "executor", None)
        node = getattr(executor, "node", None)  # a graph node's agent: graph name and node
        request: dict[str, JsonValue] = {
            "agent": agent.name if node is None else getattr(executor, "agent_name", None),
            "hook": self.key,
            "event": kind,
            "data": _encode(event),
            "is_replay": event.is_replay,
            "state": dict(agent.state),
            "now": agent.clock(),
        }
        if node is not None:
            request["node"] = node
        limits = getattr(executor, "limits", None) or Limits()
        size, limit = json_size(request), limits.max_request_bytes
        if size > limit:  # the run fails, as a callback raising would fail it
            raise too_large(
                f"the request of hook {self.key!r} ({kind})",
                size,
                limit,
                "Limits.max_request_bytes",
                "shorten the agent state or what the event carries",
            )
        try:
            out = await execute(HOOK_ACTIVITY, request, self.options)
        except ActivityError as exc:  # the callback raised on every attempt (or a timeout)
            raise activity_failure(exc, f"hook {self.key!r}") from None
        _apply(event, out)


def as_activity(
    callback: Callable[[Any], Awaitable[None] | None],
    *,
    name: str | None = None,
    options: ActivityOptions | None = None,
) -> HookActivity:
    """Wrap hook ``callback`` so that inside an agent workflow it runs as an activity.

    Register the wrapper as the callback: ``agent.hooks.add_callback(BeforeToolCallEvent,
    as_activity(notify))``. Its ``name`` (default ``module.qualname`` of the callback) finds
    it again in the agent the activity's worker builds by name; ``options``: timeouts and the
    retry policy (an exception in the callback fails the attempt; once retries are exhausted
    the exception is raised in the workflow, as an embedded callback's would be).

    The callback must not interrupt (``event.interrupt`` fails the run) and sees a copy of the
    event: only these fields are carried back into the workflow's event:

    - BeforeToolCallEvent: ``tool_use`` (replaced) and ``cancel(message)``;
    - AfterToolCallEvent: ``result`` (replaced) and ``retry``;
    - AfterModelCallEvent: ``retry``;
    - BeforeInvocationEvent, MessageAddedEvent, BeforeModelCallEvent: nothing.

    ``event.agent`` in the activity is the agent rebuilt by name with the run's ``state`` (a
    copy: changes are not carried back) and ``clock`` (the workflow time of the event); it
    holds no conversation. BeforeToolsEvent and AfterInvocationEvent are not supported.
    Outside a workflow the wrapper calls ``callback`` itself.
    """
    if not callable(callback):
        raise ConfigurationError(f"hook callback is not callable: {callback!r}")
    key = name or f"{callback.__module__}.{callback.__qualname__}"
    wrapper = HookActivity(callback, key, options or ActivityOptions())
    _BY_KEY[key] = wrapper
    return wrapper


async def _call(callback: Callable[[Any], Awaitable[None] | None], event: HookEvent) -> None:
    outcome = callback(event)
    if inspect.isawaitable(outcome):
        await outcome


def _encode(event: HookEvent) -> dict[str, JsonValue]:
    if isinstance(event, BeforeInvocationEvent):
        return {"prompt": event.prompt.to_dict()}
    if isinstance(event, MessageAddedEvent):
        return {"message": event.message.to_dict()}
    if isinstance(event, AfterModelCallEvent):
        return {
            "response": None if event.response is None else event.response.to_dict(),
            "exception": None if event.exception is None else exception_to_dict(event.exception),
        }
    if isinstance(event, BeforeToolCallEvent):
        return {
            "tool_use": block_to_dict(event.tool_use),
            "tool": None if event.tool is None else event.tool.name,
        }
    if isinstance(event, AfterToolCallEvent):
        return {
            "tool_use": block_to_dict(event.tool_use),
            "tool": None if event.tool is None else event.tool.name,
            "result": block_to_dict(event.result),
            "exception": None if event.exception is None else exception_to_dict(event.exception),
            "cancel_message": event.cancel_message,
        }
    return {}


def _decode(kind: str, agent: Any, data: dict[str, Any], is_replay: bool) -> HookEvent:
    from .._stream import ModelResponse

    def tool(name: str | None) -> Any:
        return None if name is None else agent.tools.get(name)

    def exception(value: Any) -> BaseException | None:
        return None if value is None else exception_from_dict(value)

    kw: dict[str, Any] = {"scope": "hook-activity", "is_replay": is_replay}
    if kind == "BeforeInvocationEvent":
        return BeforeInvocationEvent(agent, message_from_dict(data["prompt"]), **kw)
    if kind == "MessageAddedEvent":
        return MessageAddedEvent(agent, message_from_dict(data["message"]), **kw)
    if kind == "BeforeModelCallEvent":
        return BeforeModelCallEvent(agent, **kw)
    if kind == "AfterModelCallEvent":
        response = data.get("response")
        return AfterModelCallEvent(
            agent,
            None if response is None else ModelResponse.from_dict(response, "response"),
            exception(data.get("exception")),
            **kw,
        )
    if kind == "BeforeToolCallEvent":
        tool_use = tool_use_from_dict(data["tool_use"], "tool_use")
        return BeforeToolCallEvent(agent, tool_use, tool(data.get("tool")), **kw)
    if kind == "AfterToolCallEvent":
        return AfterToolCallEvent(
            agent,
            tool_use_from_dict(data["tool_use"], "tool_use"),
            tool(data.get("tool")),
            tool_result_from_dict(data["result"], "result"),
            exception(data.get("exception")),
            data.get("cancel_message"),
            **kw,
        )
    raise ConfigurationError(f"a hook run as an activity cannot handle {kind}")


def _carried_back(event: HookEvent) -> dict[str, JsonValue]:
    """The event's fields the workflow takes back (see :func:`as_activity`)."""
    if isinstance(event, BeforeToolCallEvent):
        return {"tool_use": block_to_dict(event.tool_use), "cancel": event.cancel_message}
    if isinstance(event, AfterToolCallEvent):
        return {"result": block_to_dict(event.result), "retry": event.retry}
    if isinstance(event, AfterModelCallEvent):
        return {"retry": event.retry}
    return {}


def _apply(event: HookEvent, out: dict[str, Any]) -> None:
    if isinstance(event, BeforeToolCallEvent):
        if out["tool_use"] != block_to_dict(event.tool_use):
            event.tool_use = tool_use_from_dict(out["tool_use"], "tool_use")
        if out.get("cancel") is not None:
            event.cancel(out["cancel"])
    elif isinstance(event, AfterToolCallEvent):
        if out["result"] != block_to_dict(event.result):
            event.result = tool_result_from_dict(out["result"], "result")
        if out.get("retry"):
            event.retry = True
    elif isinstance(event, AfterModelCallEvent) and out.get("retry"):
        event.retry = True


def _find(agent: Any, kind: str, key: str) -> HookActivity:
    for callback in agent.hooks._callbacks.get(_EVENTS[kind], ()):
        if isinstance(callback, HookActivity) and callback.key == key:
            return callback
    found = _BY_KEY.get(key)
    if found is None:
        raise ConfigurationError(
            f"no hook {key!r} run as an activity for {kind} in agent {agent.name!r}"
        )
    return found


@activity.defn(name=HOOK_ACTIVITY)
async def hook_activity(request: dict[str, Any]) -> dict[str, JsonValue]:
    """``{agent, hook, event, data, is_replay, state, now, node?}`` -> the carried-back fields
    (``node``: the hook is a node agent's, of graph ``agent``).

    The callback's exception fails the attempt (retried per the hook's options); a question it
    asks fails the run (a hook run as an activity cannot interrupt)."""
    from ._activities import _agent

    agent = _agent(request["agent"], request.get("node"))
    now = float(request["now"])
    agent.clock = lambda: now
    agent.state = dict(request.get("state") or {})
    kind = request["event"]
    wrapper = _find(agent, kind, request["hook"])
    event = _decode(kind, agent, request["data"], bool(request.get("is_replay")))
    try:
        await _call(wrapper.callback, event)
    except InterruptSignal:
        error = ConfigurationError(
            f"hook {wrapper.key!r} asked a question: a hook run as an activity cannot interrupt"
        )
        raise ApplicationError(
            str(error), exception_to_dict(error), type=type(error).__name__, non_retryable=True
        ) from None
    except Exception as exc:
        raise ApplicationError(str(exc), exception_to_dict(exc), type=type(exc).__name__) from exc
    return _carried_back(event)
