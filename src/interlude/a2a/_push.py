"""Push notifications of A2A tasks: the webhooks clients register, and the POST each one gets
when its task stops (``input-required``, ``completed``, ``canceled``, ``failed``).

A client registers a webhook with ``tasks/pushNotificationConfig/set`` (or in its message's
``configuration``): a URL, an optional ``token`` and optional ``authentication`` (a scheme and
credentials). Each notification is a ``StreamResponse`` (the task's status update, as a stream
carries it) POSTed with ``X-A2A-Notification-Token: <token>`` and ``Authorization: <scheme>
<credentials>``, the headers the receiver checks (A2A: "Push Notification Security"). Delivery
is best effort and at least once: a connection error, a 5xx or a 429 is retried twice with
backoff, any other 4xx is final (the receiver refused it: a wrong token stays wrong).

The URL is screened when it is registered and again before each POST, against requests to
internal services (server-side request forgery). A screen resolves the URL's host once and
judges the addresses it gets (by default: http(s) only, and every address public); the POST
then connects to the first of those very addresses, never to a second lookup of the name (a
name with a 0-second TTL could otherwise answer a public address to the screen and an internal
one to the connection: DNS rebinding). The request keeps the name for its ``Host`` header and
for TLS (the SNI and the certificate check), and the retries of a POST reuse its address. A
refused URL is an ``InvalidParams`` error when it is registered (nothing is registered) and
nothing sent when it is refused at a send (logged). ``create_a2a_app(..., push_url_check=)``
replaces the default screen by a check of the URL (an allowlist, or the tests' loopback
webhook): it then decides alone, whatever the addresses, and the POST is still pinned to the
address resolved for it. With the default screen, ``authentication`` credentials are refused on
a plain ``http://`` URL (they would cross the network in clear).

Configurations are kept in this process's memory (per agent endpoint, scoped to the person of
the token that registered them), so a notification comes from the process that makes the run;
at most ``per_task`` per task and ``per_owner`` per person, and a task's are dropped once its
final notification (``completed``, ``canceled``, ``failed``) is sent. Reading a configuration
back leaves out its credentials.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from a2a.server.tasks.push_notification_config_store import normalize_push_notification_config
from a2a.server.tasks.push_notification_sender import PushNotificationSender
from a2a.types import Task, TaskPushNotificationConfig, TaskState, TaskStatusUpdateEvent
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError

if TYPE_CHECKING:
    import httpx
    from a2a.server.context import ServerCallContext
    from a2a.server.tasks.push_notification_sender import PushNotificationEvent

__all__ = [
    "AddressCheck",
    "Pushes",
    "Resolve",
    "UrlCheck",
    "public_address",
    "redacted",
    "resolve_host",
]

UrlCheck = Callable[[str], Awaitable[bool]]
"""An async check of a webhook URL: True to send to it."""
Resolve = Callable[[str, int], Awaitable[Sequence[str]]]
"""Resolves a host name (and port) to the addresses a connection to it may use."""
AddressCheck = Callable[[str], bool]
"""Whether the POST may connect to an address (each one the URL's host resolves to)."""

_log = logging.getLogger("interlude.a2a")

CONTENT_TYPE = "application/a2a+json"
TOKEN_HEADER = "X-A2A-Notification-Token"

_ENDED = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
    }
)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
"""The well-known NAT64 prefix: an address in it reaches the IPv4 address in its low 32 bits."""
_LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")
"""The local-use NAT64 prefix (RFC 8215): it reaches whatever the network maps it to."""


def redacted(config: TaskPushNotificationConfig) -> TaskPushNotificationConfig:
    """``config`` as it is read back: without its credentials."""
    out = TaskPushNotificationConfig()
    out.CopyFrom(config)
    if out.HasField("authentication"):
        out.authentication.ClearField("credentials")
    return out


