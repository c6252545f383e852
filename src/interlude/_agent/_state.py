"""The loop's state: where a run stands (a ``Step``), and a pause made of one.

A run is a state machine over the steps below. The step being worked on, plus the
invocation's ``Progress``, is everything needed to carry on: when a run pauses, the pause is
exactly that step (with the data it had gathered) and the questions it is waiting on.
Every one of them is a value: the loop's handlers make a new one for each change (``but``,
``with_call``) and the run keeps the latest as where it stands.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeAlias

from .._interrupt import Answers, Interrupt
from .._messages import JsonValue, Message, ToolResult, ToolUse, Usage
from .._result import AgentResult
from .._stream import ModelResponse

if TYPE_CHECKING:
    from .._tools import AgentTool
    from ._output import OutputState
    from ._undo_plan import UndoStep

__all__ = [
    "AfterInvocation",
    "AfterModelCall",
    "BeforeInvocation",
    "BeforeModelCall",
    "CallPhase",
    "MessageAdded",
    "Position",
    "Progress",
    "Step",
    "ToolBatch",
    "ToolCall",
    "Undoing",
    "outstanding_batch",
]


@dataclass(frozen=True, slots=True)
class BeforeInvocation:
    """A prompt starts an invocation; it is appended once the before-invocation hooks pass."""

    prompt: Message


@dataclass(frozen=True, slots=True)
class MessageAdded:
    """Message ``index`` was appended; its hooks run, then the run goes on with ``then``."""

    index: int
    then: Step


@dataclass(frozen=True, slots=True)
class BeforeModelCall:
    """The model is about to be called."""


@dataclass(frozen=True, slots=True)
class AfterModelCall:
    """The model answered or failed; the after-model hooks decide what follows."""

    response: ModelResponse | None
    exception: BaseException | None


CallPhase = Literal["pending", "before", "running", "body", "after", "done"]


class ToolCall(NamedTuple):
    """One tool use of a batch and how far it got.

    ``phase`` names where it stands: not started, paused in the before-hooks, running (the
    body started and has not returned: after a crash the call is *in doubt*), paused inside
    the tool's body, paused in the after-hooks (with the kept result, exception and cancel
    message), or done (``result`` is final). ``tool_use.id`` is unique in the conversation;
    ``model_id`` is the id the model gave, when it had to be made unique.
    """

    tool_use: ToolUse
    phase: CallPhase = "pending"
    retries: int = 0
    active_use: ToolUse | None = None
    """The tool use as the before-hooks left it (phases body and after)."""
    tool_name: str | None = None
    """The tool the before-hooks selected (phases body and after); None if there was none."""
    result: ToolResult | None = None
    exception: BaseException | None = None
    cancel_message: str | None = None
    started_at: float | None = None
    """When the body last started (phases running, body, after)."""
    model_id: str | None = None
    """The model's own id for this tool use, when it was not unique (results answer it)."""
    checkpoint: str | None = None
    """What the tool body kept (``ToolContext.checkpoint``, as JSON text) when it last stopped
    with a question (phases running and body): given back to it when it runs again."""
    tool: AgentTool | None = None
    """The selected tool object, when this process selected it (not persisted)."""

    @property
    def answer_id(self) -> str:
        """The id the tool result answers: the model's own."""
        return self.model_id or self.tool_use.id

    def but(self, **changes: Any) -> ToolCall:
        """This call with ``changes`` (made at every change of phase: kept cheap)."""
        new = tuple.__new__(ToolCall, map(changes.pop, _CALL_FIELDS, self))
        if changes:
            raise TypeError(f"ToolCall has no fields {sorted(changes)}")
        return new

    # The changes every tool call goes through, made positionally (two to three times faster
    # than ``but`` with keywords): what runs is selected, the body starts, the call is done.

    def selecting(
        self, active_use: ToolUse | None, tool: AgentTool | None, tool_name: str | None
    ) -> ToolCall:
        """``but(active_use=active_use, tool=tool, tool_name=tool_name)``."""
        use, phase, retries, _, _, result, exception, cancel, at, model_id, checkpoint, _ = self
        return tuple.__new__(
            ToolCall,
            (
                use,
                phase,
                retries,
                active_use,
                tool_name,
                result,
                exception,
                cancel,
                at,
                model_id,
                checkpoint,
                tool,
            ),
        )

    def started(
        self, at: float, active_use: ToolUse, tool: AgentTool | None, tool_name: str | None
    ) -> ToolCall:
        """``but(phase="running", started_at=at, active_use=..., tool=..., tool_name=...)``."""
        use, _, retries, _, _, result, exception, cancel, _, model_id, checkpoint, _ = self
        return tuple.__new__(
            ToolCall,
            (
                use,
                "running",
                retries,
                active_use,
                tool_name,
                result,
                exception,
                cancel,
                at,
                model_id,
                checkpoint,
                tool,
            ),
        )

    def done(self, result: ToolResult) -> ToolCall:
        """``but(result=result, phase="done", exception=None, cancel_message=None,
        checkpoint=None)``: the call with its final result."""
        use, _, retries, active_use, tool_name, _, _, _, at, model_id, _, tool = self
        return tuple.__new__(
            ToolCall,
            (
                use,
                "done",
                retries,
                active_use,
                tool_name,
                result,
                None,
                None,
                at,
                model_id,
                None,
                tool,
            ),
        )


_NONE_CANCELLED: Mapping[str, str] = MappingProxyType({})
_NO_DECISIONS: Mapping[str, tuple[bool, str | None]] = MappingProxyType({})
_NO_VOTES: Mapping[str, Any] = MappingProxyType({})


