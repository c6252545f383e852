"""OpenAI Chat Completions, and any server that speaks it (vLLM, LM Studio, llama.cpp, Ollama /v1).

Conversion notes:

- Reasoning: streamed ``delta.reasoning_content`` (DeepSeek, vLLM) or ``delta.reasoning``
  becomes ReasoningDelta. Chat Completions has no field to send it back, so Reasoning blocks of
  past turns are dropped from requests.
- Tool results become ``{"role": "tool"}`` messages, one per result, in order. An error result's
  text starts with ``"Error: "``; Json blocks are sent as JSON text. Tool messages cannot carry
  images, so images from tool results follow in one user message (labelled with the tool call
  id), and the tool message says where they are.
- ``max_tokens`` is sent as ``max_completion_tokens`` to api.openai.com (its reasoning models
  refuse ``max_tokens``) and as ``max_tokens`` to any other server.
- Structured output is ``response_format: {"type": "json_schema", ...}``, ``strict`` when the
  schema meets strict mode (every object closed, every property required), else not strict.
  A server without it: ``OpenAIModel(..., native_output=False)`` uses a final-answer tool.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import openai
from openai import AsyncOpenAI

from .._messages import Image, Json, Message, Text, ToolResult, ToolUse, Usage
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
from ._errors import classify, malformed_chunk
from ._errors import retry_after as header_retry_after
from ._retry import RetryPolicy, with_retries
from ._schema import OutputSchema, closed_objects, strict_ready
from ._stop import with_tool_uses

__all__ = ["OpenAIModel"]

PROVIDER = "openai"
PLACEHOLDER_KEY = "not-needed"
"""Sent as the key to a server given by base URL when no key is set (local servers need none)."""

_STOP_REASONS: dict[str, ModelStopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "content_filtered",
}


class OpenAIModel:
    """A model served through the Chat Completions API, streamed.

    Give ``client`` (an ``AsyncOpenAI``, used as it is on one event loop, its own retries
    turned off) or ``api_key`` / ``base_url`` / ``client_args`` to have one built per event
    loop. Without a key, ``OPENAI_API_KEY`` is read;
    with a ``base_url`` (or ``OPENAI_BASE_URL``) and no key, a placeholder key is sent.
    ``params`` go into the JSON body as they are (``top_p``, ``reasoning_effort``, ``top_k``
    for vLLM...) and win over the fields this class sets. ``provider`` names who serves the
    model in traces (``gen_ai.provider.name``): the given name (``"groq"``, ``"vllm"``...), else
    ``"openai"`` (the OpenAI API, as OpenTelemetry's GenAI conventions name it for any server
    that speaks it); traces name the server by ``server.address`` and ``server.port``.
    """

    def __init__(
        self,
        model_id: str,
        *,
        client: AsyncOpenAI | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        client_args: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        retry: RetryPolicy = RetryPolicy(),  # noqa: B008 - frozen, shared safely
        params: Mapping[str, Any] | None = None,
        native_output: bool = True,
        provider: str | None = None,
    ) -> None:
        self.model_id = model_id
        self.native_output = native_output
        """Whether structured output uses the server's JSON-schema response format (else a
        final-answer tool)."""
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.retry = retry
        self.params = dict(params or {})
        self._client = None if client is None else client.with_options(max_retries=0)
        self._client_args: dict[str, Any] = {}
        self._loop_clients = LoopClients(
            lambda: AsyncOpenAI(**self._client_args), lambda client: client.close()
        )
        if client is not None:
            self.base_url = str(client.base_url)
        else:
            base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
            api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
            if api_key is None:
                if base_url is None:
                    raise ConfigurationError(
                        f"OpenAI model {model_id!r} needs an API key: set OPENAI_API_KEY (or "
                        "OPENAI_BASE_URL for a local OpenAI-compatible server)"
                    )
                api_key = PLACEHOLDER_KEY
            self._client_args = {**(client_args or {}), "api_key": api_key, "max_retries": 0}
            if base_url is not None:
                self._client_args["base_url"] = base_url
            self.base_url = base_url or "https://api.openai.com/v1"
        self._official = "api.openai.com" in self.base_url
        self.provider_name = provider or PROVIDER
        """Who serves the model, as traces name it (``gen_ai.provider.name``)."""
        self._where = f"OpenAI model {model_id!r}" + (
            "" if self._official else f" at {self.base_url}"
        )

    @classmethod
    def from_env(cls, model_id: str) -> OpenAIModel:
        """The model with the key in ``OPENAI_API_KEY``, the server in ``OPENAI_BASE_URL``."""
        return cls(
            model_id,
            api_key=os.environ.get("OPENAI_API_KEY") or None,
            base_url=os.environ.get("OPENAI_BASE_URL") or None,
        )

    def __repr__(self) -> str:
        return f"OpenAIModel({self.model_id!r}, base_url={self.base_url!r})"

    def client(self) -> AsyncOpenAI:
        """The client for the running event loop (one built per loop: pooled connections
        cannot move between loops; it is closed when its loop shuts down)."""
        if self._client is not None:
            return self._client
        return self._loop_clients.get()

    async def stream(
        self,
        messages: Sequence[Message],
        tool_specs: Sequence[ToolSpec],
        system_prompt: str | None,
        *,
        output_schema: OutputSchema | None = None,
    ) -> AsyncIterator[ModelEvent]:
        request = self.build_request(messages, tool_specs, system_prompt, output_schema)
        create = self.client().chat.completions.create

        async def open_stream() -> openai.AsyncStream[Any]:
            return cast("openai.AsyncStream[Any]", await create(**request))

        chunks = await with_retries(self.retry, open_stream, self._translate)
        parser = StreamParser()
        started = False
        try:
            async for chunk in chunks:
                for event in parser.feed(chunk):
                    started = True
                    yield event
        except openai.APIError as exc:
            raise api_error(exc, self._where) from exc
        except json.JSONDecodeError as exc:
            raise malformed_chunk(self._where, exc, provider=PROVIDER, started=started) from exc
        finally:
            await chunks.close()
        if parser.finish_reason is None:
            raise ModelProviderError(
                f"{self._where}: the stream ended before the reply finished",
                provider=PROVIDER,
                retryable=True,
            )
        for event in parser.finish():
            yield event

    def build_request(
        self,
        messages: Sequence[Message],
        tool_specs: Sequence[ToolSpec],
        system_prompt: str | None,
        output_schema: OutputSchema | None = None,
    ) -> dict[str, Any]:
        """The keyword arguments for ``chat.completions.create``."""
        request: dict[str, Any] = {
            "model": self.model_id,
            "messages": request_messages(messages, system_prompt),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tool_specs:
            request["tools"] = tool_params(tool_specs)
        if self.max_tokens is not None:
            field_name = "max_completion_tokens" if self._official else "max_tokens"
            request[field_name] = self.max_tokens
        if self.temperature is not None:
            request["temperature"] = self.temperature
        if output_schema is not None:
            request["response_format"] = response_format(output_schema)
        if self.params:
            request["extra_body"] = dict(self.params)
        return request

    def _translate(self, exc: Exception) -> ModelError | None:
        return api_error(exc, self._where) if isinstance(exc, openai.APIError) else None


# --- request building ----------------------------------------------------------------------


def request_messages(
    messages: Sequence[Message], system_prompt: str | None
) -> list[dict[str, Any]]:
    """Our conversation as Chat Completions messages."""
    out: list[dict[str, Any]] = []
    if system_prompt:
        out.append({"role": "system", "content": system_prompt})
    for message in messages:
        if message.role == "assistant":
            out.append(_assistant_message(message))
        else:
            out.extend(_user_messages(message))
    return out


def _assistant_message(message: Message) -> dict[str, Any]:
    calls = [
        {
            "id": b.id,
            "type": "function",
            "function": {"name": b.name, "arguments": json.dumps(b.input, ensure_ascii=False)},
        }
        for b in message.content
        if isinstance(b, ToolUse)
    ]
    out: dict[str, Any] = {"role": "assistant", "content": message.text or (None if calls else "")}
    if calls:
        out["tool_calls"] = calls
    return out


def _user_messages(message: Message) -> list[dict[str, Any]]:
    """Tool messages first (they must follow the assistant's tool calls), then one user
    message with the images tool results returned and the user's own text and images."""
    out: list[dict[str, Any]] = []
    tool_images: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ToolResult):
            out.append(_tool_message(block))
            images = [b for b in block.content if isinstance(b, Image)]
            if images:
                label = f"Images returned by tool call {block.tool_use_id}:"
                tool_images.append({"type": "text", "text": label})
                tool_images.extend(_image_part(i) for i in images)
        elif isinstance(block, Text):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, Image):
            parts.append(_image_part(block))
    parts = tool_images + parts
    if len(parts) == 1 and parts[0]["type"] == "text":
        out.append({"role": "user", "content": parts[0]["text"]})
    elif parts:
        out.append({"role": "user", "content": parts})
    return out