def public_address(address: str) -> bool:
    """Whether ``address`` (an IP address as text) is a public unicast one: ``is_global`` and
    none of loopback, link-local, private, multicast, reserved, unspecified. An IPv6 address
    that carries an IPv4 one (IPv4-mapped ``::ffff:a.b.c.d``, 6to4, the NAT64 prefix) is
    judged as that IPv4 address; anything that is not an address is not public."""
    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(
            address.split("%", 1)[0]
        )
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _LOCAL_NAT64 or ip.is_site_local:
            return False
        if ip in _NAT64:
            ip = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        else:
            ip = ip.ipv4_mapped or ip.sixtofour or ip
    return ip.is_global and not (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
    )


def _any_address(address: str) -> bool:
    return True


async def resolve_host(host: str, port: int) -> list[str]:
    """The addresses of ``host`` (the event loop's resolver, as a connection would use it),
    each once, in the resolver's order. OSError when it does not resolve."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class _Refused(Exception):
    """Why a webhook URL may not be called (for the log: the client gets a plain refusal)."""


@dataclass(frozen=True)
class _Target:
    """Where one send's POST goes: the URL with its host replaced by the checked address."""

    url: httpx.URL
    """The URL to request: the checked address in place of the host name."""
    host: str
    """The ``Host`` header: the URL's host (and port), as the receiver expects it."""
    server_name: str
    """The name TLS sends (SNI) and checks the certificate against: the URL's host."""
    address: str
    """The address it connects to."""


class _Configs:
    """The webhooks registered, per person (their owner) then task, in this process's
    memory (the a2a-sdk's ``PushNotificationConfigStore`` semantics, with counts)."""

    def __init__(self) -> None:
        self._of: dict[str, dict[str, dict[str, TaskPushNotificationConfig]]] = {}

    def mine(self, owner: str, task_id: str) -> list[TaskPushNotificationConfig]:
        return list(self._of.get(owner, {}).get(task_id, {}).values())

    def of_task(self, task_id: str) -> list[TaskPushNotificationConfig]:
        """Every person's configurations of the task (the ones a notification goes to)."""
        return [c for tasks in self._of.values() for c in tasks.get(task_id, {}).values()]

    def put(
        self,
        owner: str,
        task_id: str,
        config: TaskPushNotificationConfig,
        per_task: int,
        per_owner: int,
    ) -> TaskPushNotificationConfig:
        """Store ``config`` (its id defaulting to the task's; the same id replaces), unless
        that would make the task's more than ``per_task`` or the owner's more than
        ``per_owner``: InvalidParamsError then, nothing stored."""
        stored = normalize_push_notification_config(task_id, config)
        tasks = self._of.get(owner, {})
        if stored.id not in tasks.get(task_id, {}):  # a replacement adds nothing
            if len(self.of_task(task_id)) >= per_task:
                raise InvalidParamsError(
                    f"task {task_id!r} has {per_task} push notification configs already, the "
                    "most a task may have: delete one before adding another"
                )
            if sum(len(configs) for configs in tasks.values()) >= per_owner:
                raise InvalidParamsError(
                    f"you have {per_owner} push notification configs already, the most one "
                    "person may have: delete some before adding another"
                )
        self._of.setdefault(owner, {}).setdefault(task_id, {})[stored.id] = stored
        return stored

    def delete(self, owner: str, task_id: str, config_id: str | None) -> None:
        """Delete the owner's configuration ``config_id`` of the task (all of them: None)."""
        tasks = self._of.get(owner, {})
        configs = tasks.get(task_id, {})
        if config_id is None:
            configs.clear()
        else:
            configs.pop(config_id, None)
        if not configs:
            tasks.pop(task_id, None)
        if not tasks:
            self._of.pop(owner, None)

    def forget(self, task_id: str) -> None:
        """Drop every configuration of the task (it has ended)."""
        for owner in list(self._of):
            tasks = self._of[owner]
            tasks.pop(task_id, None)
            if not tasks:
                del self._of[owner]


