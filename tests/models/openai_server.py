"""A loopback Chat Completions server for the OpenAI adapter's tests.

It speaks the real wire format: ``POST /v1/chat/completions`` answered with a chunked
``text/event-stream`` of ``data: {chat.completion.chunk}`` lines and ``data: [DONE]``, or a JSON
error body with a status. Replies are scripted per test; every request body is recorded.
The chunk helpers copy the shape of recorded api.openai.com streams.
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "gpt-4o-mini-2024-07-18"


@dataclass
class Reply:
    """One scripted answer: a stream of SSE ``data`` payloads, or an error status and body."""

    status: int = 200
    events: list[dict[str, Any] | str] = field(default_factory=list)
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    done: bool = True  # end the stream with "data: [DONE]"


class OpenAIServer:
    """Plays ``replies`` in order (then ``fallback`` for ever, if set); records requests."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.fallback: Reply | None = None
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def add(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def start(self) -> OpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next(self) -> Reply:
        if self.replies:
            return self.replies.popleft()
        if self.fallback is not None:
            return self.fallback
        return error_reply(400, "the test server has no scripted reply left", "script_error")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                assert self.path == "/v1/chat/completions", self.path
                server.requests.append(json.loads(raw))
                server.headers.append({k.lower(): v for k, v in self.headers.items()})
                problem = response_format_problem(server.requests[-1])
                reply = error_reply(400, problem) if problem else server._next()
                if reply.status != 200:
                    data = json.dumps(reply.body).encode()
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                payloads = [e if isinstance(e, str) else json.dumps(e) for e in reply.events]
                if reply.done:
                    payloads.append("[DONE]")
                for payload in payloads:
                    piece = f"data: {payload}\n\n".encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                if not reply.done:
                    self.close_connection = True

        return Handler


def response_format_problem(body: dict[str, Any]) -> str | None:
    """What api.openai.com refuses in a ``json_schema`` response format (None: accepted):
    a name outside ``[a-zA-Z0-9_-]{1,64}``, a schema that is not an object, and in strict mode
    an object that is not closed or does not require all its properties."""
    fmt = body.get("response_format")
    if fmt is None or fmt.get("type") != "json_schema":
        return None
    spec = fmt.get("json_schema") or {}
    name = spec.get("name", "")
    if not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name):
        return f"Invalid 'response_format.json_schema.name': {name!r}"
    schema = spec.get("schema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return (
            f"Invalid schema for response_format {name!r}: schema must be a JSON Schema of "
            "'type: \"object\"'"
        )
    if spec.get("strict"):
        open_ = _open_objects(schema)
        if open_:
            return (
                f"Invalid schema for response_format {name!r}: In context=({open_[0]}), "
                "'additionalProperties' is required to be supplied and to be false."
            )
        for where, node in _objects(schema):
            props = set(node.get("properties", {}))
            if props != set(node.get("required", [])):
                return (
                    f"Invalid schema for response_format {name!r}: In context=({where}), "
                    "'required' is required to be supplied and to be an array including every "
                    "key in properties."
                )
    return None


def _objects(schema: Any, where: str = "(root)") -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            out.append((where, schema))
        for key, value in schema.items():
            if key in ("properties", "$defs") and isinstance(value, dict):
                for name, sub in value.items():
                    out += _objects(sub, f"{where}/{key}/{name}")
            elif isinstance(value, dict):
                out += _objects(value, f"{where}/{key}")
            elif isinstance(value, list):
                for i, sub in enumerate(value):
                    out += _objects(sub, f"{where}/{key}/{i}")
    return out


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


# --- chunk helpers: shaped like recorded api.openai.com streams ---------------------------------


def chunk(delta: dict[str, Any] | None = None, finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion.chunk",
        "created": 1741569952,
        "model": MODEL,
        "service_tier": "default",
        "system_fingerprint": "fp_06737a9306",
        "choices": [
            {"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish_reason}
        ],
        "usage": None,
    }


def usage_chunk(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """The last chunk when ``stream_options.include_usage`` is set: no choices, the usage."""
    body = chunk()
    body["choices"] = []
    body["usage"] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    return body


def role_chunk(**extra: Any) -> dict[str, Any]:
    return chunk({"role": "assistant", "content": "", "refusal": None, **extra})


def text_reply(*pieces: str, finish: str = "stop", usage: tuple[int, int] = (12, 7)) -> Reply:
    events: list[dict[str, Any] | str] = [role_chunk()]
    events += [chunk({"content": p}) for p in pieces]
    events += [chunk({}, finish), usage_chunk(*usage)]
    return Reply(events=events)


def tool_start(index: int, call_id: str, name: str, arguments: str = "") -> dict[str, Any]:
    """The first fragment of a call: index, id, type and name (arguments usually empty)."""
    return chunk(
        {
            "tool_calls": [
                {
                    "index": index,
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            ]
        }
    )


def tool_args(index: int, arguments: str) -> dict[str, Any]:
    """A later fragment: only the index and a piece of the arguments."""
    return chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments}}]})


def tool_reply(*calls: tuple[str, str, str], usage: tuple[int, int] = (50, 20)) -> Reply:
    """Calls (id, name, arguments), each streamed as a start and two argument fragments."""
    events: list[dict[str, Any] | str] = [chunk({"role": "assistant", "content": None})]
    for index, (call_id, name, arguments) in enumerate(calls):
        half = len(arguments) // 2
        events.append(tool_start(index, call_id, name))
        events.append(tool_args(index, arguments[:half]))
        events.append(tool_args(index, arguments[half:]))
    events += [chunk({}, "tool_calls"), usage_chunk(*usage)]
    return Reply(events=events)


def error_reply(
    status: int,
    message: str,
    code: str | None = None,
    type_: str = "invalid_request_error",
    headers: dict[str, str] | None = None,
) -> Reply:
    body = {"error": {"message": message, "type": type_, "param": None, "code": code}}
    return Reply(status=status, body=body, headers=headers or {})


def context_overflow_reply() -> Reply:
    """OpenAI's answer to a conversation too long for the model: a 400 with code
    ``context_length_exceeded`` (the message as the API words it)."""
    return error_reply(
        400,
        "This model's maximum context length is 128000 tokens. However, your messages resulted "
        "in 130542 tokens. Please reduce the length of the messages.",
        "context_length_exceeded",
    )
