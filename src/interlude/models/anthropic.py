"""Anthropic's Messages API, streamed through the official ``anthropic`` SDK.

Install with ``pip install 'interlude-agents[anthropic]'``. The SDK's own retries are turned off:
opening a stream is retried here by :func:`with_retries`; a failure after the reply has started
is raised as a typed :class:`~interlude.errors.ModelError`.

Extended thinking comes back as :class:`Reasoning` blocks that keep their signature, and signed
reasoning is sent back to the API (it requires that when thinking is combined with tool use).
A ``redacted_thinking`` block is kept as a Reasoning block whose ``redacted`` holds the
encrypted data, and is sent back as it came.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import anthropic

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
from ._errors import classify, malformed_chunk, retry_after
from ._retry import RetryPolicy, with_retries
from ._schema import OutputSchema, closed_objects
from ._stop import with_tool_uses
from ._traced import TRACED_CALL

__all__ = [
    "AnthropicModel",
    "StreamParser",
    "build_request",
    "convert_messages",
    "convert_tools",
    "translate_error",
]

PROVIDER = "anthropic"
DEFAULT_MAX_TOKENS = 4096

_STOP_REASONS: dict[str, ModelStopReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "pause_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "content_filtered",
}


class AnthropicModel:
    """A Claude model behind the Anthropic Messages API.

    Give a ready ``client`` (used as it is on one event loop, its retries switched off) or
    ``client_args`` for the ``AsyncAnthropic`` built per event loop (``api_key``, ``base_url``,
    ``timeout``...); without a key there, the SDK's ``ANTHROPIC_API_KEY`` (or
    ``ANTHROPIC_AUTH_TOKEN``, or an Anthropic profile) must provide one. ``params`` go into
    every request as they are (e.g. ``{"thinking": {"type": "enabled", "budget_tokens": 2048}}``)
    and win over the request this class builds.
    """

    def __init__(
        self,
        model_id: str,
        *,
        client: anthropic.AsyncAnthropic | None = None,
        client_args: Mapping[str, Any] | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float | None = None,
        retry: RetryPolicy | None = None,
        params: Mapping[str, Any] | None = None,
        native_output: bool = True,
    ) -> None:
        if client is not None and client_args:
            raise ConfigurationError("give AnthropicModel either client or client_args, not both")
        self.native_output = native_output
        """Whether structured output uses ``output_config.format`` (models without it: False,
        for a final-answer tool)."""
        self.model_id = model_id
        self._client = None if client is None else client.with_options(max_retries=0)
        args: dict[str, Any] = {**(client_args or {}), "max_retries": 0}
        spare: list[anthropic.AsyncAnthropic] = []
        if client is None:
            # The first client checks that the SDK finds credentials, then serves the first loop.
            spare.append(anthropic.AsyncAnthropic(**args))
            if not _has_credentials(spare[0], args):
                raise ConfigurationError(
                    f"Anthropic model {model_id!r} needs an API key: set ANTHROPIC_API_KEY "
                    "(or pass client_args={'api_key': ...})"
                )
        self._loop_clients = LoopClients(
            lambda: spare.pop() if spare else anthropic.AsyncAnthropic(**args),
            lambda c: c.close(),
        )
        self._untraced: dict[int, tuple[anthropic.AsyncAnthropic, anthropic.AsyncAnthropic]] = {}
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.retry = retry if retry is not None else RetryPolicy()
        self.params = dict(params or {})

    @classmethod
    def from_env(cls, model_id: str) -> AnthropicModel:
        """A model keyed by ``ANTHROPIC_API_KEY`` (``ANTHROPIC_BASE_URL`` is honoured too)."""
        key = os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise ConfigurationError(
                f"model 'anthropic:{model_id}' needs an API key: set ANTHROPIC_API_KEY"
            )
        return cls(model_id, client_args={"api_key": key})

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model_id!r})"

    def client(self) -> anthropic.AsyncAnthropic:
        """The client for the running event loop (one built per loop: pooled connections
        cannot move between loops; it is closed when its loop shuts down). While Interlude
        traces the call (``models._traced``), a copy of it that makes no spans of its own."""
        client = self._client if self._client is not None else self._loop_clients.get()
        if not TRACED_CALL.get():
            return client
        untraced = self._untraced.get(id(client))
        if untraced is None or untraced[0] is not client:
            untraced = self._untraced[id(client)] = (
                client,
                client.with_options(open_telemetry=False),
            )
        return untraced[1]

    async def stream(
        self,
        messages: Sequence[Message],
        tool_specs: Sequence[ToolSpec],
        system_prompt: str | None,
        *,
        output_schema: OutputSchema | None = None,
    ) -> AsyncIterator[ModelEvent]:
        request = build_request(
            self.model_id,
            messages,
            tool_specs,
            system_prompt,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            params=self.params,
            output_schema=output_schema,
        )

        def translate(exc: Exception) -> ModelError | None:
            return translate_error(exc, self.model_id)

        async def open_stream() -> Any:
            return await self.client().messages.create(**request)

        events = await with_retries(self.retry, open_stream, translate)
        parser = StreamParser()
        started = False
        try:
            async for event in events:
                for out in parser.feed(event):
                    started = True
                    yield out
        except json.JSONDecodeError as exc:
            where = f"Anthropic model {self.model_id!r}"
            raise malformed_chunk(where, exc, provider=PROVIDER, started=started) from exc
        except Exception as exc:
            error = translate(exc)
            if error is None:
                raise
            raise error from exc
        finally:
            await events.close()
        yield parser.finish(self.model_id)


def _has_credentials(client: anthropic.AsyncAnthropic, args: Mapping[str, Any]) -> bool:
    """Whether requests will carry credentials: a key, a token, an SDK credential provider
    (profile, workload identity) or an auth header given in ``default_headers``."""
    if client.api_key or client.auth_token or getattr(client, "credentials", None) is not None:
        return True
    headers = args.get("default_headers") or {}
    return any(str(name).lower() in ("x-api-key", "authorization") for name in headers)


# --- request: our conversation -> the Messages API --------------------------------------------


def build_request(
    model_id: str,
    messages: Sequence[Message],
    tool_specs: Sequence[ToolSpec],
    system_prompt: str | None,
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    temperature: float | None = None,
    params: Mapping[str, Any] | None = None,
    output_schema: OutputSchema | None = None,
) -> dict[str, Any]:
    """The keyword arguments of ``messages.create`` for one streamed turn.

    Only arguments every SDK version takes are named; ``temperature``, the structured-output
    format (``output_config.format``, objects closed as the API wants) and ``params`` travel in
    ``extra_body``, which the SDK merges into the JSON body last (so ``params`` win).
    """
    request: dict[str, Any] = {
        "model": model_id,
        "max_tokens": max_tokens,
        "messages": convert_messages(messages),
        "stream": True,
    }
    if system_prompt:
        request["system"] = system_prompt
    if tool_specs:
        request["tools"] = convert_tools(tool_specs)
    extra: dict[str, Any] = {} if temperature is None else {"temperature": temperature}
    if output_schema is not None:
        schema = closed_objects(output_schema.schema)
        extra["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
    extra.update(params or {})
    extra.pop("stream", None)
    if extra:
        request["extra_body"] = extra
    return request


def convert_tools(tool_specs: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs in the API's form; an empty schema becomes an object with no properties."""
    return [
        {
            "name": spec.name,
            "description": spec.description,
            "input_schema": spec.input_schema or {"type": "object", "properties": {}},
        }
        for spec in tool_specs
    ]


