"""Temporal as a place to move paused runs from and to (``interlude move``,
:func:`interlude.operate.move_async`).

Out of Temporal: the workflow's ``move_out`` Update, applied while the run waits on people
with nothing in flight, closes the run (a ``moved`` entry in its trail) and ends the workflow
as moved (``{"stop_reason": "moved", "moved_to", "state"}``), returning the state it left with;
an ``answer`` sent there afterwards is refused with SessionMovedError naming where it went. A
move cut short after that takes the state again from the workflow's result.

Into Temporal: the workflow is started from the state under the same id (the session id).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from temporalio.client import Client
from temporalio.exceptions import WorkflowAlreadyStartedError

from .. import errors
from .._messages import JsonValue
from ._client import ANSWER_TIMEOUT, AgentClient, _closed, _update, moved_result

if TYPE_CHECKING:
    from ..operate import App, Taken

__all__ = ["TemporalPlace"]

DEFAULT_TASK_QUEUE = "agents"


class TemporalPlace:
    """Agent workflows on a Temporal server as a place for :func:`interlude.operate.move`:
    ``TemporalPlace(client, task_queue="agents")`` (a ``temporalio`` Client or an
    :class:`AgentClient`, whose task queue it takes). ``name`` (how the session's old place
    names it) defaults to ``temporal://HOST:PORT`` (``/NAMESPACE`` unless the default)."""

    def __init__(
        self,
        client: Client | AgentClient,
        *,
        task_queue: str | None = None,
        name: str | None = None,
        timeout: float = ANSWER_TIMEOUT,
    ) -> None:
        if isinstance(client, AgentClient):
            task_queue = task_queue or client.task_queue
            client = client.client
        self.client = client
        self.task_queue = task_queue or DEFAULT_TASK_QUEUE
        self.timeout = timeout
        self.name = name or _name_of(client)

    def __repr__(self) -> str:
        return f"TemporalPlace({self.name!r}, task_queue={self.task_queue!r})"

    async def take_out(self, session_id: str, *, to: str, by: str, app: App | None) -> Taken:
        from ..operate import Taken

        if await _closed(self.client, session_id) is not None:
            moved = await moved_result(self.client, session_id)
            if moved is not None and moved[0] == to and moved[1] is not None:
                return Taken(moved[1])  # a move cut short after the workflow left: again
        request = {"to": to, "from": self.name, "by": by}
        out = await _update(
            self.client,
            session_id,
            "move_out",
            [request],
            self.timeout,
            f"task queue {self.task_queue!r}",
            lambda how: errors.NotPausedError(
                f"workflow {session_id!r} is closed ({how}): there is no run to move"
            ),
        )
        state = out.get("state")
        if not isinstance(state, dict):  # pragma: no cover - the Update always returns it
            raise errors.StateFormatError(f"workflow {session_id!r} gave no state to move")
        return Taken(state)

    async def put_in(self, session_id: str, state: dict[str, JsonValue]) -> None:
        agent = state.get("agent")
        if not isinstance(agent, str):
            raise errors.ConfigurationError(
                f"session {session_id!r} records no agent name: a workflow needs one (carry it "
                "on once in a store with --agent first)"
            )
        agents = AgentClient(self.client, task_queue=self.task_queue)
        try:
            await agents.start(agent, state=state, workflow_id=session_id)
        except WorkflowAlreadyStartedError:
            if await _same_questions(agents, session_id, state):
                return  # put in already (a move that stopped before closing its source)
            raise errors.SessionConflictError(
                f"a workflow {session_id!r} is running on {self.name} already: nothing was moved"
            ) from None


async def _same_questions(agents: AgentClient, session_id: str, state: dict[str, Any]) -> bool:
    """Whether the running workflow waits on exactly the questions ``state``'s pause asks."""
    pause = state.get("pause")
    asked = pause.get("interrupts") if isinstance(pause, dict) else None
    ids = {q.get("id") for q in asked if isinstance(q, dict)} if isinstance(asked, list) else set()
    return bool(ids) and {i.id for i in await agents.pending(session_id)} == ids


def _name_of(client: Client) -> str:
    config = client.service_client.config
    namespace = client.namespace
    return f"temporal://{config.target_host}" + ("" if namespace == "default" else f"/{namespace}")
