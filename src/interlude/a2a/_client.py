"""The A2A client: a remote A2A agent as a tool whose questions become the caller's own.

``RemoteAgent(url).as_tool()`` sends the model's ``prompt`` to the remote agent as a new task.
A task in ``input-required`` stops the tool with the remote questions (``ToolContext.relay``):
the calling agent pauses with them, under ids scoped by its tool call, and keeps the remote
task's id and questions as the call's checkpoint (in its pause, under its signature). On the
caller's resume the tool runs again: it reads the remote task first and sends the answers given
to its questions as one message on that same task, only while the task still waits for those
questions; a task that moved on (its answers were applied before this process stopped) is taken
as it is, so a re-run never answers twice. Everything goes through public Interlude API.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._interrupt import Interrupt
from .._messages import JsonValue, Text, ToolResult, ToolUse
from .._tools import ToolSpec
from ..errors import ConfigurationError, RemoteAgentError

if TYPE_CHECKING:
    import httpx
    from a2a.client import Client
    from a2a.types import AgentCard, Task

    from .._agent import Agent
    from .._tools import ToolContext

__all__ = ["RemoteAgent", "RemoteAgentTool"]


class RemoteAgent:
    """A remote A2A agent at ``url`` (its card is at ``<url>/.well-known/agent-card.json``).

    ``token`` is sent as ``Authorization: Bearer <token>``; ``headers`` are sent with every
    request; ``transport`` is an ``httpx`` transport (``httpx.ASGITransport(app)`` to call an
    application in-process); ``timeout`` bounds each request, in seconds (a blocking reply
    lasts as long as the remote run).
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 300.0,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"a remote agent's url is an http(s) URL, got {url!r}")
        self.url = url if url.endswith("/") else url + "/"
        self._headers = dict(headers or {})
        if token is not None:
            self._headers["Authorization"] = f"Bearer {token}"
        self._transport = transport
        self._timeout = timeout
        self._card: AgentCard | None = None

    def __repr__(self) -> str:
        return f"RemoteAgent({self.url!r})"

    def as_tool(self, name: str, description: str | None = None) -> RemoteAgentTool:
        """A tool that hands its ``prompt`` to the remote agent and returns its final text."""
        return RemoteAgentTool(self, name, description)

    def as_agent(self, name: str, description: str | None = None, **options: Any) -> Agent:
        """A local agent that only hands its prompt to the remote agent and answers with its
        reply (a :class:`RelayModel` and :meth:`as_tool`): a Graph or Swarm node. ``options``
        go to :class:`~interlude.Agent` (``session=``, ``signing_key=``, ...)."""
        from .._agent import Agent
        from ._node import RelayModel

        return Agent(
            RelayModel(name), tools=[self.as_tool(name, description)], name=name, **options
        )

    async def send(
        self,
        text: str | None = None,
        *,
        task_id: str | None = None,
        context_id: str | None = None,
        data: JsonValue = None,
    ) -> Task:
        """Send a message (``text`` and/or a data part ``data``), on task ``task_id`` or as a
        new task (in context ``context_id``), and return the task as the reply has it."""
        from a2a.types import Message, Part, Role, SendMessageRequest

        from ._wire import data_part

        parts = ([Part(text=text)] if text is not None else []) + (
            [data_part(data)] if data is not None else []
        )
        message = Message(
            message_id=uuid.uuid4().hex,
            role=Role.ROLE_USER,
            parts=parts,
            task_id=task_id or "",
            context_id=context_id or task_id or "",
        )
        async with self._client() as client:
            async for response in client.send_message(SendMessageRequest(message=message)):
                if response.HasField("task"):
                    return response.task
        raise RemoteAgentError(f"{self.url} replied without a task")

    async def get(self, task_id: str) -> Task:
        """The remote task ``task_id`` as it is now."""
        from a2a.types import GetTaskRequest

        async with self._client() as client:
            return await client.get_task(GetTaskRequest(id=task_id))

    def _client(self) -> _Connection:
        return _Connection(self)

    async def _open(self) -> tuple[httpx.AsyncClient, Client]:
        import httpx
        from a2a.client import ClientConfig, ClientFactory

        http = httpx.AsyncClient(
            headers=self._headers, transport=self._transport, timeout=self._timeout
        )
        factory = ClientFactory(ClientConfig(streaming=False, httpx_client=http))
        if self._card is None:
            from a2a.client import A2ACardResolver

            self._card = await A2ACardResolver(http, self.url).get_agent_card()
        return http, factory.create(self._card)


