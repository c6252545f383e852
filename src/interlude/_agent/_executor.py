"""Where a run's model calls and tool bodies happen: the one seam for running them elsewhere.

The loop decides everything (steps, hooks, answers, the journal); an executor only performs
the two things that reach outside it, each given as a typed request and answered with a typed
value. ``LocalExecutor`` performs them in this process, as every agent does by default; an
integration (a durable execution engine running each as an activity) gives the agent another
by setting ``agent.executor``. An executor never touches the agent: what a tool body changed
or used comes back in its outcome and the loop applies it. Requests and outcomes are immutable
named tuples (one of each is made per model call and tool body: a tuple is made several times
faster than a frozen dataclass); build them by keyword.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeAlias

from .._interrupt import Answers, Interrupt
from .._messages import JsonValue, Message, ToolResult, ToolUse
from .._tools import RelaySignal, ToolContext
from ..errors import InterruptSignal

if TYPE_CHECKING:
    from .._stream import ModelResponse, StreamEvent
    from .._tools import AgentTool, ToolSpec
    from ..models import Model
    from ._overlay import Body

__all__ = [
    "LOCAL",
    "Asked",
    "Executor",
    "LocalExecutor",
    "Lost",
    "ModelCall",
    "Raised",
    "Returned",
    "StateDelta",
    "ToolOutcome",
    "ToolRequest",
    "outcome_from_json",
]


class ModelCall(NamedTuple):
    """One model call: the conversation as the model is sent it (the conversation manager's
    view), the tool specs, the system prompt and the output options (``Model.stream`` keyword
    arguments: the output schema of a structured run)."""

    model: Model
    messages: Sequence[Message]
    tools: Sequence[ToolSpec]
    system_prompt: str | None
    options: Mapping[str, Any]
    state: Mapping[str, JsonValue]
    """``agent.state`` as the call sees it (read-only)."""
    now: float
    emit: Any = None
    """Where stream events go as they come (None: nowhere)."""


class ToolRequest(NamedTuple):
    """One tool body to run: ``tool`` on ``tool_use`` (the call as the before-hooks left it),
    with the answers of this invocation and what the body kept when it last stopped, both in
    ``context``. ``at_most_once``: the body must not be run twice by the executor (a lost
    attempt is reported as :class:`Lost`, and the loop asks a person)."""

    tool: AgentTool
    tool_use: ToolUse
    answer_id: str
    """The id the call's result answers (the model's own, when the run had to make the tool
    use's id unique)."""
    context: ToolContext
    """What the body is handed when it runs in this process."""
    answers: Answers
    """The answers of this invocation so far (what the body can be asked about)."""
    checkpoint: str | None
    """What the body kept (JSON text) when it last stopped with a question."""
    state: Mapping[str, JsonValue]
    """``agent.state`` (read-only): a body gets its own copy, and what it changed comes back
    in its outcome's ``state``."""
    now: float
    at_most_once: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class StateDelta:
    """What a body that ran elsewhere changed in ``agent.state``: keys it set (or changed)
    and keys it removed. Applied at the step boundary; changes made meanwhile by other calls
    to other keys stay."""

    set: Mapping[str, JsonValue]
    removed: tuple[str, ...] = ()

    @classmethod
    def between(cls, sent: Mapping[str, JsonValue], now: Mapping[str, Any]) -> StateDelta | None:
        """The change from ``sent`` to ``now`` (None: no change)."""
        changed = {k: v for k, v in now.items() if k not in sent or sent[k] != v}
        removed = tuple(k for k in sent if k not in now)
        return cls(set=changed, removed=removed) if changed or removed else None

    def apply(self, state: dict[str, JsonValue]) -> None:
        state.update(self.set)
        for key in self.removed:
            state.pop(key, None)


class Returned(NamedTuple):
    """The body returned ``result``."""

    result: ToolResult
    used: tuple[str, ...] = ()
    """The ids of the answers the body took (each is handed out once): the run forgets them."""
    state: StateDelta | None = None
    """What the body changed in ``agent.state`` (applied by the loop when the body is done)."""


class Raised(NamedTuple):
    """The body raised ``exception`` (the model gets an error result naming it)."""

    exception: Exception
    used: tuple[str, ...] = ()
    state: StateDelta | None = None


class Asked(NamedTuple):
    """The body stopped with questions: one it asked, or several it relayed (``relayed``, a
    sub-agent's); ``checkpoint`` is what it kept for its re-run."""

    interrupts: tuple[Interrupt, ...]
    relayed: bool = False
    checkpoint: str | None = None
    used: tuple[str, ...] = ()
    state: StateDelta | None = None


class Lost(NamedTuple):
    """The executor lost the call: it may or may not have run (``reason`` says why). The call
    is *in doubt*, exactly as after a crash: the loop decides (a person, for most tools)."""

    reason: str


ToolOutcome: TypeAlias = Returned | Raised | Asked | Lost


