"""Hook events and the registry: user code at every step boundary of a run."""

from ._events import (
    AfterInvocationEvent,
    AfterModelCallEvent,
    AfterToolCallEvent,
    BeforeInvocationEvent,
    BeforeModelCallEvent,
    BeforeToolCallEvent,
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
    "HookCallback",
    "HookEvent",
    "HookProvider",
    "HookRegistry",
    "MessageAddedEvent",
]
