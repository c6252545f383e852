"""Ollama's native chat API (``POST /api/chat``) through the official ``ollama`` package.

Ollama streams NDJSON chunks; tool calls arrive whole (arguments as an object), usually without
an id, and the reply then ends with ``done_reason: "stop"``: so a reply with tool calls stops
with ``"tool_use"``, ``"length"`` becomes ``"max_tokens"``. Thinking models (``think=True``)
stream ``message.thinking`` as reasoning. Tool results go back as ``role: "tool"`` messages in
tool-use order with ``tool_name``; Ollama has no tool-call ids to pair them by.

Context overflow: by default Ollama drops the oldest messages silently to fit ``num_ctx``, so no
ContextWindowOverflowError is raised unless the server reports an overflow error (a 400 when
the request disables truncation, which the ``ollama`` client's ``chat()`` cannot ask for).

Retry-After: the ``ollama`` client's ``ResponseError`` keeps no headers; the wait is read from
the HTTP error it was raised from (``retry-after-ms`` or ``retry-after``). An error reported
inside the NDJSON stream has no headers, so no ``retry_after`` then.

Structured output sends the output schema as ``format`` (Ollama constrains the reply to it);
``format`` given in ``params`` wins.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Literal

import httpx
import ollama
import pydantic

from .._messages import Image, Json, Message, Reasoning, Text, ToolResult, ToolUse, Usage
from .._stream import (
    ModelEvent,
    ModelStop,
    ModelStopReason,
    ReasoningDelta,
    TextDelta,
    ToolUseDelta,
    ToolUseStart,
)
from .._tools import ToolSpec
from ..errors import (
    ConfigurationError,
    ContextWindowOverflowError,
    ModelAuthError,
    ModelError,
    ModelProviderError,
    ModelThrottledError,
)
from ._clients import LoopClients
from ._errors import is_context_overflow, malformed_chunk, retry_after
from ._retry import RetryPolicy, with_retries
from ._schema import OutputSchema
from ._stop import with_tool_uses

__all__ = ["DEFAULT_HOST", "OllamaModel", "build_messages", "build_tools", "translate_error"]

DEFAULT_HOST = "http://127.0.0.1:11434"
_RESERVED = {"model", "messages", "tools", "stream", "think", "options"}

Think = bool | Literal["low", "medium", "high"]
_Opened = tuple[AsyncIterator[ollama.ChatResponse], ollama.ChatResponse | None]


class OllamaModel:
    """A model served by Ollama, e.g. ``OllamaModel("qwen3:8b", think=True)``.

    ``host`` defaults to ``OLLAMA_HOST`` or ``http://127.0.0.1:11434``; ``client_args`` go to
    ``ollama.AsyncClient`` (``timeout``, ``headers``...). ``max_tokens`` and ``temperature``
    become the options ``num_predict`` and ``temperature``; ``options`` adds any other Ollama
    option (``num_ctx``, ``top_p``...) and wins over those two. ``params`` are passed to
    ``chat()`` as they are (``keep_alive``, ``format``...).
    """

    def __init__(
        self,
        model_id: str,
        *,
        host: str | None = None,
        client: ollama.AsyncClient | None = None,
        client_args: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        think: Think | None = None,
        options: Mapping[str, Any] | None = None,
        retry: RetryPolicy = RetryPolicy(),  # noqa: B008 - frozen, shared safely
        params: Mapping[str, Any] | None = None,
        native_output: bool = True,
    ) -> None:
        if client is not None and client_args:
            raise ConfigurationError("give OllamaModel either client or client_args, not both")
        self.native_output = native_output
        """Whether structured output is asked for with ``format`` (else a final-answer tool)."""
        clash = sorted(_RESERVED & set(params or {}))
        if clash:
            raise ConfigurationError(
                f"OllamaModel params cannot set {clash!r}: use the constructor's arguments"
            )
        self.model_id = model_id
        self.host = host or os.environ.get("OLLAMA_HOST") or DEFAULT_HOST
        if client is not None and host is None:
            self.host = str(getattr(getattr(client, "_client", None), "base_url", self.host))
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.think = think
        self.options = dict(options or {})
        self.retry = retry
        self.params = dict(params or {})
        self._client = client
        # No retries to disable: the ollama client has none. Without a timeout it would wait
        # forever for an unreachable host; reading stays unbounded (loading a model is slow).
        self._client_args = {"timeout": httpx.Timeout(None, connect=10.0), **(client_args or {})}
        self._loop_clients = LoopClients(
            lambda: ollama.AsyncClient(host=self.host, **self._client_args),
            lambda c: c.close(),  # type: ignore[no-untyped-call]
        )

    @classmethod
    def from_env(cls, model_id: str) -> OllamaModel:
        """The model at ``OLLAMA_HOST`` (default ``http://127.0.0.1:11434``); no key is needed.

        For ollama.com or a proxy that wants one, the ollama client sends ``OLLAMA_API_KEY``.
        """
        return cls(model_id, host=os.environ.get("OLLAMA_HOST") or DEFAULT_HOST)

    def __repr__(self) -> str:
        return f"OllamaModel({self.model_id!r}, host={self.host!r})"

    async def stream(
        self,
        messages: Sequence[Message],
        tool_specs: Sequence[ToolSpec],
        system_prompt: str | None,
        *,
        output_schema: OutputSchema | None = None,
    ) -> AsyncIterator[ModelEvent]:
        chat_messages = build_messages(messages, system_prompt)
        params = dict(self.params)
        if output_schema is not None:
            params.setdefault("format", output_schema.schema)
        tools = build_tools(tool_specs)
        options = {"num_predict": self.max_tokens, "temperature": self.temperature, **self.options}
        options = {k: v for k, v in options.items() if v is not None}
        # Our own clients are kept one per event loop: connections belong to the loop.
        client = self._client if self._client is not None else self._loop_clients.get()

        async def open_reply() -> _Opened:
            reply = await client.chat(
                self.model_id,
                chat_messages,
                tools=tools or None,
                stream=True,
                think=self.think,
                options=options or None,
                **params,
            )
            # The request is only sent when the stream is first read.
            return reply, await anext(reply, None)

        reply, chunk = await with_retries(self.retry, open_reply, self._translate)
        reader = ReplyReader()
        started = False
        try:
            while chunk is not None:
                for event in reader.read(chunk):
                    started = True
                    yield event
                chunk = await self._next(reply, started)
        finally:
            aclose = getattr(reply, "aclose", None)
            if aclose is not None:
                await aclose()
        stop = reader.stop()
        if stop is None:
            raise ModelProviderError(
                f"the Ollama reply of {self.model_id!r} ended before its final 'done' message",
                provider="ollama",
                retryable=True,
            )
        yield stop

    async def _next(
        self, reply: AsyncIterator[ollama.ChatResponse], started: bool
    ) -> ollama.ChatResponse | None:
        try:
            return await anext(reply, None)
        except Exception as exc:
            error = translate_error(exc, self.model_id, self.host, started=started)
            if error is None:
                raise
            raise error from exc

    def _translate(self, exc: Exception) -> ModelError | None:
        return translate_error(exc, self.model_id, self.host)


# --- our conversation -> Ollama's request ------------------------------------------------------


def build_messages(messages: Sequence[Message], system_prompt: str | None) -> list[dict[str, Any]]:
    """The ``messages`` of a chat request; images go as raw bytes (the client base64s them)."""
    out: list[dict[str, Any]] = []
    if system_prompt:
        out.append({"role": "system", "content": system_prompt})
    tool_names: dict[str, str] = {}
    for message in messages:
        if message.role == "assistant":
            out.append(_assistant_message(message, tool_names))
        else:
            out.extend(_user_messages(message, tool_names))
    return out


def _assistant_message(message: Message, tool_names: dict[str, str]) -> dict[str, Any]:
    text: list[str] = []
    thinking: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, Text):
            text.append(block.text)
        elif isinstance(block, Reasoning):
            thinking.append(block.text)
        elif isinstance(block, ToolUse):
            tool_names[block.id] = block.name
            calls.append({"function": {"name": block.name, "arguments": block.input}})
    entry: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
    if thinking:  # models such as gpt-oss want their thinking back with their tool calls
        entry["thinking"] = "".join(thinking)
    if calls:
        entry["tool_calls"] = calls
    return entry


def _user_messages(message: Message, tool_names: Mapping[str, str]) -> list[dict[str, Any]]:
    """Tool results first (one ``tool`` message each, in order), then the user's own words."""
    out: list[dict[str, Any]] = []
    text: list[str] = []
    images: list[bytes] = []
    for block in message.content:
        if isinstance(block, ToolResult):
            out.append(_tool_message(block, tool_names.get(block.tool_use_id)))
        elif isinstance(block, Text):
            text.append(block.text)
        elif isinstance(block, Image):
            images.append(block.data)
    if text or images:
        entry: dict[str, Any] = {"role": "user", "content": "\n".join(text)}
        if images:
            entry["images"] = images
        out.append(entry)
    return out


def _tool_message(result: ToolResult, tool_name: str | None) -> dict[str, Any]:
    parts: list[str] = []
    images: list[bytes] = []
    for block in result.content:
        if isinstance(block, Text):
            parts.append(block.text)
        elif isinstance(block, Json):
            parts.append(json.dumps(block.value, ensure_ascii=False))
        elif isinstance(block, Image):
            images.append(block.data)
    content = "\n".join(parts)
    if result.status == "error":
        content = f"Error: {content}" if content else "Error"
    entry: dict[str, Any] = {"role": "tool", "content": content}
    if tool_name is not None:
        entry["tool_name"] = tool_name
    if images:
        entry["images"] = images
    return entry


def build_tools(specs: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as Ollama function tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": _parameters(spec.input_schema),
            },
        }
        for spec in specs
    ]


