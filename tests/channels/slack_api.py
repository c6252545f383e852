"""A loopback Slack: the Web API methods the Slack channel calls (``chat.postMessage``,
``chat.update``, ``conversations.history``) answered as Slack answers them, served by a real
uvicorn for the real ``slack_sdk`` client; and the interactivity requests Slack sends when a
button is clicked (the ``block_actions`` payload, form-encoded, signed with the app's signing
secret as Slack documents it).

What Slack does that matters here, and is done here too: the bot token is checked; an unknown
channel is ``channel_not_found`` (a channel's name is taken only by ``chat.postMessage``); a
message gets a ``ts`` (``seconds.micros``, rising); a block posted without a ``block_id`` gets
one; ``chat.update`` replaces the text and blocks (and the metadata when given) and keeps the
``ts``; ``conversations.history`` lists the newest first, after ``oldest``, with metadata only
when ``include_all_metadata`` is set.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from tests.support.serving import serving

BOT_TOKEN = "xoxb-interlude-test-token"
CHANNEL = "C0INTERLUDE"
TEAM = "T0INTERLUDE"
APP_ID = "A0INTERLUDE"
NAMES = {"#approvals": CHANNEL}
"""Channel names ``chat.postMessage`` takes (Slack answers with the id); other methods want ids."""
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
"""The Slack app's signing secret in these tests."""


@dataclass
class Call:
    """One Web API request the loopback Slack received."""

    method: str
    args: dict[str, Any]
    authorization: str | None


@dataclass
class SlackApi:
    """The loopback Slack's state: every call, and each channel's messages."""

    token: str = BOT_TOKEN
    channels: tuple[str, ...] = (CHANNEL,)
    calls: list[Call] = field(default_factory=list)
    messages: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    failures: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    """(method, HTTP status, body) answered to the next calls of that method, in order."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _last_ts: float = 0.0

    def __post_init__(self) -> None:
        self.messages = {c: [] for c in self.channels}

    # -- what the tests read ------------------------------------------------------------------

    def called(self, method: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def message(self, ts: str, channel: str = CHANNEL) -> dict[str, Any]:
        with self._lock:
            (found,) = [m for m in self.messages[channel] if m["ts"] == ts]
            return copy.deepcopy(found)

    def posted(self, channel: str = CHANNEL) -> list[dict[str, Any]]:
        """The channel's messages, oldest first, as they stand now."""
        with self._lock:
            return copy.deepcopy(self.messages[channel])

    # -- the Web API --------------------------------------------------------------------------

    def answer(self, method: str, args: dict[str, Any], authorization: str | None) -> Any:
        """(HTTP status, JSON body) of one Web API call."""
        with self._lock:
            self.calls.append(Call(method, copy.deepcopy(args), authorization))
            for i, (m, status, body) in enumerate(self.failures):
                if m == method:
                    del self.failures[i]
                    return status, body
            if authorization != f"Bearer {self.token}":
                return 200, {"ok": False, "error": "invalid_auth"}
            handler = {
                "chat.postMessage": self._post,
                "chat.update": self._update,
                "conversations.history": self._history,
            }.get(method)
            if handler is None:
                return 200, {"ok": False, "error": "unknown_method"}
            if method == "chat.postMessage" and args.get("channel") in NAMES:
                args = {**args, "channel": NAMES[args["channel"]]}
            if args.get("channel") not in self.messages:
                return 200, {"ok": False, "error": "channel_not_found"}
            return 200, handler(args)

    def _ts(self) -> str:
        self._last_ts = max(time.time(), self._last_ts + 0.000001)
        return f"{self._last_ts:.6f}"

    @staticmethod
    def _blocks(blocks: Any) -> list[dict[str, Any]]:
        if isinstance(blocks, str):
            blocks = json.loads(blocks)
        out = copy.deepcopy(blocks or [])
        for block in out:
            block.setdefault("block_id", secrets.token_urlsafe(4))
        return out

    def _post(self, args: dict[str, Any]) -> dict[str, Any]:
        message = {
            "type": "message",
            "user": "U0BOT",
            "bot_id": "B0BOT",
            "app_id": APP_ID,
            "team": TEAM,
            "ts": self._ts(),
            "text": args.get("text", ""),
            "blocks": self._blocks(args.get("blocks")),
        }
        if args.get("metadata"):
            message["metadata"] = copy.deepcopy(args["metadata"])
        self.messages[args["channel"]].append(message)
        return {"ok": True, "channel": args["channel"], "ts": message["ts"], "message": message}

    def _update(self, args: dict[str, Any]) -> dict[str, Any]:
        found = [m for m in self.messages[args["channel"]] if m["ts"] == args.get("ts")]
        if not found:
            return {"ok": False, "error": "message_not_found"}
        message = found[0]
        message["text"] = args.get("text", "")
        message["blocks"] = self._blocks(args.get("blocks"))
        message["edited"] = {"user": "U0BOT", "ts": self._ts()}
        if args.get("metadata"):
            message["metadata"] = copy.deepcopy(args["metadata"])
        return {
            "ok": True,
            "channel": args["channel"],
            "ts": message["ts"],
            "text": message["text"],
        }

    def _history(self, args: dict[str, Any]) -> dict[str, Any]:
        oldest = float(args.get("oldest") or 0)
        limit = int(args.get("limit") or 100)
        start = int(args.get("cursor") or 0)
        newest_first = [
            m for m in reversed(self.messages[args["channel"]]) if float(m["ts"]) > oldest
        ]
        page = copy.deepcopy(newest_first[start : start + limit])
        if str(args.get("include_all_metadata")).lower() not in ("true", "1"):
            for m in page:
                m.pop("metadata", None)
        more = start + limit < len(newest_first)
        return {
            "ok": True,
            "messages": page,
            "has_more": more,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }

    def asgi(self) -> Any:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        async def method(request: Request) -> JSONResponse:
            args: dict[str, Any] = dict(request.query_params)
            raw = await request.body()
            kind = request.headers.get("content-type", "")
            if raw and kind.startswith("application/json"):
                args.update(json.loads(raw))
            elif raw:
                args.update((await request.form()).items())
            status, body = self.answer(
                request.path_params["method"], args, request.headers.get("authorization")
            )
            headers = {"Retry-After": "1"} if status == 429 else None
            return JSONResponse(body, status_code=status, headers=headers)

        return Starlette(routes=[Route("/api/{method}", method, methods=["GET", "POST"])])


