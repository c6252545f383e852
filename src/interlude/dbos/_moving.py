"""DBOS as a place to move paused runs from and to (``interlude move``,
:func:`interlude.operate.move_async`).

Out of DBOS: a move-out message, sent on the answers' topic (taken in order with them, so no
answer applies on both sides) with the pause number the sender saw, closes the run while it
waits on people with nothing in flight: a ``moved`` entry in its trail, the state it left with
published under the message's ticket, the workflow ended as moved (``{"stop_reason": "moved",
"moved_to", "state"}``); an answer sent there afterwards is refused with SessionMovedError
naming where it went. A move cut short after that takes the state again from the result. A
move-out taken late (the run went on meanwhile, or its sender gave up) changes nothing.

Into DBOS: the workflow is started from the state under the same id (the session id). A
session coming back to the DBOS it was moved away from takes its old workflow id again (the
ended workflow is deleted first, when the trail coming back extends the one it left with).
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from .. import errors
from .._messages import JsonValue
from . import _common as c
from ._client import ENDED, AnswerTimeoutError, _client, _outcome, _status, result, start

if TYPE_CHECKING:
    from dbos import WorkflowStatus

    from ..operate import App, Taken

__all__ = ["DbosPlace"]

MOVE_TIMEOUT = 30.0
"""How long a move out waits for the run to take it (seconds)."""


class DbosPlace:
    """Agent workflows on a DBOS system database (PostgreSQL, where the workers run) as a
    place for :func:`interlude.operate.move`: ``DbosPlace("postgresql://...")``. ``name``
    (how the session's old place names it) defaults to ``dbos:URL`` (its password left out)."""

    def __init__(self, url: str, *, name: str | None = None, timeout: float = MOVE_TIMEOUT) -> None:
        self.url = url
        self.timeout = timeout
        self.name = name or "dbos:" + _without_password(url)

    def __repr__(self) -> str:
        return f"DbosPlace({self.name!r})"

    def connect(self) -> None:
        """Open this process's client on the system database now and read it once (its
        error if it cannot: e.g. no database, or no DBOS tables, before a worker first ran
        on it)."""
        _client(self.url).list_workflows(
            workflow_ids=["-"], load_input=False, load_output=False, limit=1
        )

    async def take_out(self, session_id: str, *, to: str, by: str, app: App | None) -> Taken:
        """Ask the run to leave (the workflow signs the ``moved`` entry with its agent's key:
        ``app`` is not needed)."""
        from ..operate import Taken

        client = _client(self.url)
        status = await _status(client, session_id, output=True)
        if status is None:
            raise errors.SessionError(f"there is no run {session_id!r} on {self.name}")
        if status.status in ENDED:
            return Taken(self._left(session_id, status, to))
        attributes = status.attributes or {}
        if not attributes.get(c.PENDING) or not isinstance(attributes.get(c.PAUSE), int):
            raise errors.AgentBusyError(
                f"run {session_id!r} is not waiting on anyone now (it is going, or not started "
                "yet): move it once it pauses; nothing was changed"
            )
        ticket = uuid.uuid4().hex
        at = time.time()
        message: dict[str, JsonValue] = {
            "ticket": ticket,
            c.MOVE_OUT: {"to": to, "from": self.name, "by": by},
            "pause": attributes[c.PAUSE],
            "at": at,
            "until": at + self.timeout,
        }
        await client.send_async(session_id, message, c.TOPIC, idempotency_key=ticket)
        try:
            out = await _outcome(client, session_id, ticket, {}, self.timeout)
        except AnswerTimeoutError:
            raise AnswerTimeoutError(
                f"run {session_id!r} did not take the move within {self.timeout} s (is a worker "
                "running it?): nothing was moved, and the move will not apply later"
            ) from None
        if "error" in out:
            raise c.refusal_from_dict(out["error"])
        state = out.get("state")
        if not isinstance(state, dict):
            raise errors.StateFormatError(f"run {session_id!r} gave no state to move")
        await result(self.url, session_id, timeout=self.timeout)  # closed: it ends right after
        return Taken(state)

    def _left(self, session_id: str, status: WorkflowStatus, to: str) -> dict[str, JsonValue]:
        """The state a run that ended moved to ``to`` left with (a move cut short: again);
        else the error saying why the ended run cannot move."""
        output = status.output if isinstance(status.output, dict) else {}
        went, state = output.get("moved_to"), output.get("state")
        if went == to and isinstance(state, dict):
            return state
        if isinstance(went, str):
            raise errors.SessionMovedError(
                f"session {session_id!r} was moved to {went} already", target=went
            )
        raise errors.NotPausedError(
            f"run {session_id!r} ended ({status.status.lower()}): there is no run to move"
        )

    async def put_in(self, session_id: str, state: dict[str, JsonValue]) -> None:
        """Start the run from ``state`` under ``session_id`` (the worker imports it)."""
        agent = state.get("agent")
        if not isinstance(agent, str):
            raise errors.ConfigurationError(
                f"session {session_id!r} records no agent name: a workflow needs one (carry it "
                "on once in a store with --agent first)"
            )
        client = _client(self.url)
        existing = await _status(client, session_id, output=True)
        if existing is not None:
            if _started_from(existing) == state:
                return  # put in already (a move that stopped before closing its source)
            if not _came_back(existing, state):
                raise errors.SessionConflictError(
                    f"{self.name} holds a run {session_id!r} already: nothing was moved"
                )
            await client.delete_workflow_async(session_id)  # its old run, moved away
        await start(self.url, agent, session_id, state=state)


def _started_from(status: WorkflowStatus) -> Any:
    """The state the workflow was started from (None: a prompt, or unreadable)."""
    inputs: Any = status.input
    args = inputs.get("args") if isinstance(inputs, dict) else getattr(inputs, "args", None)
    if isinstance(args, list | tuple) and args and isinstance(args[0], dict):
        return args[0].get("state")
    return None


def _came_back(status: WorkflowStatus, state: dict[str, JsonValue]) -> bool:
    """Whether ``state`` is the session the ended workflow was moved away with, coming back
    (its trail extends the one the workflow left with), or put back by a move its target
    refused (the very trail it left with)."""
    output = status.output if isinstance(status.output, dict) else {}
    left = output.get("state")
    if status.status != "SUCCESS" or not isinstance(output.get("moved_to"), str):
        return False
    before = left.get("audit") if isinstance(left, dict) else None
    after = state.get("audit")
    if not isinstance(before, list) or not isinstance(after, list):
        return False
    return len(after) >= len(before) and after[: len(before)] == before  # (equal: put back)


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}@{host}" if user else host))
