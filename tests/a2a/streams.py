"""Helpers of the A2A streaming, push and cancel tests: a2a-sdk clients that stream, the events
of a stream, an app whose tool waits at a gate and one whose question has approvers, and a
loopback webhook that checks a notification's token as a receiver must.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from a2a.client import Client, ClientConfig, create_client
from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from google.protobuf import json_format

from interlude import Agent, AgentSession, App, ToolUse, tool
from interlude.hooks import BeforeToolCallEvent
from interlude.testing import ScriptedModel
from tests.support.serving import serving

from .apps import build_app, effect
from .wire import BASE, TOKEN

BO_TOKEN = "bo-token-0123456789abcdef"
"""A token of bo, who is in no group."""
PEOPLE = {TOKEN: {"name": "ana", "groups": ["ops"]}, BO_TOKEN: "bo"}
WORKING = TaskState.TASK_STATE_WORKING
CANCELED = TaskState.TASK_STATE_CANCELED


async def streaming_client(
    where: object, agent: str, token: str | None = TOKEN, *, wait: float = 60.0
) -> Client:
    """The a2a-sdk client of ``agent``, streaming: ``where`` is an in-process application
    (its replies come whole, when the stream ends) or the base URL of a served one. ``wait``:
    the longest a read may wait (a stream that follows a slow run waits)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if isinstance(where, str):
        http = httpx.AsyncClient(headers=headers, timeout=wait)
        base = where
    else:
        transport = httpx.ASGITransport(where)  # type: ignore[arg-type]
        http = httpx.AsyncClient(transport=transport, headers=headers, timeout=wait)
        base = BASE
    OPEN.append(http)
    return await create_client(
        f"{base}/a2a/{agent}/", ClientConfig(streaming=True, httpx_client=http)
    )


OPEN: list[httpx.AsyncClient] = []
"""The HTTP clients :func:`streaming_client` made (the a2a-sdk client does not close a client
it was given): closed by :func:`close_all` at the end of each test."""


async def close_all() -> None:
    while OPEN:
        await OPEN.pop().aclose()


def message(*parts: Part, task_id: str = "", context_id: str = "") -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            message_id=uuid.uuid4().hex,
            role=Role.ROLE_USER,
            parts=list(parts),
            task_id=task_id,
            context_id=context_id,
        )
    )


async def events_of(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    return [event async for event in stream]


def kind(event: StreamResponse) -> str:
    """``task``, ``status_update``, ``artifact_update`` or ``message``."""
    which: str | None = event.WhichOneof("payload")
    assert which is not None, event
    return which


def state_of(event: StreamResponse) -> int:
    """The task state an event carries (a task's or a status update's)."""
    if event.HasField("task"):
        return event.task.status.state
    assert event.HasField("status_update"), event
    return event.status_update.status.state


def status_data(event: StreamResponse) -> dict[str, Any]:
    """The data part of a status update's message (empty when it has none)."""
    for part in event.status_update.status.message.parts:
        if part.HasField("data"):
            return dict(json_format.MessageToDict(part.data))
    return {}


def error_data(exc: BaseException) -> dict[str, Any]:
    """What an a2a-sdk error carries: the data the server sent (an ``ErrorInfo`` list, whose
    ``metadata`` holds Interlude's ``error`` and ``code``, or the plain dict)."""
    data: Any = getattr(exc, "data", None)
    if isinstance(data, list):
        for item in data:
            if isinstance(item, dict) and isinstance(item.get("metadata"), dict):
                return dict(item["metadata"])
    return dict(data) if isinstance(data, dict) else {}


# --- apps ------------------------------------------------------------------------------------


@dataclass
class Gate:
    """Where the ``slow`` tool waits: ``entered`` once a run is in it, ``released`` lets it
    finish (events of threading: the server may run in another thread)."""

    entered: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)


GATE = Gate()


@tool
async def slow(step: str) -> str:
    """Do a slow step.

    Args:
        step: Which step.
    """
    GATE.entered.set()
    while not GATE.released.is_set():  # noqa: ASYNC110 (set from another thread)
        await asyncio.sleep(0.01)
    effect(f"slow {step}")
    return f"{step} done"