class _Connection:
    """One A2A client (and its HTTP client) for the length of an ``async with``."""

    def __init__(self, remote: RemoteAgent) -> None:
        self._remote = remote
        self._http: httpx.AsyncClient | None = None

    async def __aenter__(self) -> Client:
        self._http, client = await self._remote._open()
        return client

    async def __aexit__(self, *exc: object) -> None:
        if self._http is not None:
            await self._http.aclose()


class RemoteAgentTool:
    """The tool :meth:`RemoteAgent.as_tool` makes (input ``{"prompt": <text>}``)."""

    idempotent = True
    """Safe to run again after a crash: the remote task is named by the call's idempotency
    key (a second start finds it), and answers are sent only while it waits for them."""

    def __init__(self, remote: RemoteAgent, name: str, description: str | None) -> None:
        from .._tools import task_tool_name, task_tool_spec

        name = task_tool_name(name, "remote agent")
        self.remote = remote
        self._name = name
        self._spec = task_tool_spec(
            name,
            description or f"Hand a task to the remote {name} agent and get its final answer.",
        )

    def __repr__(self) -> str:
        return f"RemoteAgentTool({self._name!r}, {self.remote.url!r})"

    @property
    def policy_source(self) -> str:
        """Where a policy sees this tool come from: ``a2a:<tool name>``."""
        return f"a2a:{self._name}"

    @property
    def name(self) -> str:
        return self._name

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    async def run(self, tool_use: ToolUse, context: ToolContext) -> ToolResult:
        saved = context.checkpoint
        if saved is None:
            task = await self._start(tool_use, context)
        else:
            task = await self._carry_on(saved, context)
        return self._outcome(task, tool_use, context)

    async def _start(self, tool_use: ToolUse, context: ToolContext) -> Task:
        from a2a.utils.errors import InvalidParamsError

        from .._tools import task_prompt

        prompt = task_prompt(self._name, tool_use)
        context_id = "il-" + context.idempotency_key  # the same for every run of this call
        try:
            return await self.remote.send(prompt, context_id=context_id)
        except InvalidParamsError as exc:  # started before this process stopped: take it
            if (exc.data or {}).get("task_id") != context_id:
                raise
            return await self.remote.get(context_id)

    async def _carry_on(self, saved: JsonValue, context: ToolContext) -> Task:
        """Answer the remote task with what was answered here, once; or take it as it is."""
        from a2a.types import TaskState
        from a2a.utils.errors import InvalidParamsError

        from ._wire import interrupts_of

        if not isinstance(saved, dict) or not isinstance(saved.get("task_id"), str):
            raise RemoteAgentError(f"the checkpoint of tool {self._name!r} is not a remote task")
        task_id = str(saved["task_id"])
        asked = [Interrupt.from_dict(q) for q in saved.get("questions") or []]
        answers = context.relayed_answers(asked)
        task = await self.remote.get(task_id)
        state = task.status.state
        if state == TaskState.TASK_STATE_WORKING:  # the remote stopped mid-run: carry it on
            return await self.remote.send(task_id=task_id, data={"answers": {}})
        if state != TaskState.TASK_STATE_INPUT_REQUIRED:
            return task  # done: answered by a run of this call before this one
        waiting = {q.id for q in interrupts_of(task.status.message)}
        if answers and not set(answers) <= waiting:
            return task  # answered before, and asking something new now
        now = context.agent.clock()
        expired = any(q.expires_at is not None and q.expires_at <= now for q in asked)
        if not answers and not expired:  # the caller answered other questions
            return task
        try:
            return await self.remote.send(task_id=task_id, data={"answers": answers})
        except InvalidParamsError as exc:
            if (exc.data or {}).get("error") not in ("NotPausedError", "UnknownInterruptError"):
                raise
            return await self.remote.get(task_id)  # answered meanwhile, by a run before this

    def _outcome(self, task: Task, tool_use: ToolUse, context: ToolContext) -> ToolResult:
        from a2a.types import TaskState

        from ._wire import interrupts_of, question_dict

        state = task.status.state
        if state == TaskState.TASK_STATE_COMPLETED:
            text = "".join(p.text for a in task.artifacts for p in a.parts if p.HasField("text"))
            return ToolResult(tool_use.id, "success", [Text(text)])
        if state == TaskState.TASK_STATE_INPUT_REQUIRED:
            questions = interrupts_of(task.status.message)
            if not questions:
                raise RemoteAgentError(
                    f"remote task {task.id!r} waits for input but carries no questions"
                )
            context.checkpoint = {
                "task_id": task.id,
                "questions": [question_dict(q) for q in questions],
            }
            context.relay(questions)
        said = "".join(p.text for p in task.status.message.parts if p.HasField("text"))
        raise RemoteAgentError(
            f"remote task {task.id!r} is {TaskState.Name(state)}" + (f": {said}" if said else "")
        )