def _tool_message(result: ToolResult) -> dict[str, Any]:
    pieces: list[str] = []
    for block in result.content:
        if isinstance(block, Text):
            pieces.append(block.text)
        elif isinstance(block, Json):
            pieces.append(json.dumps(block.value, ensure_ascii=False))
        else:
            pieces.append(f"[{block.media_type} image: attached in the next user message]")
    text = "\n".join(pieces)
    if result.status == "error":
        text = f"Error: {text}" if text else "Error: the tool call failed"
    return {"role": "tool", "tool_call_id": result.tool_use_id, "content": text}


def _image_part(image: Image) -> dict[str, Any]:
    data = base64.b64encode(image.data).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:{image.media_type};base64,{data}"}}


def tool_params(specs: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Our tool specs as Chat Completions function tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": s.name,
                "description": s.description,
                "parameters": s.input_schema or {"type": "object", "properties": {}},
            },
        }
        for s in specs
    ]


def response_format(output: OutputSchema) -> dict[str, Any]:
    """The ``response_format`` asking for a reply that meets the output schema."""
    strict = strict_ready(output.schema)
    json_schema: dict[str, Any] = {
        "name": output.name,
        "schema": closed_objects(output.schema) if strict else output.schema,
        "strict": strict,
    }
    if output.description:
        json_schema["description"] = output.description
    return {"type": "json_schema", "json_schema": json_schema}


