"""An agent's configuration: one frozen ``AgentSpec``, checked when it is made.

``Agent(...)`` keeps its signature as sugar over a spec (``agent.spec``); a copy of an agent is
``Agent.from_spec(replace(spec, ...))`` (agents as tools), so no setting can be forgotten by a
copy made by hand. Setting one of the agent's configuration attributes (``agent.model = ...``)
replaces its spec with a checked one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from operator import attrgetter
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, overload

from .._tools import AgentTool, FunctionTool
from ..errors import ConfigurationError
from ..hooks import HookRegistry
from ._executor import LOCAL

if TYPE_CHECKING:
    from .._interrupt import Interrupt
    from ..conversation import ConversationManager
    from ..policy import Policy
    from ._executor import Executor
    from ._observe import Observer

__all__ = ["AgentSpec", "Approver", "SpecField", "check_settings", "respec", "tools_by_name"]

T = TypeVar("T")

Approver = Callable[["Interrupt"], Any]
"""``approver(question) -> answer | None`` (or a coroutine function): see ``_approver``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentSpec:
    """What an agent is: its model, tools, hooks, prompt, limits and policies. ``tools`` maps
    names to tools (read-only); ``hooks`` is the agent's registry (callbacks may be added to
    it); ``signing_key`` is bytes (text is UTF-8 encoded; None: pauses are not signed);
    ``executor`` is where model calls and tool bodies run (this process by default)."""

    model: Any
    tools: Mapping[str, AgentTool] = field(default_factory=lambda: MappingProxyType({}))
    hooks: HookRegistry = field(default_factory=HookRegistry)
    system_prompt: str | None = None
    tool_executor: Literal["concurrent", "sequential"] = "concurrent"
    max_cycles: int = 50
    max_retries: int = 3
    output_retries: int = 2
    in_doubt: Literal["ask", "rerun"] = "ask"
    name: str | None = None
    signing_key: bytes | None = None
    """Bytes (text is UTF-8 encoded when the spec is made)."""
    clock: Callable[[], float] = time.time
    conversation: ConversationManager | None = None
    observer: Observer | None = None
    executor: Executor = LOCAL
    session_lease: float = 30.0
    approver: Approver | None = None
    """Called with each question when a run pauses: an answer, or None (a person decides)."""
    policy: Policy | None = None
    """Who must approve what, for every tool call (see ``interlude.policy``); None: the
    tools' own ``needs_approval`` only."""
    shadow: Policy | None = None
    """A candidate policy judged beside ``policy`` on each call and recorded, never acted on."""
    on_decline: Literal["tell", "compensate"] = "tell"
    """What follows a person's decline of a call: the model is told (``"tell"``), or the
    calls the run made since its prompt are undone first (``"compensate"``: docs/undo.md)."""
    list_pending: bool = True
    """Whether the session's questions go into the store's pending index. False for the node
    agents of an orchestration (``interlude.multiagent``): their questions are listed, under
    the orchestration's ids, with the orchestration's own session, where they are answered."""

    def __post_init__(self) -> None:
        from ._signing import as_key

        if isinstance(self.model, str):
            from ..models import model_from_string

            object.__setattr__(self, "model", model_from_string(self.model))
        check_settings(self)
        object.__setattr__(self, "signing_key", as_key(self.signing_key))
        if not isinstance(self.tools, MappingProxyType):
            object.__setattr__(self, "tools", MappingProxyType(dict(self.tools)))


_FIELDS = attrgetter(*AgentSpec.__slots__)  # every field's value, in one call
_SETTERS = tuple(AgentSpec.__dict__[name].__set__ for name in AgentSpec.__slots__)
_INDEX = {name: i for i, name in enumerate(AgentSpec.__slots__)}


def respec(
    spec: AgentSpec,
    *,
    hooks: HookRegistry | None = None,
    list_pending: bool | None = None,
    tools: Mapping[str, AgentTool] | None = None,
) -> AgentSpec:
    """``spec`` with another hook registry, pending listing or set of tools: settings no check
    looks at, so the others (checked when ``spec`` was made, and frozen since) are not checked
    again. Copies of agents (graph nodes, agents as tools) are made this way, per run."""
    values = list(_FIELDS(spec))
    if hooks is not None:
        values[_INDEX["hooks"]] = hooks
    if list_pending is not None:
        values[_INDEX["list_pending"]] = list_pending
    if tools is not None:
        values[_INDEX["tools"]] = MappingProxyType(dict(tools))
    new = object.__new__(AgentSpec)
    for set_field, value in zip(_SETTERS, values, strict=True):
        set_field(new, value)
    return new


