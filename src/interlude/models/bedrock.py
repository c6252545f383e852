"""Amazon Bedrock models through the ConverseStream API
(``pip install 'interlude-agents[bedrock]'``).

boto3 is synchronous: each call runs in a daemon worker thread that opens the stream and reads
its events, handing them to the event loop through an ``asyncio.Queue``. The loop is never
blocked, and when the consumer stops early the stream is closed and the thread ends.

Conversion notes:

- Reasoning goes back only when Bedrock can take it: signed (``reasoningText`` with its
  signature) or redacted (``redactedContent``). Unsigned reasoning (DeepSeek-R1 and the like)
  is dropped: Bedrock refuses reasoning without a signature in a request.
- A tool result's ``status`` field is only accepted by Anthropic's Claude models; for other
  models an error result is marked in its text instead (``"Error: ..."``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import boto3
import botocore.config
import urllib3.exceptions
from botocore import eventstream
from botocore import exceptions as boto_errors
from botocore.parsers import ResponseParserError

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
from ._errors import is_context_overflow, retry_after
from ._retry import RetryPolicy, with_retries
from ._schema import OutputSchema, closed_objects
from ._stop import with_tool_uses

if TYPE_CHECKING:
    from mypy_boto3_bedrock_runtime import BedrockRuntimeClient

__all__ = ["BedrockModel", "build_request", "parse_events", "translate_error"]

PROVIDER = "bedrock"
_DEFAULT_RETRY = RetryPolicy()

_IMAGE_FORMATS = {f"image/{f}": f for f in ("png", "jpeg", "gif", "webp")} | {"image/jpg": "jpeg"}
_STOP_REASONS: dict[str, ModelStopReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "guardrail_intervened": "content_filtered",
    "content_filtered": "content_filtered",
}
# Error codes as in x-amzn-ErrorType (HTTP errors) or :exception-type (mid-stream, camelCase).
_THROTTLED = frozenset({"ThrottlingException", "ServiceQuotaExceededException"})
_RETRYABLE = frozenset(
    {
        "ModelNotReadyException",
        "InternalServerException",
        "ServiceUnavailableException",
        "ModelTimeoutException",
        "ModelStreamErrorException",
    }
)
_AUTH = frozenset(
    {
        "AccessDeniedException",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "ExpiredTokenException",
        "IncompleteSignature",
    }
)


class BedrockModel:
    """A Bedrock model, e.g. ``BedrockModel("us.anthropic.claude-sonnet-4-20250514-v1:0")``.

    Give a ``client`` (a boto3 ``bedrock-runtime`` client; disable its retries yourself), or
    let the model build one from ``region_name``, ``endpoint_url`` and ``client_args`` (a
    ``config`` there is kept, with boto3's own retries turned off). ``params`` are merged into
    every ConverseStream request (``additionalModelRequestFields``, ``guardrailConfig``, ...).
    Opening the stream is retried under ``retry``.
    """

    def __init__(
        self,
        model_id: str,
        *,
        client: BedrockRuntimeClient | None = None,
        region_name: str | None = None,
        endpoint_url: str | None = None,
        client_args: Mapping[str, Any] | None = None,
        max_tokens: int | None = 4096,
        temperature: float | None = None,
        params: Mapping[str, Any] | None = None,
        retry: RetryPolicy = _DEFAULT_RETRY,
        native_output: bool = True,
    ) -> None:
        self.model_id = model_id
        self.native_output = native_output
        """Whether structured output uses ``outputConfig.textFormat`` (models without it:
        False, for a final-answer tool)."""
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.params = dict(params or {})
        self.retry = retry
        if client is None:
            kwargs = dict(client_args or {})
            no_retries = botocore.config.Config(retries={"total_max_attempts": 1})
            given = kwargs.get("config")
            kwargs["config"] = given.merge(no_retries) if given is not None else no_retries
            try:
                client = boto3.session.Session().client(
                    "bedrock-runtime", region_name=region_name, endpoint_url=endpoint_url, **kwargs
                )
            except boto_errors.NoRegionError:
                raise ConfigurationError(
                    f"BedrockModel({model_id!r}) needs an AWS region: pass region_name= or set "
                    "AWS_REGION"
                ) from None
        self.client = client

    @classmethod
    def from_env(cls, model_id: str) -> BedrockModel:
        """Region from AWS_REGION or AWS_DEFAULT_REGION; credentials from boto3's usual chain."""
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if not region:
            raise ConfigurationError(
                f"Bedrock model {model_id!r} needs an AWS region: set AWS_REGION "
                "(or AWS_DEFAULT_REGION)"
            )
        return cls(model_id, region_name=region)

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

        pump = await with_retries(self.retry, lambda: self._open(request), translate)
        try:
            async for event in parse_events(pump.events(), self.model_id):
                yield event
        except Exception as exc:  # the reply had started: not retried
            error = translate(exc)
            if error is None:
                raise
            raise error from exc
        finally:
            pump.close()

    async def _open(self, request: dict[str, Any]) -> _Pump:
        """Start a worker thread and wait until the reply starts (or the request fails)."""
        client = self.client
        pump = _Pump(asyncio.get_running_loop(), lambda: client.converse_stream(**request))
        threading.Thread(target=pump.run, name="interlude-bedrock", daemon=True).start()
        try:
            kind, value = await pump.queue.get()
        except BaseException:
            pump.close()
            raise
        if kind == "error":
            raise value
        return pump


class _Pump:
    """Runs the blocking call and the event-stream reading in a worker thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, call: Callable[[], Any]) -> None:
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._loop = loop
        self._call = call
        self._lock = threading.Lock()
        self._closed = False
        self._finished = False
        self._stream: Any = None

    def _put(self, kind: str, value: Any = None) -> None:
        try:
            self._loop.call_soon_threadsafe(self.queue.put_nowait, (kind, value))
        except RuntimeError:  # the event loop is gone
            self.close()

    def run(self) -> None:  # in the worker thread
        try:
            stream = self._call()["stream"]
        except Exception as exc:
            self._put("error", exc)
            return
        with self._lock:
            self._stream = stream
            abandoned = self._closed
        if abandoned:
            stream.close()
            return
        self._put("opened")
        try:
            for event in _lenient_events(stream):
                if self._closed:
                    return
                self._put("event", event)
            self._put("end")
        except Exception as exc:
            if not self._closed:
                self._put("error", exc)
        finally:
            with self._lock:
                self._finished = True
            stream.close()

    async def events(self) -> AsyncIterator[Mapping[str, Any]]:
        while True:
            kind, value = await self.queue.get()
            if kind == "event":
                yield value
            elif kind == "error":
                raise value
            else:
                return

    def close(self) -> None:
        """Stop reading, and wake the worker if it is blocked reading the response."""
        with self._lock:
            self._closed = True
            stream = None if self._finished else self._stream
        if stream is None:
            return  # the worker closes the stream itself
        # urllib3 >= 2.3: shutting the socket down is the thread-safe way to end a blocked
        # read (the worker then closes the stream). botocore keeps the response private.
        shutdown = getattr(getattr(stream, "_raw_stream", None), "shutdown", None)
        try:
            if shutdown is not None:
                shutdown()
                return
        except (ValueError, RuntimeError, OSError):
            pass  # already released or closed
        # Older urllib3: close() can wait for the blocked read, so not on the event loop.
        threading.Thread(target=stream.close, daemon=True).start()


def _lenient_events(stream: Any) -> Iterator[Any]:
    """The stream's parsed events, taking a ``contentBlockStart`` whose ``start`` is empty.

    botocore refuses such an event (``start`` is a union that must have one member) and ends
    the stream; the service can send it for a text block. Other parser errors are raised.
    Without the botocore internals this needs, the stream is iterated as it is.
    """
    raw_events = getattr(stream, "_event_generator", None)
    parse = getattr(stream, "_parse_event", None)
    if raw_events is None or parse is None:
        yield from stream
        return
    for raw in raw_events:
        try:
            parsed = parse(raw)
        except ResponseParserError:
            parsed = _empty_block_start(raw)
            if parsed is None:
                raise
        if parsed:
            yield parsed


def _empty_block_start(raw: Any) -> dict[str, Any] | None:
    """``{"contentBlockStart": ...}`` for a raw contentBlockStart event with an empty start
    (a text block), else None."""
    headers = getattr(raw, "headers", None) or {}
    if headers.get(":message-type") != "event" or headers.get(":event-type") != "contentBlockStart":
        return None
    try:
        body = json.loads(raw.payload)
    except (TypeError, ValueError):
        return None
    if not isinstance(body, dict) or body.get("start") not in ({}, None):
        return None
    index = body.get("contentBlockIndex", 0)
    return {"contentBlockStart": {"contentBlockIndex": index, "start": {}}}


# --- request building ----------------------------------------------------------------------------


def build_request(
    model_id: str,
    messages: Sequence[Message],
    tool_specs: Sequence[ToolSpec],
    system_prompt: str | None,
    *,
    max_tokens: int | None = None,
    temperature: float | None = None,
    params: Mapping[str, Any] | None = None,
    output_schema: OutputSchema | None = None,
) -> dict[str, Any]:
    """The ConverseStream request for a conversation; ``params`` win over what is built here.
    Structured output is ``outputConfig.textFormat`` (the schema as JSON text, objects closed)."""
    messages_out = _convert_messages(messages, _takes_tool_status(model_id))
    request: dict[str, Any] = {"modelId": model_id, "messages": messages_out}
    if system_prompt:
        request["system"] = [{"text": system_prompt}]
    specs = list(tool_specs) or _stand_in_specs(messages)
    if specs:
        request["toolConfig"] = {"tools": [_convert_tool_spec(s) for s in specs]}
    inference = {"maxTokens": max_tokens, "temperature": temperature}
    if inference := {k: v for k, v in inference.items() if v is not None}:
        request["inferenceConfig"] = inference
    if output_schema is not None:
        request["outputConfig"] = {"textFormat": _text_format(output_schema)}
    for key, value in (params or {}).items():
        current = request.get(key)
        if isinstance(current, dict) and isinstance(value, Mapping):
            value = {**current, **value}  # e.g. inferenceConfig: add stopSequences
        request[key] = value
    return request


def _text_format(output: OutputSchema) -> dict[str, Any]:
    schema = json.dumps(closed_objects(output.schema), ensure_ascii=False)
    definition: dict[str, Any] = {"schema": schema, "name": output.name}
    if output.description:
        definition["description"] = output.description
    return {"type": "json_schema", "structure": {"jsonSchema": definition}}


def _takes_tool_status(model_id: str) -> bool:
    """Whether the model accepts ``toolResult.status`` (only Anthropic's Claude models do)."""
    lowered = model_id.lower()
    return "anthropic." in lowered or "claude" in lowered


def _convert_messages(messages: Sequence[Message], tool_status: bool) -> list[dict[str, Any]]:
    """Bedrock refuses blank text and empty messages, and wants alternating roles: blank
    blocks and emptied messages are left out, and consecutive messages of a role joined."""
    converted: list[dict[str, Any]] = []
    for message in messages:
        content = [
            block for b in message.content if (block := _convert_block(b, tool_status)) is not None
        ]
        if not content:
            continue
        if converted and converted[-1]["role"] == message.role:
            converted[-1]["content"].extend(content)
        else:
            converted.append({"role": message.role, "content": content})
    return converted


def _convert_block(
    block: Text | Image | Reasoning | ToolUse | ToolResult, tool_status: bool
) -> dict[str, Any] | None:
    match block:
        case Text(text):
            return {"text": text} if text.strip() else None
        case Image():
            return {"image": _convert_image(block)}
        case Reasoning(text, signature, redacted):
            if redacted is not None:
                return {"reasoningContent": {"redactedContent": base64.b64decode(redacted)}}
            if not signature:
                return None  # Bedrock refuses unsigned reasoning in a request
            return {"reasoningContent": {"reasoningText": {"text": text, "signature": signature}}}
        case ToolUse(id, name, input):
            return {"toolUse": {"toolUseId": id, "name": name, "input": input}}
        case ToolResult(tool_use_id, status, content):
            blocks = [b for item in content if (b := _convert_result_block(item)) is not None]
            result: dict[str, Any] = {"toolUseId": tool_use_id}
            if tool_status:
                result["status"] = status
            elif status == "error":  # the model has no other way to know
                if blocks and "text" in blocks[0]:
                    blocks[0] = {"text": f"Error: {blocks[0]['text']}"}
                else:
                    blocks.insert(0, {"text": "Error: the tool call failed"})
            return {"toolResult": {**result, "content": blocks or [{"text": "(no output)"}]}}
    raise TypeError(f"not a content block: {block!r}")


def _convert_result_block(block: Text | Json | Image) -> dict[str, Any] | None:
    match block:
        case Text(text):
            return {"text": text} if text.strip() else None
        case Json(value):
            # Bedrock's json block takes an object; other JSON values go as JSON text.
            return {"json": value} if isinstance(value, dict) else {"text": json.dumps(value)}
        case Image():
            return {"image": _convert_image(block)}
    raise TypeError(f"not a tool result block: {block!r}")


def _convert_image(image: Image) -> dict[str, Any]:
    fmt = _IMAGE_FORMATS.get(image.media_type.lower())
    if fmt is None:
        raise ModelProviderError(
            f"Bedrock cannot take images of type {image.media_type!r} "
            f"(supported: {', '.join(sorted(set(_IMAGE_FORMATS)))})",
            provider=PROVIDER,
        )
    return {"format": fmt, "source": {"bytes": image.data}}


def _convert_tool_spec(spec: ToolSpec) -> dict[str, Any]:
    schema = spec.input_schema or {"type": "object", "properties": {}}
    tool: dict[str, Any] = {"name": spec.name, "inputSchema": {"json": schema}}
    if spec.description:
        tool["description"] = spec.description
    return {"toolSpec": tool}


def _stand_in_specs(messages: Sequence[Message]) -> list[ToolSpec]:
    """Bedrock refuses tool blocks in a request without toolConfig: when the agent has no
    tools but the conversation used some, those tools are declared (and are unknown if called)."""
    names = {b.name: None for m in messages for b in m.content if isinstance(b, ToolUse)}
    return [ToolSpec(name, "No longer available.") for name in names]


# --- stream parsing --------------------------------------------------------------------------


async def parse_events(
    raw_events: AsyncIterator[Mapping[str, Any]], model_id: str
) -> AsyncIterator[ModelEvent]:
    """Our events from ConverseStream's: deltas as they come, then one ModelStop."""
    tool_ids: dict[int, str] = {}
    stop_reason: str | None = None
    usage = Usage()
    async for raw in raw_events:
        if "contentBlockStart" in raw:
            event = raw["contentBlockStart"]
            tool = event.get("start", {}).get("toolUse")
            if tool is not None:
                tool_ids[event.get("contentBlockIndex", 0)] = tool["toolUseId"]
                yield ToolUseStart(tool["toolUseId"], tool["name"])
        elif "contentBlockDelta" in raw:
            event = raw["contentBlockDelta"]
            for item in _delta_events(
                event.get("delta", {}), event.get("contentBlockIndex", 0), tool_ids, model_id
            ):
                yield item
        elif "messageStop" in raw:
            stop_reason = raw["messageStop"].get("stopReason", "end_turn")
        elif "metadata" in raw:
            counts = raw["metadata"].get("usage", {})
            usage = Usage(counts.get("inputTokens", 0), counts.get("outputTokens", 0))
    if stop_reason is None:
        raise _error(model_id, "the stream ended without a messageStop event", retryable=True)
    yield ModelStop(_stop_reason(stop_reason, bool(tool_ids), model_id), usage)


def _delta_events(
    delta: Mapping[str, Any], index: int, tool_ids: Mapping[int, str], model_id: str
) -> Iterator[ModelEvent]:
    if delta.get("text"):
        yield TextDelta(delta["text"])
    if "toolUse" in delta:
        if index not in tool_ids:
            raise _error(model_id, f"tool input for content block {index} before its start")
        yield ToolUseDelta(tool_ids[index], delta["toolUse"].get("input", ""))
    reasoning = delta.get("reasoningContent")
    if reasoning:
        if reasoning.get("text"):
            yield ReasoningDelta(reasoning["text"])
        if reasoning.get("signature"):
            yield ReasoningDelta("", reasoning["signature"])
        if reasoning.get("redactedContent"):  # encrypted reasoning: kept to be sent back
            yield ReasoningDelta(
                "", redacted=base64.b64encode(reasoning["redactedContent"]).decode()
            )


def _stop_reason(reason: str, had_tools: bool, model_id: str) -> ModelStopReason:
    if reason in _STOP_REASONS:
        return with_tool_uses(_STOP_REASONS[reason], had_tools)
    if reason == "malformed_tool_use" and had_tools:
        return "tool_use"  # the loop turns unparseable arguments into an error result
    if reason.startswith("malformed"):
        raise _error(model_id, f"the model stopped with {reason!r}", retryable=True)
    return with_tool_uses("end_turn", had_tools)


# --- errors ----------------------------------------------------------------------------------


def translate_error(exc: Exception, model_id: str) -> ModelError | None:
    """The typed ModelError for a boto3 failure, or a transport failure while reading the
    stream (None: neither)."""
    if isinstance(exc, boto_errors.NoCredentialsError | boto_errors.PartialCredentialsError):
        hint = "set them up the usual AWS way (env variables, AWS_PROFILE, an IAM role, ...)"
        return _error(model_id, f"no usable AWS credentials ({exc}); {hint}", ModelAuthError)
    if isinstance(exc, boto_errors.HTTPClientError | boto_errors.ConnectionError):
        return _error(model_id, f"connection failed: {exc}", retryable=True)
    # Reading the event stream, botocore lets urllib3's and the socket's errors through raw.
    if isinstance(exc, urllib3.exceptions.HTTPError | ConnectionError | TimeoutError):
        detail = f"the connection failed mid-reply ({type(exc).__name__}: {exc})"
        return _error(model_id, detail, retryable=True)
    if isinstance(exc, eventstream.ParserError):
        detail = f"the reply stream was garbled ({type(exc).__name__}: {exc})"
        return _error(model_id, detail, retryable=True)
    if isinstance(exc, ResponseParserError):  # botocore could not read what the server sent
        detail = f"botocore could not parse the reply ({exc}); a newer botocore may read it"
        return _error(model_id, detail)
    if isinstance(exc, boto_errors.BotoCoreError):
        return _error(model_id, str(exc))
    if not isinstance(exc, boto_errors.ClientError):
        return None
    error = exc.response.get("Error", {})
    code = str(error.get("Code") or "error")
    code = code[:1].upper() + code[1:]  # mid-stream errors name it "throttlingException"
    text = str(error.get("Message") or "")
    meta = exc.response.get("ResponseMetadata", {})
    status: int | None = meta.get("HTTPStatusCode")
    detail = f"{code}: {text}" if text else code
    if code in _THROTTLED or (status == 429 and code not in _RETRYABLE):
        headers = {k.lower(): v for k, v in meta.get("HTTPHeaders", {}).items()}
        wait = retry_after(headers)
        return _error(model_id, detail, ModelThrottledError, status, True, wait)
    if code == "ValidationException" and is_context_overflow(text):
        return _error(model_id, detail, ContextWindowOverflowError, status)
    if code in _AUTH or status in (401, 403):
        detail += " (check the AWS credentials and that they may invoke this model)"
        return _error(model_id, detail, ModelAuthError, status)
    retryable = code in _RETRYABLE or (status is not None and status >= 500)
    return _error(model_id, detail, status=status, retryable=retryable)


def _error(
    model_id: str,
    detail: str,
    kind: type[ModelError] = ModelProviderError,
    status: int | None = None,
    retryable: bool = False,
    retry_after: float | None = None,
) -> ModelError:
    return kind(
        f"Bedrock model {model_id!r}: {detail}",
        provider=PROVIDER,
        status=status,
        retryable=retryable,
        retry_after=retry_after,
    )