def guard(event: BeforeToolCallEvent) -> None:
    """An approval only members of ``ops`` may give."""
    path = event.tool_use.input.get("path")
    answer = event.interrupt(
        "approve", reason=f"delete {path}?", response_type=bool, approvers=["ops"]
    )
    if answer is not True:
        event.cancel("not approved")


def ask_first(event: BeforeToolCallEvent) -> None:
    """An approval anyone may give."""
    if event.interrupt("approve", reason="run the slow step?", response_type=bool) is not True:
        event.cancel("not approved")


def streaming_app() -> App:
    """The A2A tests' app (``ops``, ``forms``, ``chief``), with ``slow`` (a tool that waits at
    the gate), ``gated`` (the same tool, approved first) and ``guarded`` (an approval for
    members of ``ops`` only)."""
    app = build_app()

    @app.agent("gated")
    def gated(session: AgentSession) -> Agent:
        model = ScriptedModel(
            [[ToolUse("w2", "slow", {"step": "migrate"})], "Migrated."], resumable=True
        )
        agent = Agent(model, tools=[slow], session=session.store, session_id=session.id)
        agent.hooks.add_callback(BeforeToolCallEvent, ask_first)
        return agent

    @app.agent("slow")
    def slow_agent(session: AgentSession) -> Agent:
        model = ScriptedModel(
            [[ToolUse("w1", "slow", {"step": "rebuild"})], "Rebuilt."], resumable=True
        )
        return Agent(model, tools=[slow], session=session.store, session_id=session.id)

    @app.agent("guarded")
    def guarded(session: AgentSession) -> Agent:
        from .apps import delete

        model = ScriptedModel(
            [[ToolUse("g1", "delete", {"path": "/srv/data"})], "Deleted."], resumable=True
        )
        agent = Agent(model, tools=[delete], session=session.store, session_id=session.id)
        agent.hooks.add_callback(BeforeToolCallEvent, guard)
        return agent

    return app


# --- a webhook -------------------------------------------------------------------------------


@dataclass
class Webhook:
    """A client's webhook receiver, as A2A asks one to be: a notification is taken (2xx) only
    with the token and credentials the client registered, else refused with 401."""

    url: str
    token: str
    secret: str
    taken: list[dict[str, Any]] = field(default_factory=list)
    """Each notification taken: ``{"headers": ..., "body": ...}``."""
    refused: list[dict[str, Any]] = field(default_factory=list)
    """Each one refused (wrong or missing token or credentials)."""
    busy: int = 0
    """How many good notifications to answer 503 first (then taken)."""
    unavailable: int = 0
    """How many it answered 503."""


@contextmanager
def webhook(
    token: str = "hook-token-1", secret: str = "hook-secret-1", *, busy: int = 0
) -> Iterator[Webhook]:
    """A webhook served by uvicorn on a loopback port, until the block ends (its first
    ``busy`` good notifications are answered 503: it is overloaded)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    hook = Webhook("", token, secret, busy=busy)
    lock = threading.Lock()

    async def receive(request: Request) -> JSONResponse:
        import hmac
        import json

        body = json.loads(await request.body())
        seen = {"headers": dict(request.headers), "body": body}
        given = request.headers.get("x-a2a-notification-token", "")
        auth = request.headers.get("authorization", "")
        ok = hmac.compare_digest(given, hook.token) and hmac.compare_digest(
            auth, f"Bearer {hook.secret}"
        )
        with lock:
            if ok and hook.unavailable < hook.busy:
                hook.unavailable += 1
                return JSONResponse({"error": "busy"}, status_code=503)
            (hook.taken if ok else hook.refused).append(seen)
        if not ok:
            return JSONResponse({"error": "unauthenticated"}, status_code=401)
        return JSONResponse({"ok": True})

    with serving(Starlette(routes=[Route("/hook", receive, methods=["POST"])])) as base:
        hook.url = f"{base}/hook"
        yield hook


async def loopback_only(url: str) -> bool:
    """The tests' webhook screen: their loopback webhook only."""
    return url.startswith("http://127.0.0.1:")
