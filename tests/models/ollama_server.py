"""A loopback HTTP server speaking Ollama's native chat wire format, for the adapter tests.

``POST /api/chat`` answers with the next scripted reply: either a 200 ``application/x-ndjson``
body sent in chunks, one JSON object per line (the way ``ollama serve`` streams, ending with a
``"done": true`` line carrying ``done_reason`` and the token counts), or an HTTP error with
Ollama's ``{"error": "..."}`` body. Every request is recorded (path, headers, JSON body) so
tests can check the request conversion.
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "ErrorReply",
    "OllamaServer",
    "Recorded",
    "StreamReply",
    "chunk",
    "done",
    "text_reply",
    "tool_reply",
]

MODEL = "llama3.2"
_clock = itertools.count()


def _created_at() -> str:
    n = next(_clock)
    return f"2025-06-01T12:{n // 60 % 60:02d}:{n % 60:02d}.{481_926 + n:06d}Z"


def chunk(
    content: str = "",
    *,
    thinking: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    model: str = MODEL,
) -> dict[str, Any]:
    """One ``"done": false`` line, as recorded from ``ollama serve``."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if thinking is not None:
        message["thinking"] = thinking
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return {"model": model, "created_at": _created_at(), "message": message, "done": False}


def done(
    reason: str = "stop", *, usage: tuple[int, int] = (26, 12), model: str = MODEL
) -> dict[str, Any]:
    """The final line: empty content, ``done_reason``, durations and token counts."""
    return {
        "model": model,
        "created_at": _created_at(),
        "message": {"role": "assistant", "content": ""},
        "done_reason": reason,
        "done": True,
        "total_duration": 1_843_775_083,
        "load_duration": 21_538_458,
        "prompt_eval_count": usage[0],
        "prompt_eval_duration": 301_620_042,
        "eval_count": usage[1],
        "eval_duration": 1_517_583_541,
    }


def call(name: str, arguments: Any, index: int = 0, call_id: str | None = None) -> dict[str, Any]:
    """A tool call as Ollama >= 0.12 sends it (an id and an index); older ones send neither."""
    entry: dict[str, Any] = {"function": {"index": index, "name": name, "arguments": arguments}}
    if call_id is not None:
        entry["id"] = call_id
    return entry


@dataclass(frozen=True)
class StreamReply:
    """A 200 response streaming ``lines`` (dicts, or raw text sent as it is)."""

    lines: list[dict[str, Any] | str]


@dataclass(frozen=True)
class ErrorReply:
    """An HTTP error the way Ollama sends one: ``{"error": message}``."""

    status: int
    error: str
    headers: dict[str, str] = field(default_factory=dict)


Reply = StreamReply | ErrorReply


@dataclass(frozen=True)
class Recorded:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def text_reply(
    *parts: str, reason: str = "stop", usage: tuple[int, int] = (26, 12), thinking: tuple = ()
) -> StreamReply:
    lines: list[dict[str, Any] | str] = [chunk(thinking=t) for t in thinking]
    lines += [chunk(p) for p in parts]
    return StreamReply([*lines, done(reason, usage=usage)])


def tool_reply(*calls: tuple[str, Any], text: str | None = None) -> StreamReply:
    """Text (if any), then every call whole in one chunk, then ``done_reason: "stop"``."""
    lines: list[dict[str, Any] | str] = [chunk(text)] if text else []
    entries = [call(n, a, i, f"call_srv{i}") for i, (n, a) in enumerate(calls)]
    lines += [chunk(tool_calls=entries), done("stop")]
    return StreamReply(lines)


class OllamaServer:
    """``with OllamaServer() as server:`` serves ``server.replies`` in order on ``server.url``."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests]

    def add(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def __enter__(self) -> OllamaServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            if not self.replies:
                return ErrorReply(500, "test server: no reply left")
            return self.replies.pop(0)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path != "/api/chat":
                    self._send_error(ErrorReply(404, "404 page not found"))
                    return
                headers = {k.lower(): v for k, v in self.headers.items()}
                reply = server._next(Recorded(self.path, headers, body))
                fmt = body.get("format")
                if fmt is not None and fmt != "json" and not isinstance(fmt, dict):
                    reply = ErrorReply(400, f"invalid format: {fmt!r}")  # as ollama serve does
                if isinstance(reply, ErrorReply):
                    self._send_error(reply)
                else:
                    self._send_stream(reply)

            def _send_error(self, reply: ErrorReply) -> None:
                raw = json.dumps({"error": reply.error}).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(raw)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(raw)

            def _send_stream(self, reply: StreamReply) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    for line in reply.lines:
                        text = line if isinstance(line, str) else json.dumps(line)
                        self._chunk((text + "\n").encode())
                    self._chunk(b"")
                except OSError:
                    pass  # the client went away

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

        return Handler


def context_overflow() -> ErrorReply:
    """Ollama's answer when a request exceeds ``num_ctx`` and truncation is off: a 400 whose
    ``error`` is llama.cpp's error object as JSON text."""
    inner = {
        "error": {
            "code": 400,
            "message": "request (8889 tokens) exceeds the available context size (4096 tokens), "
            "try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 8889,
            "n_ctx": 4096,
        }
    }
    return ErrorReply(400, json.dumps(inner))