# --- stream parsing ------------------------------------------------------------------------


@dataclass(slots=True)
class _ToolCall:
    id: str
    started: bool = False
    early_args: list[str] = field(default_factory=list)  # fragments before the name came


class StreamParser:
    """Turns ``chat.completion.chunk`` objects into model events.

    Tool-call fragments are keyed by ``index``: only the first fragment of a call carries its
    id and name. A new id at a known index (a server that numbers every call 0) starts a new
    call; a call without an id gets one.
    """

    def __init__(self) -> None:
        self.finish_reason: str | None = None
        self.usage = Usage()
        self._calls: dict[int, _ToolCall] = {}
        self._all: list[_ToolCall] = []

    def feed(self, chunk: Any) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = Usage(usage.prompt_tokens or 0, usage.completion_tokens or 0)
        for choice in chunk.choices or ():
            if getattr(choice, "index", 0) != 0:
                continue  # n > 1 is not supported: keep the first choice
            delta = choice.delta
            if delta is not None:
                reasoning = getattr(delta, "reasoning_content", None) or getattr(
                    delta, "reasoning", None
                )
                if isinstance(reasoning, str) and reasoning:
                    events.append(ReasoningDelta(reasoning))
                if delta.content:
                    events.append(TextDelta(delta.content))
                if getattr(delta, "refusal", None):
                    events.append(TextDelta(delta.refusal))
                for fragment in delta.tool_calls or ():
                    events.extend(self._tool_fragment(fragment))
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        return events

    def _tool_fragment(self, fragment: Any) -> list[ModelEvent]:
        index = getattr(fragment, "index", None) or 0
        call_id = getattr(fragment, "id", None)
        function = getattr(fragment, "function", None)
        name = getattr(function, "name", None)
        arguments = getattr(function, "arguments", None)
        call = self._calls.get(index)
        if call is None or (call_id and call_id != call.id):
            call = _ToolCall(call_id or f"call_{uuid.uuid4().hex[:24]}")
            self._calls[index] = call
            self._all.append(call)
        events: list[ModelEvent] = []
        if name and not call.started:
            call.started = True
            events.append(ToolUseStart(call.id, name))
            if call.early_args:
                events.append(ToolUseDelta(call.id, "".join(call.early_args)))
        if arguments:
            if call.started:
                events.append(ToolUseDelta(call.id, arguments))
            else:
                call.early_args.append(arguments)
        return events

    def finish(self) -> list[ModelEvent]:
        """The closing events: calls that never got a name (the tool loop reports them as
        unknown tools), then the stop."""
        events: list[ModelEvent] = []
        for call in self._all:
            if not call.started:
                events.append(ToolUseStart(call.id, ""))
                events.append(ToolUseDelta(call.id, "".join(call.early_args)))
        reason = _STOP_REASONS.get(self.finish_reason or "stop", "end_turn")
        reason = with_tool_uses(reason, bool(self._all))  # some servers say "stop" after calls
        events.append(ModelStop(reason, self.usage))
        return events


# --- errors --------------------------------------------------------------------------------


def api_error(exc: openai.APIError, where: str) -> ModelError:
    """The typed error for an ``openai`` exception."""
    body = exc.body
    detail = body["message"] if isinstance(body, Mapping) and "message" in body else exc.message
    status = exc.status_code if isinstance(exc, openai.APIStatusError) else None
    kind: type[ModelError] = ModelProviderError
    retryable, retry_after = False, None
    if isinstance(exc, openai.APIConnectionError):
        reason = str(detail).rstrip(".") + _cause(exc)
        detail, retryable = f"could not reach the server ({reason})", True
    else:
        in_stream = status is None
        kind, status, retryable = classify(status, str(detail), exc.type, exc.code)
        if in_stream:
            detail = f"the server failed mid-reply: {detail}"
        if kind is ModelThrottledError:
            quota = not retryable
            detail = f"{'the account has no quota left' if quota else 'rate limited'}: {detail}"
            if isinstance(exc, openai.APIStatusError):
                retry_after = header_retry_after(exc.response.headers)
        elif kind is ModelAuthError:
            detail = f"the server refused the credentials: {detail}; check OPENAI_API_KEY"
        elif kind is ContextWindowOverflowError:
            detail = f"the conversation does not fit the context window: {detail}"
    code = "" if status is None else f" ({status})"
    return kind(
        f"{where}{code}: {detail}",
        provider=PROVIDER,
        status=status,
        retryable=retryable,
        retry_after=retry_after,
    )


def _cause(exc: BaseException) -> str:
    """``": <why>"`` from the transport error under an SDK's connection error ("" if none)."""
    cause = exc.__cause__ or exc.__context__
    if cause is None:
        return ""
    text = " ".join(str(cause).split())
    return f": {type(cause).__name__}" + (f": {text}" if text else "")