def _parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema in the shape the ollama client keeps.

    The client re-validates tools with a fixed model: a property keeps only ``type``, ``items``,
    ``description`` and ``enum``. So ``anyOf`` (every optional parameter) would become ``{}``
    and defaults would vanish: fold them into the fields that survive.
    """
    out = dict(schema)
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        out["properties"] = {name: _property(p) for name, p in properties.items()}
    return out


def _property(prop: Any) -> Any:
    if not isinstance(prop, Mapping):
        return prop
    out = dict(prop)
    branches = [
        b
        for b in [*prop.get("anyOf", ()), *prop.get("oneOf", ())]
        if isinstance(b, Mapping) and b.get("type") != "null"
    ]
    if branches and "type" not in out:
        types = [b["type"] for b in branches if isinstance(b.get("type"), str)]
        if types:
            out["type"] = types[0] if len(types) == 1 else types
        for key in ("items", "enum", "description"):
            found = next((b[key] for b in branches if key in b), None)
            if key not in out and found is not None:
                out[key] = found
    if prop.get("default") is not None:
        note = f"Default: {json.dumps(prop['default'], ensure_ascii=False)}."
        out["description"] = f"{out['description']} {note}" if out.get("description") else note
    return out


# --- Ollama's stream -> our events -------------------------------------------------------------


class ReplyReader:
    """Turns the chunks of one reply into model events and, at the end, its ModelStop."""

    def __init__(self) -> None:
        # Ollama's tool calls carry no id the client keeps: make ones unique in the conversation
        # (interrupt ids are scoped by tool-use id, so "call_0" twice would share answers).
        self._id_prefix = f"call_{uuid.uuid4().hex[:12]}"
        self.tool_calls = 0
        self.done: ollama.ChatResponse | None = None

    def read(self, chunk: ollama.ChatResponse) -> list[ModelEvent]:
        message = chunk.message
        events: list[ModelEvent] = []
        if message.thinking:
            events.append(ReasoningDelta(message.thinking))
        if message.content:
            events.append(TextDelta(message.content))
        for call in message.tool_calls or ():
            events.extend(self._tool_call(call))
        if chunk.done:
            self.done = chunk
        return events

    def _tool_call(self, call: ollama.Message.ToolCall) -> list[ModelEvent]:
        tool_use_id = getattr(call, "id", None) or f"{self._id_prefix}_{self.tool_calls}"
        self.tool_calls += 1
        name = call.function.name
        arguments: object = call.function.arguments
        if isinstance(arguments, str):  # arguments as JSON text: the loop parses and checks them
            return [ToolUseStart(tool_use_id, name), ToolUseDelta(tool_use_id, arguments)]
        whole = dict(arguments) if isinstance(arguments, Mapping) else {}
        return [ToolUseStart(tool_use_id, name, whole)]

    def stop(self) -> ModelStop | None:
        """The reply's stop event, or None if the final ``done`` chunk never came."""
        if self.done is None:
            return None
        reason: ModelStopReason = "max_tokens" if self.done.done_reason == "length" else "end_turn"
        reason = with_tool_uses(reason, self.tool_calls > 0)
        usage = Usage(self.done.prompt_eval_count or 0, self.done.eval_count or 0)
        return ModelStop(reason, usage)