@contextmanager
def loopback_slack() -> Iterator[tuple[SlackApi, str]]:
    """A loopback Slack served until the block ends: (its state, the Web API's base URL)."""
    api = SlackApi()
    with serving(api.asgi()) as url:
        yield api, f"{url}/api/"


# -- what Slack sends when a button is clicked -----------------------------------------------


def sign(body: bytes, timestamp: int | str, secret: str = SECRET) -> dict[str, str]:
    """The headers Slack signs a request with: ``v0=`` + hex HMAC-SHA256, under the signing
    secret, of ``v0:<timestamp>:<body>``."""
    base = f"v0:{timestamp}:".encode() + body
    mac = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(timestamp), "X-Slack-Signature": f"v0={mac}"}


def block_actions(
    message: dict[str, Any], user: str, label: str, channel: str = CHANNEL
) -> dict[str, Any]:
    """The ``block_actions`` payload of ``user`` clicking the button labelled ``label`` on
    ``message`` (as the loopback Slack holds it)."""
    buttons = [
        (block, element)
        for block in message["blocks"]
        if block["type"] == "actions"
        for element in block["elements"]
    ]
    (block, button), *_ = [(b, e) for b, e in buttons if e["text"]["text"] == label]
    action = {
        "type": "button",
        "block_id": block["block_id"],
        "action_id": button["action_id"],
        "text": {**button["text"], "emoji": True},
        "action_ts": f"{time.time():.6f}",
    }
    for key in ("value", "style", "url"):
        if key in button:
            action[key] = button[key]
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": TEAM},
        "api_app_id": APP_ID,
        "token": "a-deprecated-verification-token",
        "container": {
            "type": "message",
            "message_ts": message["ts"],
            "channel_id": channel,
            "is_ephemeral": False,
        },
        "trigger_id": "1.2.3",
        "team": {"id": TEAM, "domain": "interlude"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel, "name": "approvals"},
        "message": {k: v for k, v in message.items() if k != "metadata"},
        "state": {"values": {}},
        "response_url": "https://hooks.slack.test/actions/T0/1/x",
        "actions": [action],
    }


def form(payload: dict[str, Any]) -> bytes:
    """The request body Slack posts: ``payload=<JSON>``, form-encoded."""
    return urlencode({"payload": json.dumps(payload)}).encode()


def clicked(
    message: dict[str, Any], user: str, label: str, *, at: float | None = None
) -> tuple[bytes, dict[str, str]]:
    """(body, headers) of Slack's signed request for ``user`` clicking ``label``."""
    body = form(block_actions(message, user, label))
    headers = sign(body, int(time.time() if at is None else at))
    return body, {**headers, "Content-Type": "application/x-www-form-urlencoded"}


def answer_buttons(message: dict[str, Any]) -> list[tuple[str, Any]]:
    """(label, answer) of the message's answer buttons; the inbox link is left out."""
    return [
        (e["text"]["text"], json.loads(e["value"])["a"])
        for b in message["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
        if "value" in e
    ]


def status_line(message: dict[str, Any]) -> str | None:
    """The text of the message's status line (who answered, or why not)."""
    for block in message["blocks"]:
        if block.get("block_id") == "interlude-status":
            return str(block["elements"][0]["text"])
    return None
