"""A session's history on its page, and where it offers "fork here" (the form's handler,
``fork_here``, is with the other pages).

The session page lists the checkpoints of an agent's session (``Agent.checkpoints``, read from
the session as the page shows it), in words: a tool's JSON result summed up, an answered
question with the call it was about and when it was settled (the trail keeps neither its
reason nor when it was asked).

With an App (``serve --app``) and a session store, a signed-in person may fork the session at
a question: one open now (the new session waits on it too) or an answered one about a tool
call (asked again in the new session). Those forks stand at a question the inbox answers. Not
at a message: such a fork stands before a model call or a batch of calls that nothing in the
inbox carries on (no worker picks it up; ``interlude fork`` and ``recover`` do it from a
shell), nor at a question about no call (``UnknownCheckpointError``: the model would have to
be asked again). Each offer says what the fork will be and asks before it forks: ``POST
/sessions/{id}/fork`` (CSRF-checked) builds the session's agent, forks it there under a new
session id, with that person as who forked, and shows the new session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._messages import Image, Json, Text, ToolResult, ToolUse

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._agent import Checkpoint
    from .._messages import Message
    from ..operate import SessionView
    from ._state import ServerState

__all__ = ["can_fork", "history_rows"]

_FORK_OPEN = "A new session waiting on this same question, to be answered there on its own."
_FORK_ANSWERED = "A new session where this question is asked again, to answer it differently."


def can_fork(state: ServerState, view: SessionView) -> bool:
    """Whether the page offers "fork here": an App to build the agent, a session store, and
    an agent's session (not a graph's, not a workflow)."""
    from ..operate import StoreBackend

    return (
        state.app is not None and isinstance(state.backend, StoreBackend) and (view.kind == "agent")
    )


def history_rows(view: SessionView) -> list[dict[str, Any]]:
    """The session's checkpoints as the page's rows: id, kind, when, summary, and ``fork``,
    what forking there makes (None where the inbox offers no fork: see the module)."""
    from .._agent import checkpoints_of
    from ._questions import clock_text

    if view.kind != "agent":
        return []
    messages = view.messages
    open_now = {q.id for q in view.interrupts}
    settled = {e.interrupt_id: e for e in view.audit if e.interrupt_id}  # the last one wins
    rows = []
    for p in checkpoints_of(messages, view.audit, view.interrupts):
        row = {
            "id": p.id,
            "kind": p.kind.replace("_", " "),
            "when": "" if p.when is None else clock_text(p.when),
            "summary": p.summary,
            "fork": None,
        }
        if p.kind == "question" and p.id not in open_now:
            call = _call_of(p, messages)
            entry = settled.get(p.id)
            if call is not None:
                row["summary"] = f"{p.summary}: {_call_text(call)}"
                row["fork"] = _FORK_ANSWERED
            if entry is not None:
                row["when"] = f"{'expired' if entry.expired else 'answered'} {clock_text(entry.at)}"
        elif p.kind == "question":
            row["fork"] = _FORK_OPEN
        elif p.kind == "tool_result":
            row["summary"] = _results_text(messages[p.message_index])
        rows.append(row)
    return rows


def _call_of(p: Checkpoint, messages: Sequence[Message]) -> ToolUse | None:
    """The tool call an answered question was about: the call of the reply it sits after
    whose id its own id carries (``v1:<source>:<call id>:<name's uuid>``), or None."""
    parts = p.id.split(":", 2)
    if len(parts) < 3 or not parts[0].startswith("v") or not 0 <= p.message_index < len(messages):
        return None
    scope = parts[2].rpartition(":")[0]
    ids = {scope, scope.rpartition("#")[0]} - {""}  # a repeated call id runs as "<id>#<n>"
    message = messages[p.message_index]
    if message.role != "assistant":
        return None
    return next((b for b in message.content if isinstance(b, ToolUse) and b.id in ids), None)


def _call_text(call: ToolUse) -> str:
    from ._questions import plain

    return f"{call.name}({plain(call.input, 60)})"


def _results_text(message: Message) -> str:
    """A batch of tool results in a line: each one's status and content in words (a JSON
    result summed up: ``2 items: (id: 7, ...), ...``)."""
    from ._questions import plain

    shown = []
    for result in (b for b in message.content if isinstance(b, ToolResult)):
        parts = [
            b.text if isinstance(b, Text)
            else plain(b.value, 60) if isinstance(b, Json)
            else f"[image {b.media_type}]" if isinstance(b, Image)
            else ""
            for b in result.content
        ]  # fmt: skip
        shown.append(f"{result.status}: {plain(' '.join(p for p in parts if p), 60)}")
    return "; ".join(shown)
