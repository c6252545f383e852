"""One class per hook event. Each can ``interrupt(...)``; only the listed fields are writable."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from .._interrupt import Answers, Interrupter, InterruptSource
from .._messages import JsonValue, Message, ToolResult, ToolUse
from .._result import AgentResult
from .._stream import ModelResponse
from ..errors import ConfigurationError, HookEventWriteError

if TYPE_CHECKING:
    from .._tools import AgentTool
    from .._view import AgentView

__all__ = [
    "AfterInvocationEvent",
    "AfterModelCallEvent",
    "AfterToolCallEvent",
    "BeforeInvocationEvent",
    "BeforeModelCallEvent",
    "BeforeToolCallEvent",
    "BeforeToolsEvent",
    "HookEvent",
    "MessageAddedEvent",
]

_NO_ANSWERS = Answers()


class HookEvent(Interrupter):
    """Base of all hook events: ``agent``, ``is_replay`` and ``interrupt(...)``.

    ``is_replay`` is true when the callbacks run again because the agent resumed at this event.
    """

    __slots__ = ("_answers", "_callback_index", "_names", "_scope", "_sealed", "agent", "is_replay")
    agent: AgentView
    is_replay: bool
    _writable: ClassVar[Mapping[str, type | tuple[type, ...]]] = {}
    reverse_order: ClassVar[bool] = False
    """After-events run their callbacks in reverse registration order."""

    def __init__(
        self,
        agent: AgentView,
        *,
        scope: str,
        is_replay: bool = False,
        answers: Answers = _NO_ANSWERS,
    ) -> None:
        set_ = object.__setattr__
        set_(self, "agent", agent)
        set_(self, "is_replay", is_replay)
        set_(self, "_scope", scope)
        set_(self, "_answers", answers)
        set_(self, "_names", None)
        set_(self, "_callback_index", 0)
        set_(self, "_sealed", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            object.__setattr__(self, name, value)
            return
        expected = self._writable.get(name)
        if expected is None:
            writable = ", ".join(self._writable) or "none"
            raise HookEventWriteError(
                f"{type(self).__name__}.{name} is read-only (writable: {writable})"
            )
        if not isinstance(value, expected):
            raise HookEventWriteError(
                f"{type(self).__name__}.{name} must be {_type_names(expected)}, got {value!r}"
            )
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._fields() if n != "agent")
        return f"{type(self).__name__}({fields})"

    def _fields(self) -> list[str]:
        return [n for c in type(self).__mro__ for n in getattr(c, "__slots__", ()) if n[0] != "_"]


def _type_names(t: type | tuple[type, ...]) -> str:
    types = t if isinstance(t, tuple) else (t,)
    return " or ".join("None" if x is type(None) else x.__name__ for x in types)


class BeforeInvocationEvent(HookEvent):
    """A new invocation starts; ``prompt`` is about to be added to the conversation."""

    __slots__ = ("prompt",)
    prompt: Message
    _source: InterruptSource = "before_invocation"

    def __init__(self, agent: AgentView, prompt: Message, **kw: Any) -> None:
        super().__init__(agent, **kw)
        object.__setattr__(self, "prompt", prompt)


class AfterInvocationEvent(HookEvent):
    """An invocation ended with a reply; ``result`` may be replaced."""

    __slots__ = ("result",)
    result: AgentResult
    _source: InterruptSource = "after_invocation"
    _writable: ClassVar[Mapping[str, type | tuple[type, ...]]] = {"result": AgentResult}
    reverse_order = True

    def __init__(self, agent: AgentView, result: AgentResult, **kw: Any) -> None:
        super().__init__(agent, **kw)
        object.__setattr__(self, "result", result)


class MessageAddedEvent(HookEvent):
    """A message was appended to the conversation."""

    __slots__ = ("message",)
    message: Message
    _source: InterruptSource = "message_added"

    def __init__(self, agent: AgentView, message: Message, **kw: Any) -> None:
        super().__init__(agent, **kw)
        object.__setattr__(self, "message", message)


class BeforeModelCallEvent(HookEvent):
    """The model is about to be called with the conversation as it stands."""

    __slots__ = ()
    _source: InterruptSource = "before_model_call"


class AfterModelCallEvent(HookEvent):
    """The model answered (``response``) or failed (``exception``); set ``retry`` to call again."""

    __slots__ = ("exception", "response", "retry")
    response: ModelResponse | None
    exception: BaseException | None
    retry: bool
    _source: InterruptSource = "after_model_call"
    _writable: ClassVar[Mapping[str, type | tuple[type, ...]]] = {"retry": bool}
    reverse_order = True

    def __init__(
        self,
        agent: AgentView,
        response: ModelResponse | None,
        exception: BaseException | None,
        **kw: Any,
    ) -> None:
        super().__init__(agent, **kw)
        object.__setattr__(self, "response", response)
        object.__setattr__(self, "exception", exception)
        object.__setattr__(self, "retry", False)


class BeforeToolsEvent(HookEvent):
    """A batch of tool calls (the tool uses of one assistant message) is about to run.

    Runs once per batch, before any call's :class:`BeforeToolCallEvent`, so one question can
    approve the whole batch. ``tool_uses`` are the calls in order and ``tools`` the tool each
    would run (None if unknown); both are read-only, so an answer covers the batch as shown.
    ``cancel(message)`` skips every call, ``cancel_tool(tool_use_id, message)`` one of them: a
    skipped call's before-tool hooks and body do not run, the model gets ``message`` as an
    error result (after-tool hooks still see it). Once the callbacks pass, a later pause inside
    the batch does not run them again.

    If they pass using an answer (the batch was approved), a call that its
    :class:`BeforeToolCallEvent` callbacks then change (another tool use or tool) does not run,
    unless a question those callbacks asked was answered for the changed call: it gets an error
    result saying so. The questions asked here show no single tool use (``Interrupt.tool_use``
    is None): put what the person approves, from ``tool_uses``, in ``reason``.
    """

    __slots__ = ("_answered", "_cancel_message", "_cancelled", "tool_uses", "tools")
    tool_uses: tuple[ToolUse, ...]
    tools: tuple[AgentTool | None, ...]
    _cancel_message: str | None
    _cancelled: dict[str, str]
    _answered: dict[str, tuple[str, JsonValue]] | None
    _source: InterruptSource = "before_tools"

    def __init__(
        self,
        agent: AgentView,
        tool_uses: Sequence[ToolUse],
        tools: Sequence[AgentTool | None],
        **kw: Any,
    ) -> None:
        super().__init__(agent, **kw)
        object.__setattr__(self, "tool_uses", tuple(tool_uses))
        object.__setattr__(self, "tools", tuple(tools))
        object.__setattr__(self, "_cancel_message", None)
        object.__setattr__(self, "_cancelled", {})
        object.__setattr__(self, "_answered", {})  # the answers used: the batch was approved

    @property
    def cancel_message(self) -> str | None:
        """The message given to :meth:`cancel` (the whole batch), or None."""
        return self._cancel_message

    @property
    def cancelled(self) -> dict[str, str]:
        """Tool use id -> error message, for every call skipped so far (a copy)."""
        if self._cancel_message is not None:
            return {tu.id: self._cancel_message for tu in self.tool_uses}
        return dict(self._cancelled)

    def cancel(self, message: str = "the tool calls were cancelled") -> None:
        """Run none of the calls; each gets ``message`` as an error result."""
        self._cancel_message = str(message)

    def cancel_tool(self, tool_use_id: str, message: str = "the tool call was cancelled") -> None:
        """Do not run the call ``tool_use_id``; it gets ``message`` as an error result."""
        if not any(tu.id == tool_use_id for tu in self.tool_uses):
            ids = ", ".join(repr(tu.id) for tu in self.tool_uses)
            raise ConfigurationError(
                f"cancel_tool: no tool use {tool_use_id!r} in this batch (tool uses: {ids})"
            )
        self._cancelled[tool_use_id] = str(message)


class BeforeToolCallEvent(HookEvent):
    """A tool is about to run.

    Replace ``tool_use`` to change the arguments, ``tool`` to run another tool (or None), or
    call ``cancel(message)`` to skip the tool: the model then sees ``message`` as an error.
    An answer given to a question asked here covers exactly the call that runs once every
    callback has run: if a later callback changes ``tool_use`` or ``tool``, the question is
    asked again, showing that final call.
    """

    __slots__ = ("_answered", "_cancel_message", "tool", "tool_use")
    tool_use: ToolUse
    tool: AgentTool | None
    _cancel_message: str | None
    _answered: dict[str, tuple[str, JsonValue]] | None
    _source: InterruptSource = "before_tool_call"
    _writable: ClassVar[Mapping[str, type | tuple[type, ...]]] = {
        "tool_use": ToolUse,
        "tool": object,  # checked in __setattr__: a tool or None
    }

    def __init__(
        self, agent: AgentView, tool_use: ToolUse, tool: AgentTool | None, **kw: Any
    ) -> None:
        super().__init__(agent, **kw)
        object.__setattr__(self, "tool_use", tool_use)
        object.__setattr__(self, "tool", tool)
        object.__setattr__(self, "_cancel_message", None)
        object.__setattr__(self, "_answered", {})

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "tool":
            from .._tools import AgentTool

            if value is not None and not isinstance(value, AgentTool):
                raise HookEventWriteError(
                    f"BeforeToolCallEvent.tool must be a tool or None, got {value!r}"
                )
        super().__setattr__(name, value)

    @property
    def cancel_message(self) -> str | None:
        """The message given to :meth:`cancel`, or None."""
        return self._cancel_message

    def cancel(self, message: str = "the tool call was cancelled") -> None:
        """Do not run the tool; the model gets ``message`` as an error result."""
        self._cancel_message = str(message)

    def _interrupt_tool_use(self) -> ToolUse | None:
        return self.tool_use


class AfterToolCallEvent(HookEvent):
    """A tool use has a result: the tool returned or raised, was cancelled, or is unknown.

    Replace ``result`` to change what the model sees; set ``retry`` to run the tool again.
    """

    __slots__ = ("cancel_message", "exception", "result", "retry", "tool", "tool_use")
    tool_use: ToolUse
    tool: AgentTool | None
    result: ToolResult
    exception: BaseException | None
    cancel_message: str | None
    retry: bool
    _source: InterruptSource = "after_tool_call"
    _writable: ClassVar[Mapping[str, type | tuple[type, ...]]] = {
        "result": ToolResult,
        "retry": bool,
    }
    reverse_order = True

    def __init__(
        self,
        agent: AgentView,
        tool_use: ToolUse,
        tool: AgentTool | None,
        result: ToolResult,
        exception: BaseException | None,
        cancel_message: str | None,
        **kw: Any,
    ) -> None:
        super().__init__(agent, **kw)
        set_ = object.__setattr__
        set_(self, "tool_use", tool_use)
        set_(self, "tool", tool)
        set_(self, "result", result)
        set_(self, "exception", exception)
        set_(self, "cancel_message", cancel_message)
        set_(self, "retry", False)

    def _interrupt_tool_use(self) -> ToolUse | None:
        return self.tool_use
