"""What operators' code (the App, the inbox, workers, the CLI) needs of a graph's or swarm's
stored session, read from the store without building the graph.

A graph's session holds its record as JSON under the state key ``interlude.orchestration``
and no messages; each node agent has its own session, ``<graph session id>:node:<node>``.
These helpers tell such sessions apart, read the questions a stored record waits on, find the
graph a node's session belongs to, and check answers before they are recorded or applied.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .._interrupt import Interrupt
from ..errors import ResumeInputError, StateFormatError
from ._base import STATE_KEY, Orchestration
from ._events import node_path

if TYPE_CHECKING:
    from .._messages import JsonValue
    from ..sessions import SessionStore, StoredSession

__all__ = [
    "StoredRecord",
    "bound_to",
    "check_answers_for",
    "describe_node",
    "graph_of",
    "is_orchestration",
    "node_session_parent",
    "read_record",
]

_NODE = ":node:"


def is_orchestration(stored: StoredSession | None) -> bool:
    """Whether ``stored`` is a graph's or swarm's own session (its record, no messages)."""
    return stored is not None and isinstance(stored.state, dict) and STATE_KEY in stored.state


class StoredRecord:
    """What a stored record says, read leniently (the graph, once built, reads it in full):
    ``kind`` ("graph" or "swarm"), ``status`` ("idle", "running" or "paused"), the nodes
    started and not finished (``started``), and the questions it waits on (``questions``,
    empty unless paused)."""

    def __init__(self, data: object) -> None:
        if not isinstance(data, Mapping):
            raise StateFormatError(f"{STATE_KEY}: expected an object")
        self.kind = str(data.get("kind"))
        status = data.get("status")
        self.status = status if isinstance(status, str) else "idle"
        active = data.get("active")
        active = active if isinstance(active, Mapping) else {}
        self.started: tuple[str, ...] = tuple(str(n) for n in active)
        questions: list[Interrupt] = []
        for name, run in active.items():
            listed = run.get("questions", []) if isinstance(run, Mapping) else []
            for k, q in enumerate(listed if isinstance(listed, list) else []):
                questions.append(Interrupt.from_dict(q, f"record.active.{name}.questions[{k}]"))
        self.questions = questions if self.status == "paused" else []


def read_record(stored: StoredSession) -> StoredRecord:
    """The record of a graph's session (StateFormatError if it is not one)."""
    if not is_orchestration(stored):
        raise StateFormatError(f"session {stored.session_id!r} is not a graph's or a swarm's")
    return StoredRecord(stored.state[STATE_KEY])


def node_session_parent(session_id: str) -> tuple[str, str] | None:
    """``(graph session id, node)`` if ``session_id`` has the form of a node's session
    (``<graph session id>:node:<node>``), else None. The store says whether it is one."""
    parent, sep, node = session_id.rpartition(_NODE)
    if not sep or not parent or not node or ":" in node:
        return None
    return parent, node


async def graph_of(store: SessionStore, session_id: str) -> str | None:
    """The session id of the outermost graph whose node (or node's node) ``session_id`` is,
    or None if it is no node's session."""
    found = None
    current = session_id
    while (parts := node_session_parent(current)) is not None:
        parent = parts[0]
        if not is_orchestration(await store.load(parent)):
            break
        found = current = parent
    return found


def bound_to(orchestration: object, store: SessionStore, session_id: str) -> bool:
    """Whether ``orchestration`` (a Graph or Swarm) keeps its record in session
    ``session_id`` of ``store``."""
    return (
        isinstance(orchestration, Orchestration)
        and orchestration.session_id == session_id
        and orchestration._store is store
    )


def check_answers_for(
    questions: list[Interrupt],
    answers: Mapping[str, JsonValue],
    now: float,
    shown: Mapping[str, str] | None = None,
) -> None:
    """Check answers to a graph's questions as ``Agent.resume`` checks an agent's: each id
    pending (UnknownInterruptError), JSON and of the type asked for (ResumeInputError,
    AnswerValidationError), not past its deadline (InterruptExpiredError), and ``shown`` (id
    to digest) the question as it is now (ResumeInputError)."""
    from .._agent import check_answers

    if not isinstance(answers, Mapping) or not answers:
        raise ResumeInputError("answers must be a non-empty map of interrupt id to answer")
    check_answers({q.id: q for q in questions}, answers, now, shown)


def describe_node(question: Interrupt) -> str | None:
    """The node that asked ``question`` ("writer", or "outer/inner"), None if none did."""
    path = node_path(question)
    return "/".join(path) if path else None
