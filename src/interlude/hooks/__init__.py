"""Hook events and the registry: user code at every step boundary of a run.

Tool batches have two before-events: ``BeforeToolsEvent`` once per batch (approve or cancel
the whole set of tool uses at once), then ``BeforeToolCallEvent`` for each call that goes on.
"""

from ._events import (
    AfterInvocationEvent,
    AfterModelCallEvent,
    AfterToolCallEvent,
    BeforeInvocationEvent,
    BeforeModelCallEvent,
    BeforeToolCallEvent,
    BeforeToolsEvent,
    HookEvent,
    MessageAddedEvent,
)
from ._registry import HookCallback, HookProvider, HookRegistry

__all__ = [
    "AfterInvocationEvent",
    "AfterModelCallEvent",
    "AfterToolCallEvent",
    "BeforeInvocationEvent",
    "BeforeModelCallEvent",
    "BeforeToolCallEvent",
    "BeforeToolsEvent",
    "HookCallback",
    "HookEvent",
    "HookProvider",
    "HookRegistry",
    "MessageAddedEvent",
]
