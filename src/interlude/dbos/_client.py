"""The client side: start runs, list their questions, answer them, from a process that never
launches DBOS (a ``DBOSClient`` on the system database: no workflow code, no recovery).

An answer is a message to the run's workflow (idempotency key: its ticket, so a repeated send
is dropped); the workflow checks it as ``resume`` would and publishes the outcome under the
ticket; the client waits for that event and raises the embedded error of a refused answer.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping
from typing import Any

from dbos import DBOSClient, EnqueueOptions, WorkflowStatus

from .. import errors
from .._agent import moved_error
from .._interrupt import Interrupt
from .._messages import JsonValue
from ..sessions import PendingInterrupt
from . import _common as c

__all__ = ["AnswerTimeoutError", "answer", "close_clients", "pending", "result", "start"]

ENDED = ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")


class AnswerTimeoutError(errors.SessionError, TimeoutError):
    """:func:`answer` waited longer than its ``timeout`` for the run to take the answer: no
    worker runs the session now, or it is busy (between pauses). The answer may still be
    applied later: see :func:`pending` / :func:`result`."""


_CLIENTS: dict[str, DBOSClient] = {}


def _client(url: str) -> DBOSClient:
    """One client per system database for this process (it listens for events)."""
    found = _CLIENTS.get(url)
    if found is None:
        found = DBOSClient(
            system_database_url=url,
            serializer=c.SERIALIZER,
            use_listen_notify=True,
            application_name=c.APP_NAME,
        )
        _CLIENTS[url] = found
    return found


def close_clients() -> None:
    """Close the clients this process opened."""
    while _CLIENTS:
        _, client = _CLIENTS.popitem()
        client.destroy()


async def start(
    url: str,
    agent: str,
    session_id: str,
    prompt: str | None = None,
    *,
    state: Mapping[str, JsonValue] | None = None,
    now: float | None = None,
) -> str:
    """Start agent ``agent`` of the workers' App on ``prompt`` (a text prompt), or carry on
    ``state`` (an ``export_state()``, paused or stopped between steps: a session moved here),
    as session ``session_id`` (the workflow id; a second start of the same id attaches to the
    first). Returns the id. The worker imports ``state`` as ``Agent.import_state`` does (its
    format, its signatures with the agent's key, its tools)."""
    if (prompt is None) == (state is None):
        raise ValueError("start takes a prompt or a state (export_state()), one of the two")
    request: dict[str, JsonValue] = {
        "agent": agent,
        "prompt": prompt,
        "state": None if state is None else dict(state),
        "now": time.time() if now is None else now,
    }
    options: EnqueueOptions = {
        "workflow_name": c.WORKFLOW,
        "queue_name": c.QUEUE,
        "workflow_id": session_id,
        "app_version": c.VERSION,
    }
    await _client(url).enqueue_async(options, request)
    return session_id


async def pending(url: str, *, agent: str | None = None) -> list[PendingInterrupt]:
    """The questions of every paused run (read from the workflows' attributes: no worker is
    asked), oldest pause first."""
    attributes: dict[str, Any] = {c.PENDING: True}
    if agent is not None:
        attributes[c.AGENT] = agent
    found = await _client(url).list_workflows_async(
        name=c.WORKFLOW,
        status="PENDING",
        attributes=attributes,
        load_input=False,
        load_output=False,
    )
    out: list[PendingInterrupt] = []
    for status in found:
        attrs = status.attributes or {}
        raised = float(attrs.get(c.PAUSED_AT) or 0.0)
        for question in attrs.get(c.QUESTIONS) or ():
            out.append(
                PendingInterrupt(
                    session_id=status.workflow_id,
                    interrupt=Interrupt.from_dict(question),
                    raised_at=raised,
                    agent=attrs.get(c.AGENT),
                )
            )
    out.sort(key=lambda p: p.raised_at)
    return out


async def answer(
    url: str,
    session_id: str,
    answers: Mapping[str, JsonValue],
    *,
    by: str | None = None,
    shown: Mapping[str, str] | None = None,
    ticket: str | None = None,
    timeout: float = 30.0,  # noqa: ASYNC109 (also the outcome's polling deadline)
) -> None:
    """Answer questions of the paused run ``session_id`` (``{interrupt id: answer}``) as
    ``by``. Returns once the run took the answers (it then carries on); a refused answer
    raises the error the embedded ``resume`` raises (AnswerValidationError,
    AlreadyAnsweredError, NotPausedError...) and changes nothing. ``ticket`` (default: a new
    one) makes a repeated call the same answer."""
    client = _client(url)
    ticket = ticket or uuid.uuid4().hex
    message: dict[str, JsonValue] = {
        "ticket": ticket,
        "answers": dict(answers),
        "by": by,
        "shown": None if shown is None else dict(shown),
        "at": time.time(),
    }
    status = await _status(client, session_id, output=False)
    if status is None:
        raise errors.NotPausedError(f"no run {session_id!r} on this DBOS system database")
    if status.status not in ENDED:
        await client.send_async(session_id, message, c.TOPIC, idempotency_key=ticket)
    out = await _outcome(client, session_id, ticket, answers, timeout)
    if "error" in out:
        raise c.refusal_from_dict(out["error"])


async def _outcome(
    client: DBOSClient,
    session_id: str,
    ticket: str,
    answers: Mapping[str, JsonValue],
    timeout: float,  # noqa: ASYNC109 (a polling deadline)
) -> dict[str, Any]:
    """The outcome the run published for ``ticket`` (or the refusal of a run that ended)."""
    key = c.outcome_key(ticket)
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        out = await client.get_event_async(session_id, key, timeout_seconds=max(0.0, min(1, left)))
        if isinstance(out, dict):
            return out
        status = await _status(client, session_id, output=True)
        if status is not None and status.status in ENDED:
            out = await client.get_event_async(session_id, key, timeout_seconds=0)
            return out if isinstance(out, dict) else _ended(status, answers)
        if time.monotonic() >= deadline:
            raise AnswerTimeoutError(
                f"no outcome for the answer to run {session_id!r} within {timeout} s: is a "
                "worker running it? The answer may still be applied later; see pending()"
            )


def _ended(status: WorkflowStatus, answers: Mapping[str, JsonValue]) -> dict[str, Any]:
    """The refusal of an answer to a run that ended (moved away: where it went)."""
    output = status.output if isinstance(status.output, dict) else {}
    went = output.get("moved_to")
    if isinstance(went, str):
        return c.refusal_to_dict(moved_error(status.workflow_id, went))
    answered = output.get("answered") or {}
    for interrupt_id in answers:
        if interrupt_id in answered:
            who = answered[interrupt_id]
            return c.refusal_to_dict(
                errors.AlreadyAnsweredError(
                    f"question {interrupt_id!r} was answered already"
                    + (f" (by {who})" if who else ""),
                    interrupt_id=interrupt_id,
                    by=who,
                )
            )
    how = status.status.lower()
    return c.refusal_to_dict(
        errors.NotPausedError(f"the run ended ({how}); there is nothing to answer")
    )


async def _status(client: DBOSClient, session_id: str, *, output: bool) -> WorkflowStatus | None:
    found = await client.list_workflows_async(
        workflow_ids=[session_id], load_input=False, load_output=output
    )
    return found[0] if found else None


async def result(
    url: str,
    session_id: str,
    *,
    timeout: float = 60.0,  # noqa: ASYNC109 (a polling deadline)
) -> dict[str, Any]:
    """The run's result once it ended (``{"stop_reason", "text", "interrupts", "answered",
    "state"}``; a run moved away: ``stop_reason`` "moved", ``moved_to``, the state it left
    with); TimeoutError after ``timeout``; the run's error if it failed."""
    client = _client(url)
    deadline = time.monotonic() + timeout
    while True:
        status = await _status(client, session_id, output=True)
        if status is not None and status.status == "SUCCESS":
            out = status.output
            return out if isinstance(out, dict) else {"output": out}
        if status is not None and status.status in ENDED:
            raise RuntimeError(f"run {session_id!r} ended {status.status}: {status.error!r}")
        if time.monotonic() >= deadline:
            raise TimeoutError(f"run {session_id!r} did not end within {timeout} s")
        await asyncio.sleep(0.05)
