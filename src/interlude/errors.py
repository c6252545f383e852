"""Every error Interlude raises, under one base class.

```
Exception
└── InterludeError
    ├── ConfigurationError          an Agent or tool built wrongly
    ├── HookEventWriteError         (also AttributeError) writing a read-only event field
    ├── ReadOnlyError               (also TypeError) editing a handed-out JSON value in place
    ├── InterruptError              misuse of interrupt(): a name used twice in one event
    ├── DirectToolInterruptError    agent.tool.x() met an interrupt
    ├── ToolInputError              a model's tool arguments failed validation
    ├── UnknownToolError            (also AttributeError) agent.tool.nope
    ├── AgentBusyError              a second run started while one is going
    ├── LimitError
    │   ├── CycleLimitError         too many model/tool cycles in one invocation
    │   ├── RetryLimitError         a tool or model call retried too often
    │   ├── NodeRunLimitError       a graph node would run more than max_node_runs times
    │   └── HandoffLimitError       a swarm handed off more than max_handoffs times
    ├── ModelError                  a model could not answer (``retryable``, ``status``)
    │   ├── ModelThrottledError     rate limited / throttled, still after the retries
    │   ├── ModelAuthError          the provider refused the credentials
    │   ├── ContextWindowOverflowError  the conversation no longer fits the model
    │   └── ModelProviderError      any other provider failure (server errors, bad requests)
    ├── OutputValidationError       a run's final answer did not fit its output_type
    ├── ScriptError                 a ScriptedModel was asked for a turn it does not have
    ├── UnknownAgentError           (also LookupError) an App has no agent of that name
    ├── UnknownCheckpointError      (also LookupError) agent.fork(at=...) names no checkpoint
    ├── UndoError                   an undo cannot run (a call without a compensation); nothing ran
    ├── McpServerError              an MCP server could not be reached or refused a listing
    ├── RemoteAgentError            a remote A2A agent's task failed or could not be carried on
    ├── NotificationError           a notification could not be delivered (``permanent``)
    ├── ResumeError                 bad resume input; nothing was changed
    │   ├── NotPausedError
    │   ├── UnknownInterruptError
    │   ├── ResumeInputError        the answers are not a map of id to JSON answer
    │   │   ├── AnswerValidationError   an answer does not fit its question's response type
    │   │   └── StaleAnswerError    the question changed since the person saw it
    │   ├── InterruptExpiredError   a question's deadline passed (an answer came too late)
    │   ├── NotAllowedToAnswerError the person is in none of the groups that may answer
    │   ├── AlreadyAnsweredError    (also SessionConflictError) someone answered it first
    │   ├── UnconsumedAnswerError   a replay did not ask the question its answer was for
    │   ├── OutputTypeMismatchError resume(output_type=T) with a T the paused run was not given
    │   ├── SessionMovedError       the session was moved to another engine (``target``)
    │   └── AgentPausedError        a new prompt was sent to a paused agent
    ├── StateError
    │   ├── StateFormatError        unknown format version, corrupt or malformed state
    │   ├── StateMismatchError      the state needs something the agent lacks (a tool)
    │   └── StateIntegrityError     a signed state's signature does not verify
    ├── SessionError
    │   ├── SessionConflictError    another process saved the session first (optimistic lock)
    │   ├── SessionCorruptError     (also StateFormatError) a stored session cannot be read
    │   ├── InvalidSessionIdError   (also ValueError) an id that could escape the store
    │   └── StoreUnavailableError   the store cannot be reached or write now: try again later
    └── ReplayedException           stands in for a pre-pause exception that cannot be rebuilt

BaseException
└── ControlFlowSignal               not errors: never catch these
    └── InterruptSignal             raised by interrupt() to stop a hook callback or tool
```

Every error that refuses an answer has a ``code`` (``refusal_code(exc)``): the short word each
place people answer (the inbox API, AG-UI, A2A, the command line) puts on the wire, the same for
the same refusal whatever the door.

`InterruptSignal` derives from `BaseException` so that a tool or hook written with
`except Exception:` cannot swallow the stop by accident.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._interrupt import Interrupt

__all__ = [
    "AgentBusyError",
    "AgentPausedError",
    "AlreadyAnsweredError",
    "AnswerValidationError",
    "CallTakenError",
    "ConfigurationError",
    "ContextWindowOverflowError",
    "ControlFlowSignal",
    "CycleLimitError",
    "DirectToolInterruptError",
    "HandoffLimitError",
    "HookEventWriteError",
    "InterludeError",
    "InterruptError",
    "InterruptExpiredError",
    "InterruptSignal",
    "InvalidSessionIdError",
    "LimitError",
    "McpServerError",
    "ModelAuthError",
    "ModelError",
    "ModelProviderError",
    "ModelThrottledError",
    "NestedNodeError",
    "NodeRunLimitError",
    "NotAllowedToAnswerError",
    "NotPausedError",
    "NotificationError",
    "OutputTypeMismatchError",
    "OutputValidationError",
    "ReadOnlyError",
    "RemoteAgentError",
    "ReplayedException",
    "ResumeError",
    "ResumeInputError",
    "RetryLimitError",
    "ScriptError",
    "SessionConflictError",
    "SessionCorruptError",
    "SessionError",
    "SessionMovedError",
    "StaleAnswerError",
    "StateError",
    "StateFormatError",
    "StateIntegrityError",
    "StateMismatchError",
    "StoreUnavailableError",
    "ToolInputError",
    "UnconsumedAnswerError",
    "UndoError",
    "UnknownAgentError",
    "UnknownCheckpointError",
    "UnknownInterruptError",
    "UnknownToolError",
]


class InterludeError(Exception):
    """Base class of every error raised by Interlude."""

    code: str = "error"
    """What a door says of it on the wire (see :func:`refusal_code`)."""


class ConfigurationError(InterludeError):
    """An agent, tool or hook was set up in a way that cannot work."""


class HookEventWriteError(InterludeError, AttributeError):
    """A hook callback wrote a field of an event that is not writable."""


class ReadOnlyError(InterludeError, TypeError):
    """A value Interlude handed out (a tool use's input, a message's content, a question's
    reason, an answer) was edited in place. Those values are what was shown, approved and
    stored; make a changed copy instead (for a tool call: assign ``event.tool_use``)."""


class InterruptError(InterludeError):
    """interrupt() was misused, e.g. two callbacks of one event used the same name."""


class DirectToolInterruptError(InterludeError):
    """A direct call (``agent.tool.x()``) met an interrupt; nothing was recorded."""

    def __init__(self, message: str, interrupts: list[Interrupt]) -> None:
        super().__init__(message)
        self.interrupts = interrupts


class ToolInputError(InterludeError, ValueError):
    """A model gave a tool arguments that do not fit its signature."""


class UnknownToolError(InterludeError, AttributeError):
    """``agent.tool.<name>`` named a tool the agent does not have."""


class AgentBusyError(InterludeError):
    """A run was started on an agent that is already running one."""


class LimitError(InterludeError):
    """A configured bound was reached."""


class CycleLimitError(LimitError):
    """An invocation made more model calls than ``max_cycles`` allows."""


class RetryLimitError(LimitError):
    """A tool or a model call was retried more often than ``max_retries`` allows."""


class NodeRunLimitError(LimitError):
    """A graph node would run more often in one invocation than ``max_node_runs`` allows."""


class HandoffLimitError(LimitError):
    """A swarm's agents handed off more often in one invocation than ``max_handoffs`` allows."""


