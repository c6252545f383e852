"""Webhook: a notification POSTed as JSON, signed with HMAC-SHA256, retried on 5xx, 429 and
connection errors (standard library only: urllib, in a thread)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import random
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigurationError, NotificationError

__all__ = ["Webhook", "signature"]


def signature(secret: str | bytes, body: bytes) -> str:
    """The ``X-Interlude-Signature`` header of ``body``: ``sha256=<hex HMAC-SHA256>``. A
    receiver computes it over the raw body it got and compares with ``hmac.compare_digest``."""
    key = secret.encode() if isinstance(secret, str) else secret
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


class Webhook:
    """POST each notification to ``url`` as JSON.

    Headers: ``Content-Type: application/json``, ``X-Interlude-Notification-Id`` (the id to
    de-duplicate by), ``X-Interlude-Event``, and with a ``secret``
    ``X-Interlude-Signature: sha256=<hex HMAC-SHA256 of the body>``. A 2xx answer delivers it.
    A 5xx or 429 answer, a timeout or a connection error is tried again up to ``retries``
    times, waiting ``backoff`` seconds doubling (with jitter), then left to the outbox, which
    tries again later; any other answer (a 4xx, a redirect) fails it for good. Redirects are
    not followed.
    """

    def __init__(
        self,
        url: str,
        *,
        secret: str | bytes | None = None,
        timeout: float = 10.0,
        retries: int = 2,
        backoff: float = 0.5,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigurationError(f"a webhook needs an http:// or https:// URL, got {url!r}")
        if not (timeout > 0 and retries >= 0 and backoff >= 0):
            raise ConfigurationError(
                f"Webhook: timeout > 0, retries >= 0 and backoff >= 0, got {timeout!r}, "
                f"{retries!r} and {backoff!r}"
            )
        self.url = url
        self.secret = secret
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.headers = dict(headers or {})
        shown = parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else ""))
        self.name = f"webhook {shown._replace(query='', fragment='').geturl()}"

    def __repr__(self) -> str:
        return f"Webhook({self.name.removeprefix('webhook ')!r})"

    def body(self, message: Mapping[str, Any]) -> bytes:
        """The bytes POSTed (and signed) for ``message``: JSON, ASCII."""
        return json.dumps(message, separators=(",", ":"), sort_keys=True).encode()

    async def send(self, message: Mapping[str, Any]) -> None:
        """Deliver ``message``; NotificationError if it was not (``permanent`` when trying
        again cannot help)."""
        body = self.body(message)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "interlude-notify",
            "X-Interlude-Notification-Id": str(message.get("id")),
            "X-Interlude-Event": str(message.get("event")),
            **self.headers,
        }
        if self.secret is not None:
            headers["X-Interlude-Signature"] = signature(self.secret, body)
        why = ""
        for attempt in range(self.retries + 1):
            if attempt:
                delay = self.backoff * 2 ** (attempt - 1)
                await asyncio.sleep(delay / 2 + random.uniform(0, delay / 2))
            status, why = await asyncio.to_thread(self._post, body, headers)
            if 200 <= status < 300:
                return
            if status and status != 429 and status < 500:
                raise NotificationError(f"{self.name} refused it: {why}", permanent=True)
        tries = f"{self.retries + 1} tries" if self.retries else "1 try"
        raise NotificationError(f"{self.name} failed after {tries}: {why}")

    def _post(self, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
        """(HTTP status, what happened); status 0 when there was no answer."""
        import urllib.error
        import urllib.request

        class NoRedirects(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: Any, **kwargs: Any) -> None:
                return None  # a redirect is answered as the 3xx it is

        opener = urllib.request.build_opener(NoRedirects)
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with opener.open(request, timeout=self.timeout) as response:
                return int(response.status), f"HTTP {response.status}"
        except urllib.error.HTTPError as exc:
            return int(exc.code), f"HTTP {exc.code}"
        except (OSError, ValueError) as exc:  # refused, reset, timed out, bad TLS
            reason = getattr(exc, "reason", exc)
            return 0, f"{type(exc).__name__}: {reason}"
