"""Push notifications of A2A tasks: the webhooks clients register, and the POST each one gets
when its task stops (``input-required``, ``completed``, ``canceled``, ``failed``).

A client registers a webhook with ``tasks/pushNotificationConfig/set`` (or in its message's
``configuration``): a URL, an optional ``token`` and optional ``authentication`` (a scheme and
credentials). The URL is checked when it is registered and again before each POST (by default
the a2a-sdk's screen: http(s) to public addresses only, against requests to internal services);
a refused URL is an ``InvalidParams`` error and nothing is registered. Each notification is a
``StreamResponse`` (the task's status update, as a stream carries it) POSTed with
``X-A2A-Notification-Token: <token>`` and ``Authorization: <scheme> <credentials>``, the
headers the receiver checks (A2A: "Push Notification Security"). Delivery is best effort and at
least once: a connection error, a 5xx or a 429 is retried twice with backoff, any other 4xx is
final (the receiver refused it: a wrong token stays wrong).

Configurations are kept in this process's memory (per agent endpoint, scoped to the person of
the token that registered them), so a notification comes from the process that makes the run.
Reading a configuration back leaves out its credentials.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from a2a.server.tasks.push_notification_sender import PushNotificationSender
from a2a.types import TaskPushNotificationConfig
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError

if TYPE_CHECKING:
    import httpx
    from a2a.server.context import ServerCallContext
    from a2a.server.tasks.push_notification_sender import PushNotificationEvent

__all__ = ["Pushes", "UrlCheck", "redacted"]

UrlCheck = Callable[[str], Awaitable[bool]]
"""An async check of a webhook URL: True to send to it."""

_log = logging.getLogger("interlude.a2a")

CONTENT_TYPE = "application/a2a+json"
TOKEN_HEADER = "X-A2A-Notification-Token"


def redacted(config: TaskPushNotificationConfig) -> TaskPushNotificationConfig:
    """``config`` as it is read back: without its credentials."""
    out = TaskPushNotificationConfig()
    out.CopyFrom(config)
    if out.HasField("authentication"):
        out.authentication.ClearField("credentials")
    return out


class Pushes(PushNotificationSender):
    """The webhooks of one agent endpoint's tasks, and their delivery.

    ``owner`` names who a request comes from (the token's person): a configuration is read,
    listed and deleted by its owner only. ``check`` screens URLs (default: the a2a-sdk's
    ``validate_push_notification_url``)."""

    attempts = 3
    """Tries per notification and webhook (the first and two retries)."""
    backoff = 0.5
    """Seconds before the first retry, doubled before each next one."""
    timeout = 10.0
    """Seconds a webhook has to answer."""

    def __init__(
        self, owner: Callable[[ServerCallContext], str], check: UrlCheck | None = None
    ) -> None:
        from a2a.server.tasks import InMemoryPushNotificationConfigStore

        if check is None:
            from a2a.utils.push_url_validator import validate_push_notification_url

            check = validate_push_notification_url
        self.check = check
        self.configs = InMemoryPushNotificationConfigStore(owner_resolver=owner)
        self._sending: set[asyncio.Task[None]] = set()

    # --- configurations ----------------------------------------------------------------------

    async def set(
        self, task_id: str, config: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """Register ``config`` for task ``task_id`` (its id defaults to the task's; the same id
        replaces); InvalidParamsError, registering nothing, when its URL is refused."""
        if not config.url:
            raise InvalidParamsError("a push notification config needs a url")
        if not await self._allowed(config.url):
            raise InvalidParamsError(
                f"the push notification URL {config.url!r} is refused: webhooks must be "
                "http(s) URLs this server may call (by default, on public addresses only)"
            )
        stored = await self.configs.set_info(task_id, config, context)
        return redacted(stored)

    async def get(
        self, task_id: str, config_id: str, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """The caller's configuration ``config_id`` of the task (its id: the task id when
        empty); TaskNotFoundError when the caller has none of that id."""
        wanted = config_id or task_id
        for config in await self.configs.get_info(task_id, context):
            if config.id == wanted:
                return redacted(config)
        raise TaskNotFoundError(f"task {task_id!r} has no push notification config {wanted!r}")

    async def listed(
        self, task_id: str, context: ServerCallContext
    ) -> list[TaskPushNotificationConfig]:
        return [redacted(c) for c in await self.configs.get_info(task_id, context)]

    async def delete(self, task_id: str, config_id: str, context: ServerCallContext) -> None:
        await self.configs.delete_info(task_id, context, config_id or None)

    async def _allowed(self, url: str) -> bool:
        try:
            return bool(await self.check(url))
        except Exception:  # a check that fails refuses (fail closed)
            _log.exception("the push URL check failed for %s", url)
            return False

    # --- delivery ------------------------------------------------------------------------------

    def notify(self, task_id: str, event: PushNotificationEvent) -> None:
        """Send ``event`` to the task's webhooks in the background (the run does not wait)."""
        sending = asyncio.ensure_future(self.send_notification(task_id, event))
        self._sending.add(sending)
        sending.add_done_callback(self._sending.discard)

    async def drain(self) -> None:
        """Wait for the notifications under way."""
        while self._sending:
            await asyncio.gather(*list(self._sending), return_exceptions=True)

    async def send_notification(self, task_id: str, event: PushNotificationEvent) -> None:
        configs = await self.configs.get_info_for_dispatch(task_id)
        if not configs:
            return
        import httpx
        from a2a.utils.proto_utils import to_stream_response
        from google.protobuf.json_format import MessageToDict

        body = json.dumps(MessageToDict(to_stream_response(event))).encode("utf-8")
        async with httpx.AsyncClient(timeout=self.timeout) as http:
            await asyncio.gather(*(self._deliver(http, c, body, task_id) for c in configs))

    async def _deliver(
        self, http: httpx.AsyncClient, config: TaskPushNotificationConfig, body: bytes, task: str
    ) -> bool:
        """POST ``body`` to one webhook, retrying what may pass on a retry; whether it was
        taken (2xx). A URL refused now (its name may resolve elsewhere than when it was
        registered) gets nothing."""
        import httpx

        if not await self._allowed(config.url):
            _log.warning("push for task %s not sent: %s is refused now", task, config.url)
            return False
        headers = {"Content-Type": CONTENT_TYPE}
        if config.token:
            headers[TOKEN_HEADER] = config.token
        auth = config.authentication
        if config.HasField("authentication") and auth.scheme and auth.credentials:
            headers["Authorization"] = f"{auth.scheme} {auth.credentials}"
        for attempt in range(self.attempts):
            if attempt:
                await asyncio.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                response = await http.post(config.url, content=body, headers=headers)
            except httpx.TransportError as exc:
                _log.warning("push for task %s to %s failed: %r", task, config.url, exc)
                continue
            if response.is_success:
                return True
            code = response.status_code
            _log.warning("push for task %s to %s refused: HTTP %d", task, config.url, code)
            if code < 500 and code != 429:
                return False  # the receiver refused it: sending it again changes nothing
        return False
