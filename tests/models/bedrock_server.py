"""A loopback HTTP server speaking Bedrock's ConverseStream wire format, for the adapter tests.

``POST /model/{modelId}/converse-stream`` answers with the next scripted reply: either an
``application/vnd.amazon.eventstream`` body of binary event frames (sent as chunks, the way
Bedrock streams them) or an HTTP error with a JSON body and the ``x-amzn-ErrorType`` header.
Every request is recorded (path, headers, decoded JSON body) so tests can check the request
conversion. The frame encoder follows the AWS event-stream spec: prelude (total length,
headers length, prelude CRC32), headers, payload, message CRC32.
"""

from __future__ import annotations

import json
import select
import socket
import struct
import threading
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

__all__ = [
    "BedrockServer",
    "ErrorReply",
    "Frame",
    "Recorded",
    "StreamReply",
    "encode_frame",
    "events",
    "exception_frame",
    "text_reply",
    "tool_reply",
]

_PADDING = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"


def encode_frame(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One event-stream message; every header is a string (type 7)."""
    encoded = b""
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        encoded += struct.pack(">B", len(raw_name)) + raw_name
        encoded += struct.pack(">BH", 7, len(raw_value)) + raw_value
    total = 4 + 4 + 4 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    prelude += struct.pack(">I", zlib.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + encoded + payload
    return message + struct.pack(">I", zlib.crc32(message) & 0xFFFFFFFF)


@dataclass(frozen=True)
class Frame:
    """A frame to send: an event (``messageStart``...) or an exception (``throttlingException``)."""

    event_type: str
    payload: dict[str, Any]
    exception: bool = False

    def encode(self) -> bytes:
        if self.exception:
            headers = {
                ":exception-type": self.event_type,
                ":content-type": "application/json",
                ":message-type": "exception",
            }
            return encode_frame(headers, json.dumps(self.payload).encode())
        headers = {
            ":event-type": self.event_type,
            ":content-type": "application/json",
            ":message-type": "event",
        }
        # Real Bedrock events carry a random-length "p" padding field; clients ignore it.
        body = dict(self.payload, p=_PADDING[: 3 + len(self.event_type) % 20])
        return encode_frame(headers, json.dumps(body).encode())


def exception_frame(kind: str, message: str) -> Frame:
    """A mid-stream error, e.g. ``exception_frame("throttlingException", "slow down")``."""
    return Frame(kind, {"message": message}, exception=True)


@dataclass(frozen=True)
class StreamReply:
    """A 200 response streaming ``frames``; ``hang`` keeps it open until the server is stopped,
    ``cut`` sends only the first half of the last frame, then drops the connection."""

    frames: list[Frame]
    hang: bool = False
    cut: bool = False


@dataclass(frozen=True)
class ErrorReply:
    """An HTTP error as Bedrock sends it: JSON ``{"message": ...}`` plus ``x-amzn-ErrorType``."""

    status: int
    error_type: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)


Reply = StreamReply | ErrorReply


@dataclass(frozen=True)
class Recorded:
    """One request the server received."""

    path: str
    model_id: str
    headers: dict[str, str]
    body: dict[str, Any]


def events(
    *blocks: tuple[str, Any],
    stop: str = "end_turn",
    usage: tuple[int, int] = (12, 7),
    tail: Iterable[Frame] = (),
) -> list[Frame]:
    """The frames of a whole reply, shaped like a recorded ConverseStream response.

    ``blocks`` are content blocks in order: ``("text", ["Hel", "lo"])``,
    ``("reasoning", (["I think"], "sig"))`` or ``("tool", (id, name, ["{\\"a\\"", ": 1}"]))``.
    """
    frames = [Frame("messageStart", {"role": "assistant"})]
    for index, (kind, value) in enumerate(blocks):
        if kind == "text":
            deltas: list[dict[str, Any]] = [{"text": part} for part in value]
        elif kind == "reasoning":
            parts, signature = value
            deltas = [{"reasoningContent": {"text": part}} for part in parts]
            if signature is not None:
                deltas.append({"reasoningContent": {"signature": signature}})
        elif kind == "tool":
            tool_id, name, parts = value
            start = {"toolUse": {"toolUseId": tool_id, "name": name}}
            frames.append(Frame("contentBlockStart", {"contentBlockIndex": index, "start": start}))
            deltas = [{"toolUse": {"input": part}} for part in parts]
        else:
            raise ValueError(f"unknown block kind {kind!r}")
        for delta in deltas:
            frames.append(Frame("contentBlockDelta", {"contentBlockIndex": index, "delta": delta}))
        frames.append(Frame("contentBlockStop", {"contentBlockIndex": index}))
    frames.append(Frame("messageStop", {"stopReason": stop}))
    frames.append(
        Frame(
            "metadata",
            {
                "usage": {
                    "inputTokens": usage[0],
                    "outputTokens": usage[1],
                    "totalTokens": usage[0] + usage[1],
                },
                "metrics": {"latencyMs": 321},
            },
        )
    )
    frames.extend(tail)
    return frames


def text_reply(
    *parts: str, stop: str = "end_turn", usage: tuple[int, int] = (12, 7)
) -> StreamReply:
    return StreamReply(events(("text", list(parts)), stop=stop, usage=usage))


def tool_reply(*calls: tuple[str, str, list[str]], text: str | None = None) -> StreamReply:
    blocks: list[tuple[str, Any]] = [("text", [text])] if text else []
    blocks += [("tool", call) for call in calls]
    return StreamReply(events(*blocks, stop="tool_use"))


def output_config_problem(body: dict[str, Any]) -> str | None:
    """What ConverseStream refuses in ``outputConfig.textFormat`` (None: accepted): a type
    other than ``json_schema``, or a ``jsonSchema.schema`` that is not JSON text of an object
    schema."""
    fmt = (body.get("outputConfig") or {}).get("textFormat")
    if fmt is None:
        return None
    if fmt.get("type") != "json_schema":
        return f"outputConfig.textFormat.type: {fmt.get('type')!r} is not 'json_schema'"
    definition = (fmt.get("structure") or {}).get("jsonSchema") or {}
    text = definition.get("schema")
    try:
        schema = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        schema = None
    if not isinstance(schema, dict):
        return "outputConfig.textFormat.structure.jsonSchema.schema: not a JSON Schema string"
    return None


class BedrockServer:
    """``with BedrockServer() as server:`` serves ``server.replies`` in order on ``server.url``."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[Recorded] = []
        self.released = threading.Event()
        self.hang_started = threading.Event()
        self.hang_ended = threading.Event()
        self.client_hung_up = threading.Event()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.01,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def add(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def __enter__(self) -> BedrockServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            if not self.replies:
                return ErrorReply(500, "InternalServerException", "test server: no reply left")
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
                path = self.path
                model_id = ""
                if path.startswith("/model/") and path.endswith("/converse-stream"):
                    model_id = unquote(path[len("/model/") : -len("/converse-stream")])
                reply = server._next(Recorded(path, model_id, dict(self.headers), body))
                problem = output_config_problem(body)
                if problem is not None:
                    reply = ErrorReply(400, "ValidationException", problem)
                if isinstance(reply, ErrorReply):
                    self._send_error(reply)
                else:
                    self._send_stream(reply)

            def _send_error(self, reply: ErrorReply) -> None:
                raw = json.dumps({"message": reply.message}).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.send_header("x-amzn-RequestId", "req-0001")
                self.send_header(
                    "x-amzn-ErrorType",
                    f"{reply.error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/",
                )
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(raw)

            def _send_stream(self, reply: StreamReply) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.amazon.eventstream")
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("x-amzn-RequestId", "req-0002")
                self.end_headers()
                try:
                    frames = [frame.encode() for frame in reply.frames]
                    if reply.cut:
                        frames[-1] = frames[-1][: len(frames[-1]) // 2]
                    for data in frames:
                        self._chunk(data)
                    if reply.cut:  # no closing chunk: the body ends mid-frame
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    if reply.hang:
                        server.hang_started.set()
                        self._wait_for_hangup()
                    self._chunk(b"")
                except OSError:
                    pass  # the client went away
                finally:
                    if reply.hang:
                        server.hang_ended.set()

            def _wait_for_hangup(self) -> None:
                # Keep the stream open until the client closes its end (or the server stops).
                while not server.released.is_set():
                    readable, _, _ = select.select([self.connection], [], [], 0.02)
                    if readable and not self.connection.recv(1, socket.MSG_PEEK):
                        server.client_hung_up.set()
                        return

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

        return Handler


def context_overflow() -> ErrorReply:
    """Bedrock's answer to an input too long for the model: a 400 ``ValidationException``."""
    return ErrorReply(400, "ValidationException", "Input is too long for requested model.")
