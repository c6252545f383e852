"""The agent and its loop.

The names below are the seam integrations use (Temporal, tracing, the inbox, the CLI, the
server): typed requests and outcomes for where model calls and tool bodies run, the observer of
runs, the state codec and the checks a resume applies. Everything else in ``_agent/`` is
private to it: nothing outside this package imports its modules or touches an agent's private
attributes. The codec and the answer checks load on first use (``import interlude`` stays light).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._agent import Agent, Prompt
from ._executor import (
    LOCAL,
    Asked,
    Executor,
    LocalExecutor,
    Lost,
    ModelCall,
    Raised,
    Returned,
    StateDelta,
    ToolOutcome,
    ToolRequest,
    outcome_from_json,
)
from ._spec import respec

if TYPE_CHECKING:
    from ._answering import (
        check_answers,
        check_by,
        declines,
        person_key,
        resume_plan,
        same_person,
        vote_problem,
    )
    from ._approval import is_approval, remembered_decisions
    from ._codec import FORMAT, Decoded, decode_state, decode_stored
    from ._history import Checkpoint, checkpoints_of
    from ._moved import (
        MOVED,
        mark_moved,
        moved_claim,
        moved_entry,
        moved_error,
        moved_to,
        moving_claim,
        moving_error,
        moving_to,
    )
    from ._observe import Observer, RunInfo, install
    from ._signing import as_key
    from ._standing import AgentState
    from ._state import Position
    from ._transitions import Abandonable
    from ._undo_plan import UndoPlan, UndoStep

__all__ = [
    "FORMAT",
    "LOCAL",
    "MOVED",
    "Abandonable",
    "Agent",
    "AgentState",
    "Checkpoint",
    "Decoded",
    "Asked",
    "DirectTool",
    "Executor",
    "LocalExecutor",
    "Lost",
    "ModelCall",
    "Observer",
    "Position",
    "Prompt",
    "Raised",
    "Returned",
    "RunInfo",
    "StateDelta",
    "ToolCaller",
    "ToolOutcome",
    "ToolRequest",
    "UndoPlan",
    "UndoStep",
    "as_key",
    "check_answers",
    "check_by",
    "declines",
    "decode_state",
    "checkpoints_of",
    "decode_stored",
    "install",
    "is_approval",
    "outcome_from_json",
    "load_all",
    "mark_moved",
    "moved_claim",
    "moved_entry",
    "moved_error",
    "moved_to",
    "moving_claim",
    "moving_error",
    "moving_to",
    "person_key",
    "remembered_decisions",
    "respec",
    "resume_plan",
    "same_person",
    "vote_problem",
]

_LAZY = {
    "MOVED": "._moved",
    "mark_moved": "._moved",
    "moved_claim": "._moved",
    "moved_entry": "._moved",
    "moved_error": "._moved",
    "moved_to": "._moved",
    "moving_claim": "._moved",
    "moving_error": "._moved",
    "moving_to": "._moved",
    "Abandonable": "._transitions",
    "DirectTool": "._direct",
    "ToolCaller": "._direct",
    "FORMAT": "._codec",
    "AgentState": "._standing",
    "Decoded": "._codec",
    "decode_state": "._codec",
    "decode_stored": "._codec",
    "Checkpoint": "._history",
    "checkpoints_of": "._history",
    "as_key": "._signing",
    "check_answers": "._answering",
    "check_by": "._answering",
    "resume_plan": "._answering",
    "vote_problem": "._answering",
    "person_key": "._answering",
    "same_person": "._answering",
    "declines": "._answering",
    "is_approval": "._approval",
    "remembered_decisions": "._approval",
    "Position": "._state",
    "Observer": "._observe",
    "RunInfo": "._observe",
    "install": "._observe",
    "UndoPlan": "._undo_plan",
    "UndoStep": "._undo_plan",
}

_LOOP_MODULES = (
    "._answering",
    "._batch",
    "._codec",
    "._conversation",
    "._loop",
    "._moved",
    "._output",
    "._persist",
    "._results",
    "._running",
    "._signing",
    "._state",
    "._subagent",
    "._transitions",
    "._undo_plan",
    "._undoing",
)


def load_all() -> None:
    """Import every module the loop loads lazily, now (a workflow sandbox passes them through
    once instead of loading a second copy on first use)."""
    import importlib

    for name in _LOOP_MODULES:
        importlib.import_module(name, __name__)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module, __name__), name)
