"""Small helpers of the A2A tests: send a message with the a2a-sdk client, read a task."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from a2a.client import Client, ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest, Task, TaskState
from google.protobuf import json_format, struct_pb2

TOKEN = "ana-token-0123456789abcdef"
TOKENS = {TOKEN: "ana"}
BASE = "http://remote.test"
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
COMPLETED = TaskState.TASK_STATE_COMPLETED


def data(value: Any) -> Part:
    return Part(data=json_format.ParseDict(value, struct_pb2.Value()))


async def send(client: Client, *parts: Part, task_id: str = "", context_id: str = "") -> Task:
    message = Message(
        message_id=uuid.uuid4().hex,
        role=Role.ROLE_USER,
        parts=list(parts),
        task_id=task_id,
        context_id=context_id,
    )
    async for response in client.send_message(SendMessageRequest(message=message)):
        assert response.HasField("task"), response
        return response.task
    raise AssertionError("no reply")


def questions(task: Task) -> list[dict[str, Any]]:
    """The questions of a task in input-required (from its status message's data part)."""
    for part in task.status.message.parts:
        if part.HasField("data"):
            return list(json_format.MessageToDict(part.data)["questions"])
    raise AssertionError(f"no questions in {task}")


def result(task: Task) -> str:
    return "".join(p.text for a in task.artifacts for p in a.parts)


async def sdk_client(asgi: object, agent: str, token: str | None = TOKEN) -> Client:
    """The a2a-sdk's own client for ``agent`` of an in-process application (blocking replies)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx.AsyncClient(transport=httpx.ASGITransport(asgi), headers=headers)  # type: ignore[arg-type]
    return await create_client(
        f"{BASE}/a2a/{agent}/", ClientConfig(streaming=False, httpx_client=http)
    )