class Pushes(PushNotificationSender):
    """The webhooks of one agent endpoint's tasks, and their delivery.

    ``owner`` names who a request comes from (the token's person): a configuration is read,
    listed and deleted by its owner only. ``check`` screens URLs: None (the default) takes
    http(s) URLs whose host resolves to public addresses only (``accept``: which addresses,
    default :func:`public_address`, each one the host resolves to must pass); a custom check
    decides on the URL alone (``accept`` then defaults to any address). Either way a send
    resolves the host once, with ``resolve`` (default :func:`resolve_host`), and connects to
    the first address it checked."""

    attempts = 3
    """Tries per notification and webhook (the first and two retries)."""
    backoff = 0.5
    """Seconds before the first retry, doubled before each next one."""
    timeout = 10.0
    """Seconds a webhook has to answer."""
    per_task = 10
    """The most configurations a task may have (all its people's together)."""
    per_owner = 100
    """The most configurations a person may have (all tasks together)."""
    tls: ssl.SSLContext | None = None
    """What webhooks' certificates are checked with; None: httpx's default (certifi's roots,
    or ``SSL_CERT_FILE``/``SSL_CERT_DIR``)."""

    def __init__(
        self,
        owner: Callable[[ServerCallContext], str],
        check: UrlCheck | None = None,
        *,
        resolve: Resolve | None = None,
        accept: AddressCheck | None = None,
    ) -> None:
        self.owner = owner
        self.check = check
        self.resolve: Resolve = resolve or resolve_host
        self.accept: AddressCheck = accept or (public_address if check is None else _any_address)
        self.configs = _Configs()
        self._sending: set[asyncio.Task[None]] = set()

    # --- configurations ----------------------------------------------------------------------

    async def set(
        self, task_id: str, config: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """Register ``config`` for task ``task_id`` (its id defaults to the task's; the same id
        replaces); InvalidParamsError, registering nothing, when its URL is refused, when it
        sends credentials in clear, or when the task or its person has too many already."""
        if not config.url:
            raise InvalidParamsError("a push notification config needs a url")
        if self.check is None and _in_clear(config):
            raise InvalidParamsError(
                f"the push notification URL {config.url!r} is refused: it is plain http, and "
                "credentials are sent to https webhooks only"
            )
        try:
            await self._aim(config.url)
        except _Refused as why:
            _log.warning("push URL %s refused for task %s: %s", config.url, task_id, why)
            raise InvalidParamsError(
                f"the push notification URL {config.url!r} is refused: webhooks must be "
                "http(s) URLs this server may call (by default, on public addresses only)"
            ) from None
        stored = self.configs.put(
            self.owner(context), task_id, config, self.per_task, self.per_owner
        )
        return redacted(stored)

    async def get(
        self, task_id: str, config_id: str, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """The caller's configuration ``config_id`` of the task (its id: the task id when
        empty); TaskNotFoundError when the caller has none of that id."""
        wanted = config_id or task_id
        for config in self.configs.mine(self.owner(context), task_id):
            if config.id == wanted:
                return redacted(config)
        raise TaskNotFoundError(f"task {task_id!r} has no push notification config {wanted!r}")

    async def listed(
        self, task_id: str, context: ServerCallContext
    ) -> list[TaskPushNotificationConfig]:
        return [redacted(c) for c in self.configs.mine(self.owner(context), task_id)]

    async def delete(self, task_id: str, config_id: str, context: ServerCallContext) -> None:
        self.configs.delete(self.owner(context), task_id, config_id or None)

    # --- the screen ----------------------------------------------------------------------------

    async def _aim(self, url: str) -> _Target:
        """Where a POST to ``url`` may go now: its host resolved once, the addresses screened,
        the first one to connect to; _Refused (why) when it may not go."""
        import httpx

        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError, ValueError):
            raise _Refused("it is not a URL") from None
        if parsed.scheme not in ("http", "https") or not parsed.raw_host:
            raise _Refused("it is not an http(s) URL with a host")
        if self.check is not None:
            try:
                allowed = bool(await self.check(url))
            except Exception:  # a check that fails refuses (fail closed)
                _log.exception("the push URL check failed for %s", url)
                allowed = False
            if not allowed:
                raise _Refused("the URL check refused it")
        host = parsed.raw_host.decode("ascii")
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            addresses = list(await self.resolve(host, port))
        except (OSError, UnicodeError, ValueError) as exc:
            raise _Refused(f"{host} does not resolve ({exc})") from None
        if not addresses:
            raise _Refused(f"{host} resolves to no address")
        refused = [a for a in addresses if not self._accepts(a)]
        if refused:
            raise _Refused(f"{host} resolves to {', '.join(refused)}, which it may not call")
        address = addresses[0]
        try:
            pinned = parsed.copy_with(host=address)
        except (httpx.InvalidURL, TypeError, ValueError):
            raise _Refused(f"{host} resolves to {address}, which is not a usable host") from None
        return _Target(pinned, parsed.netloc.decode("ascii"), host, address)

    def _accepts(self, address: str) -> bool:
        try:
            return bool(self.accept(address))
        except Exception:  # fail closed
            _log.exception("the push address check failed for %s", address)
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
        configs = self.configs.of_task(task_id)
        if _ends(event):  # nothing more will happen to the task: its webhooks go
            self.configs.forget(task_id)
        if not configs:
            return
        from a2a.utils.proto_utils import to_stream_response
        from google.protobuf.json_format import MessageToDict

        body = json.dumps(MessageToDict(to_stream_response(event))).encode("utf-8")
        await asyncio.gather(*(self._deliver(c, body, task_id) for c in configs))

    async def _deliver(self, config: TaskPushNotificationConfig, body: bytes, task: str) -> bool:
        """POST ``body`` to one webhook, retrying what may pass on a retry; whether it was
        taken (2xx). Its host is resolved and screened now (it may resolve elsewhere than when
        it was registered), once: every try connects to the address screened."""
        import httpx

        try:
            target = await self._aim(config.url)
        except _Refused as why:
            _log.warning("push for task %s not sent: %s is refused now: %s", task, config.url, why)
            return False
        headers = {"Host": target.host, "Content-Type": CONTENT_TYPE}
        if config.token:
            headers[TOKEN_HEADER] = config.token
        auth = config.authentication
        if config.HasField("authentication") and auth.scheme and auth.credentials:
            headers["Authorization"] = f"{auth.scheme} {auth.credentials}"
        # A client of its own (no connection shared with another webhook's name), direct: an
        # environment proxy would connect on its own terms, and its TLS would not use the name.
        async with httpx.AsyncClient(
            timeout=self.timeout, verify=self._tls(), trust_env=False, follow_redirects=False
        ) as http:
            for attempt in range(self.attempts):
                if attempt:
                    await asyncio.sleep(self.backoff * 2 ** (attempt - 1))
                try:
                    response = await http.post(
                        target.url,
                        content=body,
                        headers=headers,
                        extensions={"sni_hostname": target.server_name},
                    )
                except httpx.TransportError as exc:
                    _log.warning(
                        "push for task %s to %s (%s) failed: %r",
                        task,
                        config.url,
                        target.address,
                        exc,
                    )
                    continue
                if response.is_success:
                    return True
                code = response.status_code
                _log.warning("push for task %s to %s refused: HTTP %d", task, config.url, code)
                if code < 500 and code != 429:
                    return False  # the receiver refused it: sending it again changes nothing
        return False

    def _tls(self) -> ssl.SSLContext:
        if self.tls is None:
            import httpx

            self.tls = httpx.create_ssl_context()  # certifi, or SSL_CERT_FILE/SSL_CERT_DIR
        return self.tls


def _in_clear(config: TaskPushNotificationConfig) -> bool:
    """Whether ``config`` would send credentials (``authentication``'s, or the URL's own
    user and password) over plain http."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(config.url)
        if parts.scheme.lower() != "http":
            return False
        in_url = bool(parts.password)
    except ValueError:
        return False  # not a URL: the screen refuses it
    return in_url or bool(config.HasField("authentication") and config.authentication.credentials)


def _ends(event: PushNotificationEvent) -> bool:
    return isinstance(event, Task | TaskStatusUpdateEvent) and event.status.state in _ENDED