class ToolBatch(NamedTuple):
    """The tool uses of the assistant message at ``message_index``.

    ``opened`` is set once the batch's ``BeforeToolsEvent`` callbacks passed (so a later pause
    inside the batch does not ask them again); ``cancelled`` maps the tool use id of each call
    they cancelled to the error message the model gets instead of a result. ``approved`` is
    set when they passed using at least one answer: then a call that its before-tool hooks
    change from what the batch event showed runs only if one of its own questions, answered
    for the changed call, covers it (fail closed: the batch answer approved the calls shown).

    Like ``ToolCall`` and ``Progress``, a named tuple: the loop makes a new one at each change
    of a call, and a tuple is made several times faster than a frozen dataclass.
    """

    message_index: int
    calls: tuple[ToolCall, ...]
    opened: bool = False
    cancelled: Mapping[str, str] = _NONE_CANCELLED
    approved: bool = False

    def with_call(self, call: ToolCall) -> ToolBatch:
        """This batch with ``call`` in place of the call of its tool use."""
        calls = self.calls
        if len(calls) == 1 and calls[0].tool_use.id == call.tool_use.id:
            return _tuple_new(ToolBatch, (self[0], (call,), *self[2:]))
        for i, c in enumerate(calls):
            if c.tool_use.id == call.tool_use.id:
                return _new_batch((self[0], (*calls[:i], call, *calls[i + 1 :]), *self[2:]))
        raise ValueError(f"no call of tool use {call.tool_use.id!r} in this batch")

    def call(self, tool_use_id: str) -> ToolCall:
        """The call of tool use ``tool_use_id``."""
        for c in self.calls:
            if c.tool_use.id == tool_use_id:
                return c
        raise ValueError(f"no call of tool use {tool_use_id!r} in this batch")


def _new_batch(fields: tuple[Any, ...]) -> ToolBatch:
    return tuple.__new__(ToolBatch, fields)


_tuple_new = tuple.__new__


@dataclass(frozen=True, slots=True)
class AfterInvocation:
    """The invocation produced ``result``; the after-invocation hooks may replace it."""

    result: AgentResult


@dataclass(frozen=True, slots=True)
class Undoing:
    """An undo under way (``agent.undo``, or a decline's rollback): the compensations of the
    calls in ``undone``, run one by one, newest first, as the calls of ``batch`` (a batch of
    its own, never appended: message index -1), each journaled like a tool call.

    Once every one is done, an undo cuts the conversation to its first ``keep`` messages and
    the session stands at ``then`` (None: between runs); a decline's rollback (``keep`` -1)
    appends the results of ``after``, the batch with the declined call, and a note of what was
    undone, then the model is called. ``skipped`` are the calls a person said to leave."""

    to: str
    by: str
    batch: ToolBatch
    undone: tuple[UndoStep, ...]
    skipped: tuple[UndoStep, ...] = ()
    keep: int = -1
    then: Step | None = None
    after: ToolBatch | None = None

    def with_call(self, call: ToolCall) -> Undoing:
        """This undo with ``call`` in place of the compensation of its tool use."""
        from dataclasses import replace

        return replace(self, batch=self.batch.with_call(call))


Step: TypeAlias = (
    BeforeInvocation
    | MessageAdded
    | BeforeModelCall
    | AfterModelCall
    | ToolBatch
    | AfterInvocation
    | Undoing
)


class Progress(NamedTuple):
    """What an invocation has accumulated; it lives from the prompt to the final reply."""

    cycles: int = 0
    """Model responses accepted so far (bounded by ``max_cycles``)."""
    model_retries: int = 0
    """Retries of the current model call (bounded by ``max_retries``)."""
    usage: Usage = Usage()
    answers: Answers = Answers()
    """Answers to interrupts given so far in this invocation."""
    traceparent: str | None = None
    """The W3C trace context of the invocation's latest traced run (set by tracing, see
    ``interlude.otel``): a resumed or recovered run's span links to it."""
    output: OutputState | None = None
    """The output type the invocation must end with (None: a plain text reply)."""
    decisions: Mapping[str, tuple[bool, str | None]] = _NO_DECISIONS
    """Approval decisions remembered for the rest of the invocation: tool name -> (approve,
    the person's note) (an answer with ``"remember": "run"``; see ``_approval``)."""
    votes: Mapping[str, tuple[JsonValue, tuple[str, ...]]] = _NO_VOTES
    """Approvals given so far to questions with a quorum not yet reached: question id ->
    (the answer voted for, who voted for it, in order)."""
    message: str | None = None
    """Text a person sent with their answers (``resume(..., message=...)``), not yet in the
    conversation: it joins the next user message, or is sent as one before the next model
    call."""

    def but(self, **changes: Any) -> Progress:
        """This progress with ``changes``."""
        return self._replace(**changes)


class Position(NamedTuple):
    """Where a run stands: the step to carry on from, its progress and the questions it waits
    on. With questions it is a pause; without, it is the journal of a run that is going (or
    whose process stopped before it finished: a *stopped run*, carried on by ``recover``)."""

    step: Step
    interrupts: list[Interrupt]
    progress: Progress


_CALL_FIELDS = ToolCall._fields


def outstanding_batch(step: Step) -> ToolBatch | None:
    """The tool batch whose results are not yet in the conversation, if any."""
    if isinstance(step, ToolBatch):
        return step
    if isinstance(step, MessageAdded):
        return outstanding_batch(step.then)
    if isinstance(step, Undoing):  # a decline's rollback: its results wait until it is done
        return step.after
    return None
