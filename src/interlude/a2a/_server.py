"""The A2A server: each agent of an :class:`~interlude.App` as an A2A agent over JSON-RPC.

Built on the ``a2a-sdk`` server pieces (its JSON-RPC dispatcher and ``RequestHandler``
interface, its card serialisation, its push-notification config store); the tasks are not kept
by the SDK but read from the Interlude sessions each time, so any process on the same store
serves, gets and lists them. The runs this process makes are tasks of their own
(:mod:`._live`): streamed to ``message/stream`` and ``tasks/resubscribe``, told to the tasks'
webhooks (:mod:`._push`) when they stop, stopped by ``tasks/cancel`` (:mod:`._cancel`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

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
    TaskStatus,
)
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    InvalidParamsError,
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
from ._cancel import Canceling, marking
from ._events import ENDS, final_events, stamped, status_event
from ._live import LiveRun, Runs, Source
from ._push import Pushes
from ._wire import ANSWERS_KEY, answers_of, answers_part, part_data, task_of

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext
    from a2a.server.events.event_queue import Event

    from .._messages import JsonValue
    from ..operate import App, People
    from ..sessions import InboxStore
    from ._events import Update
    from ._push import UrlCheck

__all__ = ["AgentTasks", "refused", "served_names"]

_log = logging.getLogger("interlude.a2a")

ANONYMOUS = "a2a"
"""Who the audit names for an answer when the endpoint takes no tokens."""

WATCH_EVERY = 0.5
"""Seconds between two reads of a task a resubscription follows while another process runs it."""

_REFUSALS = (ResumeError, StateError, SessionConflictError)
"""What the floor and the agent refuse a message with, having changed nothing."""

T = TypeVar("T")


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
    ``input-required`` answers its questions through the operator floor (a refusal is an
    ``InvalidParams`` error and changes nothing); a message on a task stopped mid-run carries
    it on (``recover``). ``message/send`` replies with the task as the run leaves it (at once,
    ``working``, with ``configuration.return_immediately``); ``message/stream`` streams it.
    """

    def __init__(
        self,
        app: App,
        name: str,
        store: InboxStore,
        auth: People | None,
        *,
        push_url_check: UrlCheck | None = None,
    ) -> None:
        self.app = app
        self.name = name
        self.cancel_marks: dict[str, dict[str, JsonValue]] = {}
        """The cancel marks of the sessions being canceled now (see ``_cancel``)."""
        self.store = marking(store, self.cancel_marks)
        """The sessions, as this door's runs save them (a cancel's mark rides their saves)."""
        self.auth = auth
        self.operator = Operator(app, self.store)
        self.runs = Runs()
        self.pushes = Pushes(lambda context: self._by(context)[0], push_url_check)
        self.canceling = Canceling(self)

    # --- messages ------------------------------------------------------------------------

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        at_once = params.configuration.return_immediately
        live = await self._begin(params, context, streamed=at_once)  # refusals come first
        if at_once:  # the task as it stands once the run got past its refusals
            await self._settled(live.started, live.task_id)
            return live.snapshot()[0]
        return await self._settled(live.outcome, live.task_id)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """The task (``working``), its updates as the run goes, and the task as the run leaves
        it; a refusal is an error before the first event, as ``message/send`` gives it."""
        live = await self._begin(params, context, streamed=True)
        await self._settled(live.started, live.task_id)
        yield live.initial
        async for update in live.follow(0):
            yield update

    async def _settled(self, future: asyncio.Future[T], task_id: str) -> T:
        """What ``future`` of a run gives (its refusals as A2A errors); a request that goes
        away stops waiting, never the run."""
        try:
            return await asyncio.shield(future)
        except _REFUSALS as exc:
            raise refused(exc, task_id) from None

    async def _begin(
        self, params: SendMessageRequest, context: ServerCallContext, *, streamed: bool
    ) -> LiveRun:
        """Start the run a message asks for (refusals known before it starts are raised);
        the webhook its configuration gives is registered first."""
        message = params.message
        task_id = message.task_id
        try:
            if task_id:
                by, groups = self._by(context)
                agent = await self._open(task_id)
                source = self._continuing(agent, task_id, message, by, groups, streamed)
            else:
                task_id, source = await self._starting(message, streamed)
        except _REFUSALS as exc:
            raise refused(exc, task_id) from None
        if params.configuration.HasField("task_push_notification_config"):
            config = params.configuration.task_push_notification_config
            await self.pushes.set(task_id, config, context)
        return self.runs.start(task_id, source, partial(self._ended, task_id), self._on_end)

    async def _starting(self, message: Message, streamed: bool) -> tuple[str, Source]:
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
        prompt = _prompt(message)
        what = "The run is under way."
        if streamed:
            return session_id, Source(what, stream=partial(agent.stream_async, prompt))
        return session_id, Source(what, call=partial(agent.invoke_async, prompt))

    def _continuing(
        self,
        agent: Agent,
        task_id: str,
        message: Message,
        by: str,
        groups: tuple[str, ...],
        streamed: bool,
    ) -> Source:
        """The run a message on task ``task_id`` makes: its answers applied through the floor,
        its expired questions settled, or its stopped run carried on."""
        floor = self.operator
        if agent.is_paused:
            answers, shown = answers_of(message, agent.interrupts)
            if not answers:  # {"answers": {}}: settle what has expired
                return Source("Settling the expired questions.", call=agent.resume_expired_async)
            what = "The answers are recorded; the run carries on."
            answer = partial(floor.answer, task_id, answers, by=by, groups=groups, shown=shown)
            if streamed:  # the floor's rules, recorded first-wins, then carried on here
                stream = partial(
                    floor.answer_stream, task_id, answers, by=by, groups=groups, shown=shown
                )
                return Source(what, stream=stream)
            return Source(what, call=answer)
        given = _data_answers(message)
        if agent.needs_recovery:  # stopped mid-run (a retried answer carries it on)
            recover = partial(self._recover, agent, task_id, given, by, groups)
            return Source("The stopped run carries on.", call=recover)
        if given:  # the floor says who answered them first
            answer = partial(floor.answer, task_id, given, by=by, groups=groups)
            return Source("The answers are recorded; the run carries on.", call=answer)
        state = TaskState.Name(task_of(agent, task_id).status.state)
        raise NotPausedError(
            f"task {task_id!r} is not waiting for input (it is {state}): its answers "
            "were applied already"
        )

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

    async def _ended(self, task_id: str, error: BaseException | None, began: bool) -> Task | None:
        """The task as a run left it; None when the run was refused before it began (nothing
        changed). A run that failed is ``failed``, saying why (a bug's details are logged,
        not sent)."""
        if error is not None and isinstance(error, _REFUSALS) and not began:
            return None
        try:
            task = task_of(await self._open(task_id), task_id)
        except TaskNotFoundError:  # it failed before it saved anything
            task = Task(id=task_id, context_id=task_id)
        if error is not None and not isinstance(error, SessionConflictError):
            why = f"{type(error).__name__}: {error}" if isinstance(error, InterludeError) else ""
            if not why:
                _log.error("task %r: the run failed", task_id, exc_info=error)
            text = f"The run failed: {why or 'see the server log'}."
            task.status.CopyFrom(_failed(task_id, text))
        return task

    def _on_end(self, live: LiveRun | None, task: Task | None) -> None:
        """A task stopped (input-required, or ended): tell its webhooks."""
        if task is not None and task.status.state in ENDS:
            self.pushes.notify(task.id, status_event(task.id, task.status))

    # --- tasks ---------------------------------------------------------------------------

    async def _stored(self, task_id: str) -> None:
        """TaskNotFoundError unless ``task_id`` is a session of this agent (another agent's
        session is not this endpoint's task)."""
        try:
            stored = await self.store.load(check_session_id(task_id))
        except SessionError:
            stored = None
        if stored is None or stored.agent != self.name:
            raise TaskNotFoundError(f"no task {task_id!r} of agent {self.name!r}")

    async def _open(self, task_id: str) -> Agent:
        """The agent of session ``task_id`` (TaskNotFoundError: there is none of this agent's;
        a forged or unreadable session is refused)."""
        await self._stored(task_id)
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
        by, groups = self._by(context)
        return await self.canceling.cancel(params.id, by, groups)

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """The task as it stands, then its updates until its run stops. A run of this
        process is followed as it goes; one of another process is read from the store until
        its claim ends. An ended task has nothing to follow (``UnsupportedOperation``)."""
        task_id = params.id
        live = self.runs.get(task_id)
        if live is not None:
            task, seen = live.snapshot()
            yield task
            async for update in live.follow(seen):
                yield update
            return
        task = task_of(await self._open(task_id), task_id)
        state = task.status.state
        if state in ENDS and state != TaskState.TASK_STATE_INPUT_REQUIRED:
            raise UnsupportedOperationError(
                f"task {task_id!r} is {TaskState.Name(state)}: it has ended, there is nothing "
                "to follow (get it instead)"
            )
        yield task
        if state == TaskState.TASK_STATE_WORKING:
            async for update in self._watch(task_id):
                yield update

    async def _watch(self, task_id: str) -> AsyncGenerator[Update]:
        """The end of a run another process makes: read until its claim on the session is
        over (it paused, ended or died), then the task as it left it."""
        from ..sessions import claim_is_live

        while True:
            stored = await self.store.load(task_id)
            claim = None if stored is None else stored.claim
            if not (isinstance(claim, dict) and claim_is_live(claim)):
                break
            await asyncio.sleep(WATCH_EVERY)
        for update in final_events(task_of(await self._open(task_id), task_id)):
            yield update

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError()

    # --- push notifications --------------------------------------------------------------

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        await self._stored(params.task_id)
        return await self.pushes.set(params.task_id, params, context)

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        await self._stored(params.task_id)
        return await self.pushes.get(params.task_id, params.id, context)

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        await self._stored(params.task_id)
        configs = await self.pushes.listed(params.task_id, context)
        return ListTaskPushNotificationConfigsResponse(configs=configs)

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        await self._stored(params.task_id)
        await self.pushes.delete(params.task_id, params.id, context)

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


def _failed(task_id: str, text: str) -> TaskStatus:
    from a2a.types import Part, Role

    message = Message(
        message_id=f"{task_id}:failed:{uuid.uuid4().hex}",
        task_id=task_id,
        context_id=task_id,
        role=Role.ROLE_AGENT,
        parts=[Part(text=text)],
    )
    return stamped(TaskStatus(state=TaskState.TASK_STATE_FAILED, message=message))


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
