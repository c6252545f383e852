"""A loopback server that speaks the Anthropic Messages API's streaming wire format.

Each test queues canned replies (shaped like recorded ones: ``event: <type>`` / ``data: <json>``
server-sent events, or JSON error bodies with the API's status codes and headers) and reads
back the requests the real ``anthropic`` client sent.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Event = tuple[str, dict[str, Any]]


@dataclass
class Reply:
    """One canned HTTP response; ``cut`` sends only half the body, then drops the connection."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    cut: bool = False


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class AnthropicServer:
    """``with AnthropicServer() as server:`` serves ``server.url`` until the block ends."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with server._lock:
                    server.requests.append(
                        Request(
                            self.path,
                            {k.lower(): v for k, v in self.headers.items()},
                            json.loads(raw or b"{}"),
                        )
                    )
                    problem = output_format_problem(server.requests[-1].body)
                    if problem is not None:
                        reply = error(400, "invalid_request_error", problem)
                    else:
                        reply = server.replies.popleft() if server.replies else None
                if reply is None:
                    reply = error(500, "api_error", "the test server has no reply queued")
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(reply.body)))
                self.send_header("Connection", "close")
                self.send_header("request-id", f"req_test_{len(server.requests)}")
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(reply.body[: len(reply.body) // 2] if reply.cut else reply.body)
                self.wfile.flush()
                self.close_connection = True

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self) -> AnthropicServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests]


def output_format_problem(body: dict[str, Any]) -> str | None:
    """What the Messages API refuses in ``output_config.format`` (None: accepted): a format
    other than ``json_schema`` with a schema, or an object schema not closed with
    ``additionalProperties: false``."""
    fmt = (body.get("output_config") or {}).get("format")
    if fmt is None:
        return None
    if fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
        return "output_config.format: expected {'type': 'json_schema', 'schema': {...}}"
    open_ = _open_objects(fmt["schema"])
    if open_:
        return (
            f"output_config.format.schema: For 'object' type, 'additionalProperties' must be "
            f"explicitly set to false (at {open_[0]})"
        )
    return None


def _open_objects(schema: Any, where: str = "") -> list[str]:
    """Paths of object schemas that do not say ``additionalProperties: false``."""
    found: list[str] = []
    if isinstance(schema, dict):
        if (schema.get("type") == "object" or "properties" in schema) and schema.get(
            "additionalProperties"
        ) is not False:
            found.append(where or "(root)")
        for key, value in schema.items():
            if key in ("properties", "$defs"):
                for name, sub in (value or {}).items():
                    found += _open_objects(sub, f"{where}/{key}/{name}")
            elif isinstance(value, dict):
                found += _open_objects(value, f"{where}/{key}")
            elif isinstance(value, list):
                for i, sub in enumerate(value):
                    found += _open_objects(sub, f"{where}/{key}/{i}")
    return found


# --- replies -------------------------------------------------------------------------------


def sse(events: list[Event], *, cut: bool = False) -> Reply:
    """A 200 streaming reply made of ``(event type, data)`` pairs."""
    body = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
    return Reply(
        200,
        body.encode(),
        "text/event-stream; charset=utf-8",
        {"Cache-Control": "no-cache"},
        cut=cut,
    )


def error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> Reply:
    """An API error reply, e.g. ``error(429, "rate_limit_error", ...)``."""
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_x"}
    return Reply(status, json.dumps(body).encode(), headers=dict(headers or {}))


# --- events, as the API sends them -----------------------------------------------------------


def message_start(input_tokens: int = 25, model: str = "claude-sonnet-4-5") -> Event:
    return (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": input_tokens,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                    "output_tokens": 1,
                },
            },
        },
    )


def ping() -> Event:
    return ("ping", {"type": "ping"})


def block_start(index: int, block: dict[str, Any]) -> Event:
    return (
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": block},
    )


def delta(index: int, delta: dict[str, Any]) -> Event:
    return ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})


def block_stop(index: int) -> Event:
    return ("content_block_stop", {"type": "content_block_stop", "index": index})


def message_delta(stop_reason: str, output_tokens: int = 15) -> Event:
    return (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        },
    )


def message_stop() -> Event:
    return ("message_stop", {"type": "message_stop"})


def stream_error(kind: str = "overloaded_error", message: str = "Overloaded") -> Event:
    return ("error", {"type": "error", "error": {"type": kind, "message": message}})


def text_block(index: int, *chunks: str) -> list[Event]:
    return [
        block_start(index, {"type": "text", "text": ""}),
        *(delta(index, {"type": "text_delta", "text": c}) for c in chunks),
        block_stop(index),
    ]


def tool_block(index: int, tool_id: str, name: str, *fragments: str) -> list[Event]:
    return [
        block_start(index, {"type": "tool_use", "id": tool_id, "name": name, "input": {}}),
        *(delta(index, {"type": "input_json_delta", "partial_json": f}) for f in fragments),
        block_stop(index),
    ]


def thinking_block(index: int, signature: str, *chunks: str) -> list[Event]:
    return [
        block_start(index, {"type": "thinking", "thinking": "", "signature": ""}),
        *(delta(index, {"type": "thinking_delta", "thinking": c}) for c in chunks),
        delta(index, {"type": "signature_delta", "signature": signature}),
        block_stop(index),
    ]


def turn(
    *blocks: list[Event],
    stop_reason: str = "end_turn",
    input_tokens: int = 25,
    output_tokens: int = 15,
) -> Reply:
    """A whole streamed reply: start, a ping, the blocks, the stop reason and usage."""
    events = [message_start(input_tokens), ping()]
    for block in blocks:
        events.extend(block)
    events += [message_delta(stop_reason, output_tokens), message_stop()]
    return sse(events)


def text_turn(text: str, **kwargs: Any) -> Reply:
    return turn(text_block(0, *_split(text)), **kwargs)


def tool_turn(*calls: tuple[str, str, dict[str, Any]], text: str | None = None) -> Reply:
    """Tool calls ``(id, name, input)``, each input streamed as two JSON fragments."""
    blocks = [text_block(0, text)] if text else []
    for i, (tool_id, name, args) in enumerate(calls, start=len(blocks)):
        blocks.append(tool_block(i, tool_id, name, *_split(json.dumps(args))))
    return turn(*blocks, stop_reason="tool_use")


def _split(text: str) -> list[str]:
    middle = len(text) // 2
    return [text[:middle], text[middle:]] if middle else [text]


def context_overflow() -> Reply:
    """Anthropic's answer to a prompt too long for the model: a 400 ``invalid_request_error``
    whose message starts ``prompt is too long``."""
    return error(400, "invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum")