class Executor(Protocol):
    async def call_model(self, call: ModelCall) -> ModelResponse:
        """The model's reply (stream events given to ``call.emit`` as they come)."""
        ...

    async def run_tool(self, request: ToolRequest) -> ToolOutcome:
        """What the tool body did."""
        ...


class LocalExecutor:
    """Model calls and tool bodies in this process."""

    async def call_model(self, call: ModelCall) -> ModelResponse:
        return await self.answer(
            call.model, call.messages, call.tools, call.system_prompt, call.options, call.emit
        )

    async def answer(
        self,
        model: Model,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        system_prompt: str | None,
        options: Mapping[str, Any],
        emit: Callable[[StreamEvent], None] | None,
    ) -> ModelResponse:
        """The model's reply, streamed here (the loop calls this directly when nothing needs
        the :class:`ModelCall` value: no other executor, no observer)."""
        stream = model.stream(
            messages if type(messages) is list else list(messages),
            tools if type(tools) is list else list(tools),
            system_prompt,
            **options,
        )
        return await (_ASSEMBLE or _load_assemble())(stream, emit, model)

    async def run_tool(self, request: ToolRequest) -> ToolOutcome:
        return await self.run_body(request.tool, request.tool_use, request.context)

    async def run_body(
        self, tool: AgentTool, tool_use: ToolUse, context: ToolContext
    ) -> ToolOutcome:
        """Run the body here; the answers it took come back as ``used``, what it changed of its
        own copy of ``agent.state`` as ``state`` (the loop calls this directly when nothing
        needs the :class:`ToolRequest` value: no other executor, no observer)."""
        bodies = _BODIES or _load_bodies()
        body = bodies.Body(context.agent)  # its own agent.state, made when it first looks
        token = bodies.BODY_STATE.set(body)
        try:
            result = await tool.run(tool_use, context)
        except RelaySignal as signal:
            return Asked(
                interrupts=tuple(signal.interrupts),
                relayed=True,
                checkpoint=context._checkpoint,
                used=tuple(context._taken),
                state=body.delta(),
            )
        except InterruptSignal as signal:
            return Asked(
                interrupts=(signal.interrupt,),
                checkpoint=context._checkpoint,
                used=tuple(context._taken),
                state=body.delta(),
            )
        except Exception as exc:
            return Raised(exception=exc, used=tuple(context._taken), state=body.delta())
        finally:
            bodies.BODY_STATE.reset(token)
        overlay = body.overlay  # ``Returned(result, used, body.delta())``, two calls fewer
        delta = None if overlay is None else overlay.delta()
        return _tuple_new(Returned, (result, tuple(context._taken), delta))


_tuple_new = tuple.__new__


LOCAL = LocalExecutor()


_ASSEMBLE: Callable[..., Awaitable[ModelResponse]] | None = None
"""``interlude.models.assemble``, loaded with the first model call."""


def _load_assemble() -> Callable[..., Awaitable[ModelResponse]]:
    global _ASSEMBLE
    from ..models import assemble

    _ASSEMBLE = assemble
    return assemble


_BODIES: Any = None
"""The ``_overlay`` module once a tool body has run here (loaded then, with contextvars: an
agent that runs no tool never loads it)."""


def _load_bodies() -> Any:
    global _BODIES
    from . import _overlay

    _BODIES = _overlay
    return _overlay


def current_body() -> Body | None:
    """The tool body running in this context (see ``_overlay``), or None."""
    return None if _BODIES is None else _BODIES.BODY_STATE.get()


def outcome_from_json(out: Mapping[str, Any], state: StateDelta | None) -> ToolOutcome:
    """A tool body's outcome as a durable engine recorded it (``{"result"}``, ``{"error"}``,
    ``{"interrupt"}`` or ``{"interrupts"}``, with ``"used"`` and ``"checkpoint"``), with the
    ``state`` change the engine read from it (each engine records that its own way)."""
    from .._exceptions import exception_from_dict
    from .._interrupt import Interrupt
    from .._messages import tool_result_from_dict

    used = out.get("used")
    taken = tuple(str(i) for i in used) if isinstance(used, list) else ()
    checkpoint = out.get("checkpoint")
    kept = checkpoint if isinstance(checkpoint, str) else None
    if "interrupts" in out:
        questions = tuple(Interrupt.from_dict(q) for q in out["interrupts"])
        return Asked(interrupts=questions, relayed=True, checkpoint=kept, used=taken, state=state)
    if "interrupt" in out:
        question = Interrupt.from_dict(out["interrupt"])
        return Asked(interrupts=(question,), checkpoint=kept, used=taken, state=state)
    if "error" in out:  # the tool raised: the loop makes its error result, as embedded
        error = exception_from_dict(out["error"], "tool error")
        if not isinstance(error, Exception):
            error = RuntimeError(f"tool error: {error!r}")
        return Raised(exception=error, used=taken, state=state)
    result = tool_result_from_dict(out["result"], "tool result")
    return Returned(result=result, used=taken, state=state)