def convert_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Our messages as API messages; messages left with no content are skipped."""
    out: list[dict[str, Any]] = []
    for message in messages:
        content: list[dict[str, Any]] = []
        for block in message.content:
            converted = _convert_block(block, message.role)
            if converted is not None:
                content.append(converted)
        if content:
            out.append({"role": message.role, "content": content})
    return out


def _convert_block(block: object, role: str) -> dict[str, Any] | None:
    match block:
        case Text(text):
            # The API refuses text blocks with nothing but whitespace.
            return {"type": "text", "text": text} if text.strip() else None
        case Image():
            return _image(block) if role == "user" else None
        case Reasoning(text, signature, redacted):
            if role != "assistant":
                return None
            if redacted is not None:
                return {"type": "redacted_thinking", "data": redacted}
            # Only signed reasoning can go back; unsigned (or another provider's) is dropped.
            if not signature:
                return None
            return {"type": "thinking", "thinking": text, "signature": signature}
        case ToolUse(id, name, input):
            return {"type": "tool_use", "id": id, "name": name, "input": input}
        case ToolResult():
            return _tool_result(block)
    return None


def _image(image: Image) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": image.media_type,
            "data": base64.b64encode(image.data).decode("ascii"),
        },
    }


def _tool_result(result: ToolResult) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for item in result.content:
        if isinstance(item, Text):
            if item.text.strip():
                content.append({"type": "text", "text": item.text})
        elif isinstance(item, Json):
            content.append({"type": "text", "text": json.dumps(item.value)})
        elif isinstance(item, Image):
            content.append(_image(item))
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.tool_use_id}
    if content:  # no content (or only blanks): the block goes without, which the API accepts
        block["content"] = content
    if result.status == "error":
        block["is_error"] = True
    return block


# --- response: the API's server-sent events -> our model events --------------------------------


class StreamParser:
    """Turns the SDK's raw stream events into model events, one event at a time.

    Content blocks are keyed by their ``index``; tool-argument fragments are passed on raw
    under the tool-use id of their block (the loop parses them and reports bad JSON).
    """

    def __init__(self) -> None:
        self.tool_ids: dict[int, str] = {}
        self.input_tokens = 0
        self.output_tokens = 0
        self.stop_reason: str | None = None
        self.stopped = False

    def feed(self, event: Any) -> list[ModelEvent]:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            self._usage(event.message.usage)
        elif kind == "content_block_start":
            return self._block_start(event.index, event.content_block)
        elif kind == "content_block_delta":
            return self._delta(event.index, event.delta)
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            if event.usage is not None:
                self._usage(event.usage)
        elif kind == "message_stop":
            self.stopped = True
        return []

    def finish(self, model_id: str) -> ModelStop:
        """The closing ModelStop; a stream cut short is a retryable provider error."""
        if not self.stopped:
            raise ModelProviderError(
                f"the Anthropic stream of model {model_id!r} ended before message_stop",
                provider=PROVIDER,
                retryable=True,
            )
        reason = _STOP_REASONS.get(self.stop_reason or "end_turn", "end_turn")
        reason = with_tool_uses(reason, bool(self.tool_ids))
        return ModelStop(reason, Usage(self.input_tokens, self.output_tokens))

    def _usage(self, usage: Any) -> None:
        # Counts are cumulative; input includes prompt-cache reads and writes.
        inputs = [
            getattr(usage, name, None)
            for name in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        ]
        if inputs[0] is not None:
            self.input_tokens = sum(n for n in inputs if isinstance(n, int))
        output = getattr(usage, "output_tokens", None)
        if isinstance(output, int):
            self.output_tokens = output

    def _block_start(self, index: int, block: Any) -> list[ModelEvent]:
        kind = getattr(block, "type", None)
        if kind == "text" and block.text:
            return [TextDelta(block.text)]
        if kind == "thinking":
            signature = getattr(block, "signature", None) or None
            if block.thinking or signature:
                return [ReasoningDelta(block.thinking, signature)]
        elif kind == "redacted_thinking":
            return [ReasoningDelta("", redacted=block.data)]
        elif kind == "tool_use":
            self.tool_ids[index] = block.id
            whole = block.input if isinstance(block.input, dict) and block.input else None
            return [ToolUseStart(block.id, block.name, whole)]
        return []

    def _delta(self, index: int, delta: Any) -> list[ModelEvent]:
        kind = getattr(delta, "type", None)
        if kind == "text_delta":
            return [TextDelta(delta.text)]
        if kind == "input_json_delta" and index in self.tool_ids:
            return [ToolUseDelta(self.tool_ids[index], delta.partial_json)]
        if kind == "thinking_delta":
            return [ReasoningDelta(delta.thinking)]
        if kind == "signature_delta":
            return [ReasoningDelta("", delta.signature)]
        return []


# --- errors ---------------------------------------------------------------------------------


def translate_error(exc: Exception, model_id: str) -> ModelError | None:
    """The typed ModelError for an SDK or transport exception; None for anything else."""
    where = f"Anthropic model {model_id!r}"
    if isinstance(exc, anthropic.APIStatusError):
        return _status_error(exc, where)
    if isinstance(exc, anthropic.APIConnectionError):
        return ModelProviderError(
            f"{where}: could not reach the API ({exc})", provider=PROVIDER, retryable=True
        )
    if type(exc).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore"):
        # The SDK wraps transport errors only while opening; mid-stream they arrive raw.
        return ModelProviderError(
            f"{where}: the connection failed ({type(exc).__name__}: {exc})",
            provider=PROVIDER,
            retryable=True,
        )
    return None


def _status_error(exc: anthropic.APIStatusError, where: str) -> ModelError:
    body: Any = exc.body
    error: Any = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        error = {}
    kind = str(error.get("type") or "")
    detail = str(error.get("message") or exc.message)
    # An `event: error` inside a stream arrives with the stream's status, 200.
    # An `event: error` inside a stream arrives with the stream's status, 200: then the status
    # is read from the error's type.
    in_stream = exc.status_code < 400
    cls, status, retryable = classify(None if in_stream else exc.status_code, detail, kind)
    if in_stream:
        where += " (mid-reply)"
    text = f"{where}: {detail}" + (f" ({kind})" if kind else "")
    if cls is ModelThrottledError:
        return ModelThrottledError(
            f"{where} is rate limited: {detail}",
            provider=PROVIDER,
            status=status,
            retryable=retryable,
            retry_after=retry_after(exc.response.headers),
        )
    if cls is ModelAuthError:
        return ModelAuthError(
            f"{where}: the API refused the credentials ({detail}); check ANTHROPIC_API_KEY",
            provider=PROVIDER,
            status=status,
        )
    if cls is ContextWindowOverflowError:
        return ContextWindowOverflowError(
            f"{where}: the conversation does not fit the context window ({detail})",
            provider=PROVIDER,
            status=status,
        )
    return ModelProviderError(text, provider=PROVIDER, status=status, retryable=retryable)
