"""The agent and its loop.

Code outside ``_agent/`` imports the names below from this package, never one of its modules.
They load when first used (the codec brings in ``json``), so ``import interlude`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._agent import Agent
    from ._answering import _check_by as check_by
    from ._answering import check_answers
    from ._codec import AgentState, decode_state, decode_stored
    from ._state import Pause

__all__ = [
    "Agent",
    "AgentState",
    "Pause",
    "check_answers",
    "check_by",
    "decode_state",
    "decode_stored",
]

_LAZY = {
    "Agent": ("._agent", "Agent"),
    "AgentState": ("._codec", "AgentState"),
    "Pause": ("._state", "Pause"),
    "check_answers": ("._answering", "check_answers"),
    "check_by": ("._answering", "_check_by"),
    "decode_state": ("._codec", "decode_state"),
    "decode_stored": ("._codec", "decode_stored"),
}


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'interlude._agent' has no attribute {name!r}")
    import importlib

    module, attr = where
    return getattr(importlib.import_module(module, __name__), attr)
