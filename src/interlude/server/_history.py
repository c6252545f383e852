"""A session's history on its page, and whether it offers "fork here" (the form's handler,
``fork_here``, is with the other pages).

The session page lists the checkpoints of an agent's session (``Agent.checkpoints``, read from
the session as the page shows it). With an App (``serve --app``) and a session store, a
signed-in person may fork the session at a question or a message checkpoint: ``POST
/sessions/{id}/fork`` (CSRF-checked) builds the session's agent, forks it there under a new
session id, with that person as who forked, and shows the new session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..operate import SessionView
    from ._state import ServerState

__all__ = ["FORKABLE", "can_fork", "history_rows"]

FORKABLE = ("prompt", "model_reply", "tool_result", "question")
"""The kinds of checkpoint the page offers to fork at."""


def can_fork(state: ServerState, view: SessionView) -> bool:
    """Whether the page offers "fork here": an App to build the agent, a session store, and
    an agent's session (not a graph's, not a workflow)."""
    from ..operate import StoreBackend

    return (
        state.app is not None and isinstance(state.backend, StoreBackend) and (view.kind == "agent")
    )


def history_rows(view: SessionView) -> list[dict[str, Any]]:
    """The session's checkpoints as the page's rows (id, kind, when, summary, forkable)."""
    from .._agent import checkpoints_of
    from ._questions import clock_text

    if view.kind != "agent":
        return []
    points = checkpoints_of(view.messages, view.audit, view.interrupts)
    return [
        {
            "id": p.id,
            "kind": p.kind.replace("_", " "),
            "when": "" if p.when is None else clock_text(p.when),
            "summary": p.summary,
            "forkable": p.kind in FORKABLE,
        }
        for p in points
    ]