# --- errors ------------------------------------------------------------------------------------


def translate_error(
    exc: Exception, model_id: str, host: str, *, started: bool = False
) -> ModelError | None:
    """A typed ModelError for what the ollama client raised (None: not an Ollama failure).

    ``started``: the reply had already passed events on (a garbled chunk is then not retryable).
    """
    where = f"Ollama model {model_id!r} at {host}"
    if isinstance(exc, json.JSONDecodeError):  # an NDJSON line that is not JSON
        return malformed_chunk(where, exc, provider="ollama", started=started)
    if isinstance(exc, ollama.ResponseError):
        status = exc.status_code if exc.status_code > 0 else None  # -1: an in-stream error
        text = str(exc.error)
        kw: dict[str, Any] = {"provider": "ollama", "status": status}
        # The client keeps no headers, but raises from within the httpx error that has them.
        context = exc.__context__
        if isinstance(context, httpx.HTTPStatusError):
            kw["retry_after"] = retry_after(context.response.headers)
        if is_context_overflow(text):
            return ContextWindowOverflowError(
                f"{where}: the conversation is too long: {text}", **kw
            )
        if status == 429 or (status == 503 and "busy" in text.lower()):
            return ModelThrottledError(
                f"{where} is throttling requests: {text}", retryable=True, **kw
            )
        if status in (401, 403):
            return ModelAuthError(
                f"{where} refused the request ({status}: {text}); "
                "set OLLAMA_API_KEY if the server needs a key",
                **kw,
            )
        if status == 404:
            return ModelProviderError(
                f"{where}: {text} (status 404); run `ollama pull {model_id}` on that server, "
                "or check that OLLAMA_HOST points at Ollama",
                **kw,
            )
        how = f"status {status}" if status else "reported in the reply stream"
        retryable = status is None or status >= 500
        return ModelProviderError(f"{where} failed: {text} ({how})", retryable=retryable, **kw)
    if isinstance(exc, ConnectionError | httpx.ConnectError | httpx.ConnectTimeout):
        return ModelProviderError(
            f"Ollama is not reachable at {host} (for model {model_id!r}): start it with "
            "`ollama serve` or set OLLAMA_HOST",
            provider="ollama",
            retryable=True,
        )
    if isinstance(exc, httpx.TransportError):
        return ModelProviderError(
            f"{where}: the connection failed ({type(exc).__name__}: {exc})",
            provider="ollama",
            retryable=True,
        )
    if isinstance(exc, pydantic.ValidationError):  # e.g. tool arguments sent as a string
        first = exc.errors()[0]
        at = ".".join(str(part) for part in first["loc"])
        return ModelProviderError(
            f"{where} sent a reply the ollama client cannot read: {at}: {first['msg']} "
            f"(got {first.get('input')!r:.200})",
            provider="ollama",
        )
    return None