class SpecField(Generic[T]):
    """An agent attribute that is a field of its spec: reading it reads the spec, setting it
    replaces the spec with a checked one."""

    __slots__ = ("name",)

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> SpecField[T]: ...
    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> T: ...
    def __get__(self, obj: object, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        return getattr(obj._spec, self.name)  # type: ignore[attr-defined]

    def __set__(self, obj: object, value: T) -> None:
        obj._set_spec(replace(obj._spec, **{self.name: value}))  # type: ignore[attr-defined]


def check_settings(spec: AgentSpec) -> None:
    """ConfigurationError naming the first setting that is wrong."""
    model, tool_executor = spec.model, spec.tool_executor
    if not callable(getattr(model, "stream", None)):
        raise ConfigurationError(f"model has no stream() method: {model!r}")
    if tool_executor not in ("concurrent", "sequential"):
        raise ConfigurationError(
            f"tool_executor must be 'concurrent' or 'sequential', got {tool_executor!r}"
        )
    for what, value in (
        ("max_cycles", spec.max_cycles),
        ("max_retries", spec.max_retries),
        ("output_retries", spec.output_retries),
    ):
        if not isinstance(value, int) or value < 0:
            raise ConfigurationError(f"{what} must be a non-negative integer, got {value!r}")
    _check_policies(spec)


def _check_policies(spec: AgentSpec) -> None:
    in_doubt, lease, name, clock = spec.in_doubt, spec.session_lease, spec.name, spec.clock
    if in_doubt not in ("ask", "rerun"):
        raise ConfigurationError(f"in_doubt must be 'ask' or 'rerun', got {in_doubt!r}")
    if spec.on_decline not in ("tell", "compensate"):
        raise ConfigurationError(
            f"on_decline must be 'tell' or 'compensate', got {spec.on_decline!r}"
        )
    if not isinstance(lease, int | float) or not 0 < lease < float("inf"):
        raise ConfigurationError(
            f"session_lease must be a positive number of seconds, got {lease!r}"
        )
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ConfigurationError(f"name must be a non-empty string, got {name!r}")
    if not callable(clock):
        raise ConfigurationError(f"clock must be a function returning epoch seconds: {clock!r}")
    conversation = spec.conversation
    if conversation is not None and not (
        callable(getattr(conversation, "view", None))
        and callable(getattr(conversation, "reduce", None))
    ):
        raise ConfigurationError(
            f"conversation must be a conversation manager (SlidingWindow, Summarizing, ...) "
            f"with view() and reduce(), got {conversation!r}"
        )
    if spec.approver is not None and not callable(spec.approver):
        raise ConfigurationError(
            f"approver must be a function of a question (Interrupt) returning an answer or "
            f"None, got {spec.approver!r}"
        )
    for what, policy in (("policy", spec.policy), ("shadow", spec.shadow)):
        if policy is not None and not callable(getattr(policy, "decide", None)):
            raise ConfigurationError(f"{what} must be an interlude.policy.Policy, got {policy!r}")
    executor = spec.executor
    if not (
        callable(getattr(executor, "call_model", None))
        and callable(getattr(executor, "run_tool", None))
    ):
        raise ConfigurationError(f"not an executor (call_model, run_tool): {executor!r}")


def tools_by_name(tools: Iterable[AgentTool | Any]) -> dict[str, AgentTool]:
    by_name: dict[str, AgentTool] = {}
    for item in tools:
        # FunctionTool first: a runtime-protocol isinstance costs tens of microseconds.
        t = item if isinstance(item, FunctionTool | AgentTool) else _as_tool(item)
        if t.name in by_name:
            raise ConfigurationError(f"two tools are named {t.name!r}")
        by_name[t.name] = t
    return by_name


def _as_tool(obj: Any) -> AgentTool:
    if callable(obj) and hasattr(obj, "__name__"):
        return FunctionTool(obj)
    raise ConfigurationError(f"not a tool: {obj!r} (decorate a function with @tool)")
