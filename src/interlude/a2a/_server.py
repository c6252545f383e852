"""The A2A server: each agent of an :class:`~interlude.App` as an A2A agent over JSON-RPC.

Built on the ``a2a-sdk`` server pieces (its JSON-RPC dispatcher and ``RequestHandler``
interface, its card serialisation); the tasks are not kept by the SDK but read from the
Interlude sessions each time, so any process on the same store serves, gets and lists them.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from a2a.server.request_handlers import RequestHandler
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from .._agent import Agent
from ..errors import (
    ConfigurationError,
    InterludeError,
    NotPausedError,
    ResumeError,
    SessionConflictError,
    SessionError,
    StateError,
    refusal_code,
)
from ..operate import Operator
from ..sessions import check_session_id
from ._wire import ANSWERS_KEY, answers_of, answers_part, part_data, task_of

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext
    from a2a.server.events.event_queue import Event

    from ..operate import App, People
    from ..sessions import InboxStore

__all__ = ["AgentTasks", "refused", "served_names"]

ANONYMOUS = "a2a"
"""Who the audit names for an answer when the endpoint takes no tokens."""


def refused(exc: Exception, task_id: str) -> InvalidParamsError:
    """An Interlude refusal (nothing changed) as the A2A error a client gets."""
    return InvalidParamsError(
        f"{type(exc).__name__}: {exc}",
        data={"error": type(exc).__name__, "code": refusal_code(exc), "task_id": task_id},
    )


class AgentTasks(RequestHandler):
    """The A2A request handler of one agent of an App: its sessions are its tasks.

    A message without a task id starts a session (the message's ``context_id`` is its id when
    given, else a new one) and runs the agent on the message's text; a message on a task in
    ``input-required`` answers its questions (checked as ``resume`` checks them: a refusal is
    an ``InvalidParams`` error and changes nothing); a message on a task stopped mid-run
    carries it on (``recover``). Replies are blocking: the task as it is when the run stops.
    """

    def __init__(self, app: App, name: str, store: InboxStore, auth: People | None) -> None:
        self.app = app
        self.name = name
        self.store = store
        self.auth = auth
        self.operator = Operator(app, store)

    # --- messages ------------------------------------------------------------------------

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        message = params.message
        if message.task_id:
            by, groups = self._by(context)
            return await self._continue(message.task_id, message, by, groups)
        return await self._start(message)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        yield await self.on_message_send(params, context)  # one event: the task when it stops

    async def _start(self, message: Message) -> Task:
        session_id = message.context_id or uuid.uuid4().hex
        try:
            check_session_id(session_id)
        except SessionError as exc:
            raise InvalidParamsError(str(exc)) from None
        if await self.store.load(session_id) is not None:
            raise InvalidParamsError(
                f"context {session_id!r} already holds task {session_id!r}: send its messages "
                "with that task id (one task per context)",
                data={"error": "SessionError", "task_id": session_id},
            )
        agent = await self.app.start_async(self.name, session_id, self.store)
        assert isinstance(agent, Agent)  # only agents are served
        try:
            await agent.invoke_async(_prompt(message))
        except SessionConflictError as exc:
            raise refused(exc, session_id) from None
        return task_of(agent, session_id)

    async def _continue(
        self, task_id: str, message: Message, by: str, groups: tuple[str, ...]
    ) -> Task:
        agent = await self._open(task_id)
        try:
            if agent.is_paused:
                answers, shown = answers_of(message, agent.interrupts)
                if not answers:  # {"answers": {}}: settle what has expired
                    await agent.resume_expired_async()
                else:  # the floor's rules, recorded first-wins, then carried on here
                    opened, _ = await self.operator.answer(
                        task_id, answers, by=by, groups=groups, shown=shown
                    )
                    assert isinstance(opened, Agent)
                    agent = opened
            elif agent.needs_recovery:  # stopped mid-run (a retried answer carries it on)
                await self._recover(agent, task_id, _data_answers(message), by, groups)
            elif given := _data_answers(message):  # the floor says who answered them first
                await self.operator.answer(task_id, given, by=by, groups=groups)
            else:
                state = TaskState.Name(task_of(agent, task_id).status.state)
                raise NotPausedError(
                    f"task {task_id!r} is not waiting for input (it is {state}): its answers "
                    "were applied already"
                )
        except (ResumeError, StateError, SessionConflictError) as exc:
            raise refused(exc, task_id) from None
        return task_of(agent, task_id)

    async def _recover(
        self,
        agent: Agent,
        task_id: str,
        given: dict[str, Any],
        by: str,
        groups: tuple[str, ...],
    ) -> None:
        """Carry on a run that stopped mid-run; while another process runs it, answers sent
        with the message are refused as the floor refuses them (answered first, say by whom),
        else the conflict is the refusal."""
        try:
            await agent.recover_async()
        except SessionConflictError:
            if given:
                await self.operator.answer(task_id, given, by=by, groups=groups)
            raise

    # --- tasks ---------------------------------------------------------------------------

    async def _open(self, task_id: str) -> Agent:
        """The agent of session ``task_id``; TaskNotFoundError when there is none of this
        agent's (another agent's session is not this endpoint's task)."""
        try:
            stored = await self.store.load(check_session_id(task_id))
        except SessionError:
            stored = None
        if stored is None or stored.agent != self.name:
            raise TaskNotFoundError(f"no task {task_id!r} of agent {self.name!r}")
        try:
            agent = await self.app.open_async(task_id, self.store)
        except InterludeError as exc:  # a forged or unreadable session (StateIntegrityError)
            raise refused(exc, task_id) from None
        assert isinstance(agent, Agent)
        return agent

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        return task_of(await self._open(params.id), params.id)

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        tasks: list[Task] = []
        for session_id in sorted(await self.store.list_sessions()):
            if params.context_id and session_id != params.context_id:
                continue
            stored = await self.store.load(session_id)
            if stored is None or stored.agent != self.name:
                continue
            try:
                task = task_of(await self._open(session_id), session_id)
            except InvalidParamsError:
                continue  # a session refused on load is not listed (get says why)
            if params.status and task.status.state != params.status:
                continue
            tasks.append(task)
        size = params.page_size or 50
        start = int(params.page_token) if params.page_token.isdigit() else 0
        page = tasks[start : start + size]
        following = start + size if start + size < len(tasks) else None
        return ListTasksResponse(
            tasks=page,
            next_page_token="" if following is None else str(following),
            page_size=size,
            total_size=len(tasks),
        )

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        raise TaskNotCancelableError("Interlude tasks are not canceled over A2A")

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        raise UnsupportedOperationError("replies are blocking: get the task instead")
        yield  # pragma: no cover

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError()

    # --- push notifications: not supported ----------------------------------------------

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError()

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError()

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError()

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError()

    def _by(self, context: ServerCallContext) -> tuple[str, tuple[str, ...]]:
        """Who sends the message and their groups: the bearer token's person (the endpoint
        refuses requests without a valid one when it has tokens); without tokens, ``"a2a"``
        in no group. Fail closed: someone in no group (or unknown) may answer only the
        questions anyone may."""
        if self.auth is None:
            return ANONYMOUS, ()
        headers: Mapping[str, Any] = context.state.get("headers", {})
        approver = self.auth.bearer(headers.get("authorization"))
        if approver is None:
            return ANONYMOUS, ()
        return approver.name, tuple(approver.groups)


def _data_answers(message: Message) -> dict[str, Any]:
    """The answers a message's data part gives (empty: none)."""
    data = answers_part(message)
    return {} if data is None else dict(data[ANSWERS_KEY])


def _prompt(message: Message) -> str:
    """The prompt a message gives: its text parts, and each data part as JSON text."""
    import json

    texts: list[str] = []
    for part in message.parts:
        if part.HasField("text"):
            texts.append(part.text)
        elif part.HasField("data"):
            texts.append(json.dumps(part_data(part)))
    return "\n".join(texts)


def served_names(app: App, agents: Iterable[str] | None) -> list[str]:
    """The agent names to serve: ``agents``, or every agent (not graph) of the app."""
    graphs = set(app.graph_names)
    names = [n for n in app.names if n not in graphs] if agents is None else list(agents)
    for name in names:
        if name not in app or name in graphs:
            raise ConfigurationError(f"{name!r} is not an agent of the app {app!r}")
    return names
