"""Interlude: agents that stop for a person and carry on later, anywhere.

The public API is the names below plus the modules ``interlude.hooks``, ``interlude.models``,
``interlude.errors`` and ``interlude.testing``. Importing this package loads no provider SDK,
database driver or validation library; those load when first used.
"""

from typing import TYPE_CHECKING

from . import errors, hooks, models
from ._agent import Agent, Prompt
from ._interrupt import Interrupt, InterruptSource
from ._messages import (
    ContentBlock,
    Image,
    Json,
    JsonValue,
    Message,
    Reasoning,
    Role,
    Text,
    ToolResult,
    ToolResultStatus,
    ToolUse,
    Usage,
)
from ._result import AgentResult, StopReason
from ._stream import (
    InterruptRaised,
    MessageAppended,
    ModelResponse,
    ReasoningDelta,
    RunFinished,
    StreamEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
    ToolUseDelta,
    ToolUseStart,
)
from ._tools import AgentTool, FunctionTool, ToolContext, ToolSpec, tool

_OPERATE = frozenset({"AgentSession", "App", "Inbox", "SessionView", "Worker", "WorkerHealth"})

_LATER = {
    "AuditEntry": "._audit",
    "Checkpoint": "._agent",
    "DirectTool": "._agent",
    "ToolCaller": "._agent",
    "UndoPlan": "._agent",
    "UndoStep": "._agent",
    "__version__": "._version",
}

if TYPE_CHECKING:
    from ._agent import Checkpoint, DirectTool, ToolCaller, UndoPlan, UndoStep
    from ._audit import AuditEntry
    from ._version import __version__
    from .operate import AgentSession, App, Inbox, SessionView, Worker, WorkerHealth


def __getattr__(name: str) -> object:
    """The operator floor's names (``App``, ``Worker``, ``Inbox``, ...), ``Checkpoint`` (time
    travel), the audit entry, direct tool calls and the version, loaded on first use:
    ``import interlude`` stays light."""
    if name in _OPERATE:
        from . import operate

        value = getattr(operate, name)
    elif name in _LATER:
        import importlib

        value = getattr(importlib.import_module(_LATER[name], __name__), name)
    else:
        raise AttributeError(f"module 'interlude' has no attribute {name!r}")
    globals()[name] = value  # looked up once
    return value


__all__ = [
    "Agent",
    "AgentResult",
    "AgentSession",
    "AgentTool",
    "App",
    "AuditEntry",
    "Checkpoint",
    "ContentBlock",
    "DirectTool",
    "FunctionTool",
    "Image",
    "Inbox",
    "Interrupt",
    "InterruptRaised",
    "InterruptSource",
    "Json",
    "JsonValue",
    "Message",
    "MessageAppended",
    "ModelResponse",
    "Prompt",
    "Reasoning",
    "ReasoningDelta",
    "Role",
    "RunFinished",
    "SessionView",
    "StopReason",
    "StreamEvent",
    "Text",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallProgress",
    "ToolCallStarted",
    "ToolCaller",
    "ToolContext",
    "ToolResult",
    "ToolResultStatus",
    "ToolSpec",
    "ToolUse",
    "ToolUseDelta",
    "ToolUseStart",
    "UndoPlan",
    "UndoStep",
    "Usage",
    "Worker",
    "WorkerHealth",
    "__version__",
    "errors",
    "hooks",
    "models",
    "tool",
]