class NestedNodeError(InterludeError, AttributeError):
    """A node hook asked a nested graph's or swarm's node for what only an agent has (its
    ``messages``, ``state`` or ``audit``): read ``event.nested`` instead."""


class ModelError(InterludeError):
    """A model could not produce a response.

    ``provider`` names the provider, ``status`` the HTTP status when there was one,
    ``retryable`` whether trying again later may help, ``retry_after`` the wait the provider
    asked for (seconds), if any.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after


class ModelThrottledError(ModelError):
    """The provider rate-limited or throttled the call, and retrying did not get through."""


class ModelAuthError(ModelError):
    """The provider refused the credentials (missing, wrong or without access to the model)."""


class ContextWindowOverflowError(ModelError):
    """The conversation is too long for the model's context window."""


class ModelProviderError(ModelError):
    """Any other failure reported by the provider (a server error, a rejected request)."""


class OutputValidationError(InterludeError):
    """A run's final answer did not fit its ``output_type``, still after the answers sent back
    to the model (``Agent(output_retries=...)``). ``path`` names the bad field (empty: the
    whole answer) and ``output`` is the model's last answer (its text, or its final-answer
    tool input)."""

    def __init__(self, message: str, *, path: tuple[str | int, ...] = (), output: object = None):
        super().__init__(message)
        self.path = path
        self.output = output


class ScriptError(InterludeError):
    """A scripted test model was asked for a turn it does not have: a broken test, not a
    model failure (so a hook that retries model errors does not retry it)."""


class UnknownAgentError(InterludeError, LookupError):
    """An :class:`~interlude.App` was asked for an agent name it does not know."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class UnknownCheckpointError(InterludeError, LookupError):
    """``Agent.fork(at=...)`` names no checkpoint of the session's record, or one a fork
    cannot stand at (see docs/time-travel.md); nothing was made."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class UndoError(InterludeError):
    """``agent.undo(...)`` cannot run as asked: a call after the checkpoint has no
    compensation (``calls`` names them; ``skip=`` them to go on), a call is in doubt, or the
    agent stands where no undo can start. Nothing was run or changed."""

    def __init__(self, message: str, calls: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.calls = calls
        """The ids of the calls that stopped it (empty when no call did)."""


class McpServerError(InterludeError):
    """An MCP server could not be started or reached, or refused to list its tools.

    A tool call never raises it: the model gets an error result naming the server instead.
    """


class RemoteAgentError(InterludeError):
    """A remote A2A agent's task (``interlude.a2a.RemoteAgent``) failed, was rejected or
    canceled, or could not be carried on. A tool call turns it into an error result."""


class NotificationError(InterludeError):
    """A notification could not be delivered (``interlude.notify``). ``permanent`` says that
    trying again cannot help (a receiver refused it with a 4xx, or an address was refused):
    it is then failed for good; otherwise it is tried again later."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


class ResumeError(InterludeError):
    """Bad input to resume; the paused state was not changed."""

    code = "refused"


class NotPausedError(ResumeError):
    """resume() was called on an agent that is not paused."""

    code = "not_paused"


class UnknownInterruptError(ResumeError, KeyError):
    """An answer named an interrupt id that is not pending."""

    code = "unknown_interrupt"

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class ResumeInputError(ResumeError, TypeError):
    """The answers were not a map of interrupt id to a JSON-compatible answer."""

    code = "invalid_answer"


class AnswerValidationError(ResumeInputError):
    """An answer does not fit the response type its question asked for; nothing changed.

    ``interrupt_id`` names the question and ``path`` the bad field (empty: the answer itself).
    """

    def __init__(self, message: str, *, interrupt_id: str, path: tuple[str | int, ...] = ()):
        super().__init__(message)
        self.interrupt_id = interrupt_id
        self.path = path


class NotAllowedToAnswerError(ResumeError):
    """The person answering is in none of the groups that may answer the question (see
    ``Interrupt.approvers`` and ``escalate_to``); checked where people answer (the inbox), and
    nothing was recorded. ``interrupt_id`` names the question."""

    code = "not_allowed"

    def __init__(self, message: str, *, interrupt_id: str) -> None:
        super().__init__(message)
        self.interrupt_id = interrupt_id


class InterruptExpiredError(ResumeError):
    """A question's deadline has passed.

    Raised by ``resume`` for an answer that came too late (nothing changed), and by
    ``interrupt(...)`` inside a hook callback or tool when its question expired with no
    default: the step then does not go ahead (a before-tool callback's tool is cancelled),
    unless the callback catches this to decide otherwise. ``interrupt`` is the question.
    """

    code = "expired"

    def __init__(self, message: str, interrupt: Interrupt | None = None) -> None:
        super().__init__(message)
        self.interrupt = interrupt


class StaleAnswerError(ResumeInputError):
    """The person answered a question as it was shown to them, and it has changed since (its
    digest differs): nothing was answered; they look at it again."""

    code = "stale"


class UnconsumedAnswerError(ResumeError):
    """A resume gave an answer that the replayed step did not take: the hook or rule that asked
    did not ask again. The answer is never dropped: the run stops before the step goes ahead,
    and the pause stays as it was. ``interrupt_id`` names the question."""

    code = "unconsumed_answer"

    def __init__(self, message: str, *, interrupt_id: str) -> None:
        super().__init__(message)
        self.interrupt_id = interrupt_id


class OutputTypeMismatchError(ResumeError):
    """``resume(..., output_type=T)`` gave a T whose JSON Schema is not the one the paused run
    was started with (or the run had none); nothing changed."""

    code = "invalid_answer"


class AgentPausedError(ResumeError):
    """A new prompt was sent to a paused agent; resume it or discard the pause first."""

    code = "paused"


class SessionMovedError(ResumeError):
    """The session was moved to another store or engine (``interlude move``): it is answered
    and carried on there, at ``target`` (a store URL, ``temporal://...``), not here."""

    code = "moved"

    def __init__(self, message: str, *, target: str = "") -> None:
        super().__init__(message)
        self.target = target


class StateError(InterludeError):
    """Saved agent state could not be read or does not fit this agent."""

    code = "state"


class StateFormatError(StateError):
    """Saved state has an unknown format version or is malformed."""


class StateMismatchError(StateError):
    """Saved state needs something (such as a tool) this agent does not have."""


class StateIntegrityError(StateError):
    """A state (exported or stored) does not carry a valid signature for the signing key in
    use: it was changed, or signed with another key, or not signed. Nothing was loaded."""

    code = "forged"


class SessionError(InterludeError):
    """A session store could not load or save a session."""

    code = "session"


class SessionConflictError(SessionError):
    """Another agent saved this session since it was loaded; nothing was written.

    Two processes that resume the same pause race for it: exactly one proceeds, the other gets
    this error before it runs anything.
    """

    code = "busy"


class AlreadyAnsweredError(ResumeError, SessionConflictError):
    """Someone answered the question first (the first answer wins, across every place people
    answer): nothing was recorded or run. ``interrupt_id`` names the question and ``by`` who
    answered it, when known."""

    code = "already_answered"

    def __init__(self, message: str, *, interrupt_id: str | None = None, by: str | None = None):
        super().__init__(message)
        self.interrupt_id = interrupt_id
        self.by = by


class CallTakenError(SessionConflictError):
    """A save would start a tool call that another session sharing its record (a fork of it,
    or the session it was forked from) claimed first: nothing was written. ``key`` names the
    call (as the agent made it) and ``holder`` the session that holds it."""

    code = "call_taken"

    def __init__(self, message: str, *, key: str, holder: str):
        super().__init__(message)
        self.key = key
        self.holder = holder


class SessionCorruptError(SessionError, StateFormatError):
    """A stored session is malformed or has an unknown format version; nothing was loaded."""


class InvalidSessionIdError(SessionError, ValueError):
    """A session id that is empty, too long, or could escape the store (``../x``, ``/abs``)."""


class StoreUnavailableError(SessionError):
    """The store cannot be reached or cannot write just now (its database is down or
    restarting, its connections are exhausted, its disk is full); nothing was written. Unlike
    "no such session", it says nothing about the session: try again later."""


class ReplayedException(InterludeError):
    """Stands in for an exception from before a pause whose class could not be rebuilt.

    It carries the original type's qualified name, message and traceback text.
    """

    def __init__(self, type_name: str, message: str, traceback_text: str = "") -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message
        self.traceback_text = traceback_text


def refusal_code(exc: BaseException) -> str:
    """The code of a refused answer (``"not_allowed"``, ``"already_answered"``, ...) as every
    door puts it on its wire; ``"error"`` for anything that is not an Interlude error."""
    return exc.code if isinstance(exc, InterludeError) else "error"


class ControlFlowSignal(BaseException):
    """Base class of signals that steer the loop; they are not errors."""


class InterruptSignal(ControlFlowSignal):
    """Raised by ``interrupt(...)`` to stop the current callback or tool; the run pauses."""

    def __init__(self, interrupt: Interrupt) -> None:
        super().__init__(interrupt.id)
        self.interrupt = interrupt
