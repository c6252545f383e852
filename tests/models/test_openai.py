"""OpenAIModel against a loopback server speaking the Chat Completions wire format.

The real ``openai`` client does the HTTP and SSE work; the server (``openai_server.py``) plays
canned replies shaped like recorded ones and records what it was sent.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from interlude import Agent, Image, Json, Message, Reasoning, Text, ToolResult, ToolUse, Usage, tool
from interlude.errors import (
    ConfigurationError,
    ContextWindowOverflowError,
    ModelAuthError,
    ModelProviderError,
    ModelThrottledError,
)
from interlude.hooks import BeforeToolCallEvent
from interlude.models import (
    ModelStop,
    ReasoningDelta,
    RetryPolicy,
    TextDelta,
    ToolSpec,
    ToolUseDelta,
    ToolUseStart,
)
from interlude.models.openai import OpenAIModel

from .openai_server import (
    OpenAIServer,
    Reply,
    chunk,
    error_reply,
    role_chunk,
    text_reply,
    tool_args,
    tool_reply,
    tool_start,
    usage_chunk,
)

FAST = RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=0.05, jitter=0.0)
WEATHER = ToolSpec(
    "get_weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    srv = OpenAIServer().start()
    yield srv
    srv.stop()


def make_model(server: OpenAIServer, **kwargs: Any) -> OpenAIModel:
    kwargs.setdefault("retry", FAST)
    return OpenAIModel("gpt-4o-mini", api_key="sk-test", base_url=server.base_url, **kwargs)


async def collect(model: OpenAIModel, messages: list[Message], specs=(), system=None) -> list:
    return [e async for e in model.stream(messages, list(specs), system)]


def user(text: str) -> list[Message]:
    return [Message("user", [Text(text)])]


# --- streaming ---------------------------------------------------------------------------------


async def test_plain_text_stream_and_request(server):
    server.add(text_reply("Hel", "lo", "!", usage=(12, 7)))
    model = make_model(server, max_tokens=256, temperature=0.2, params={"top_k": 40})
    events = await collect(model, user("hi"), [WEATHER], system="Be brief.")
    assert events == [
        TextDelta("Hel"),
        TextDelta("lo"),
        TextDelta("!"),
        ModelStop("end_turn", Usage(12, 7)),
    ]
    [body] = server.requests
    assert body["model"] == "gpt-4o-mini"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather in a city.",
                "parameters": WEATHER.input_schema,
            },
        }
    ]
    # a compatible server gets max_tokens; params go into the body as they are
    assert (body["max_tokens"], body["temperature"], body["top_k"]) == (256, 0.2, 40)
    assert "max_completion_tokens" not in body
    assert server.headers[0]["authorization"] == "Bearer sk-test"


def test_official_endpoint_gets_max_completion_tokens():
    model = OpenAIModel("o4-mini", api_key="sk-test", max_tokens=100)
    request = model.build_request(user("hi"), [], None)
    assert request["max_completion_tokens"] == 100 and "max_tokens" not in request


async def test_parallel_tool_calls_interleaved(server):
    """Fragments of two calls interleave; only the first fragment of each has id and name."""
    events = [
        chunk({"role": "assistant", "content": None}),
        tool_start(0, "call_a", "get_weather"),
        tool_start(1, "call_b", "get_weather"),
        tool_args(0, '{"city": '),
        tool_args(1, '{"city": "Oslo"'),
        tool_args(0, '"Paris"}'),
        tool_args(1, "}"),
        chunk({}, "tool_calls"),
        usage_chunk(80, 30),
    ]
    server.add(Reply(events=events))
    got = await collect(make_model(server), user("weather?"), [WEATHER])
    starts = [e for e in got if isinstance(e, ToolUseStart)]
    assert starts == [ToolUseStart("call_a", "get_weather"), ToolUseStart("call_b", "get_weather")]
    args: dict[str, str] = {}
    for e in got:
        if isinstance(e, ToolUseDelta):
            args[e.tool_use_id] = args.get(e.tool_use_id, "") + e.input_json
    assert {k: json.loads(v) for k, v in args.items()} == {
        "call_a": {"city": "Paris"},
        "call_b": {"city": "Oslo"},
    }
    assert got[-1] == ModelStop("tool_use", Usage(80, 30))


async def test_servers_that_number_every_call_zero_or_omit_ids(server):
    """Ollama-style: whole calls, each at index 0; llama.cpp-style: a call without an id.
    A "stop" finish after tool calls still reports tool_use."""
    events = [
        tool_start(0, "call_1", "get_weather", '{"city": "Rome"}'),
        tool_start(0, "call_2", "get_weather", '{"city": "Bern"}'),
        chunk({"tool_calls": [{"index": 1, "function": {"name": "get_weather"}}]}),
        tool_args(1, '{"city": "Kyiv"}'),
        chunk({}, "stop"),
    ]
    server.add(Reply(events=events))
    got = await collect(make_model(server), user("weather?"), [WEATHER])
    starts = [e for e in got if isinstance(e, ToolUseStart)]
    assert [s.tool_use_id for s in starts[:2]] == ["call_1", "call_2"]
    assert starts[2].tool_use_id.startswith("call_") and len({s.tool_use_id for s in starts}) == 3
    assert got[-1] == ModelStop("tool_use", Usage())


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_stream(server, field):
    events = [
        role_chunk(),
        chunk({field: "The user greets; "}),
        chunk({field: "answer briefly."}),
        chunk({"content": "Hi!"}),
        chunk({}, "stop"),
        usage_chunk(9, 40),
    ]
    server.add(Reply(events=events))
    got = await collect(make_model(server), user("hi"))
    assert got == [
        ReasoningDelta("The user greets; "),
        ReasoningDelta("answer briefly."),
        TextDelta("Hi!"),
        ModelStop("end_turn", Usage(9, 40)),
    ]


@pytest.mark.parametrize(
    ("finish", "ours"), [("length", "max_tokens"), ("content_filter", "content_filtered")]
)
async def test_finish_reasons(server, finish, ours):
    server.add(text_reply("Once upon a", finish=finish, usage=(5, 16)))
    got = await collect(make_model(server), user("story"))
    assert got[-1] == ModelStop(ours, Usage(5, 16))


async def test_max_tokens_through_the_agent_drops_a_cut_off_tool_call(server):
    events = [role_chunk(), tool_start(0, "call_x", "get_weather", '{"ci'), chunk({}, "length")]
    server.add(Reply(events=events))
    agent = Agent(make_model(server))
    result = await agent.invoke_async("weather?")
    assert result.stop_reason == "max_tokens"
    assert result.message is not None and result.message.tool_uses == []


# --- requests ------------------------------------------------------------------------------------


async def test_history_conversion_images_reasoning_and_tool_results(server):
    png = b"\x89PNG\r\n\x1a\nfake"
    history = [
        Message("user", [Text("What is on this?"), Image("image/png", png)]),
        Message(
            "assistant",
            [
                Reasoning("hidden thoughts", "sig"),
                Text("Let me look."),
                ToolUse("call_1", "zoom", {"x": 1}),
                ToolUse("call_2", "stats", {}),
            ],
        ),
        Message(
            "user",
            [
                ToolResult("call_1", "success", [Text("zoomed"), Image("image/jpeg", b"jpg")]),
                ToolResult("call_2", "success", [Json({"n": 3, "ok": True})]),
            ],
        ),
    ]
    server.add(text_reply("A cat."))
    await collect(make_model(server), history)
    messages = server.requests[0]["messages"]
    assert messages[0] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is on this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgpmYWtl"}},
        ],
    }
    # reasoning is not sent back; arguments are a JSON string
    assert messages[1] == {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "zoom", "arguments": '{"x": 1}'},
            },
            {"id": "call_2", "type": "function", "function": {"name": "stats", "arguments": "{}"}},
        ],
    }
    assert messages[2]["role"] == "tool" and messages[2]["tool_call_id"] == "call_1"
    assert messages[2]["content"].startswith("zoomed\n[image/jpeg image: attached in the next")
    assert messages[3] == {
        "role": "tool",
        "tool_call_id": "call_2",
        "content": '{"n": 3, "ok": true}',
    }
    assert messages[4] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Images returned by tool call call_1:"},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,anBn"}},
        ],
    }
    assert len(messages) == 5


async def test_tool_loop_sends_results_back_including_errors(server, assert_valid):
    ran: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        ran.append(city)
        if city == "Atlantis":
            raise ValueError("no such city")
        return f"sunny in {city}"

    server.add(
        tool_reply(
            ("call_a", "get_weather", '{"city": "Paris"}'),
            ("call_b", "get_weather", '{"city": "Atlantis"}'),
        ),
        text_reply("Paris is sunny; Atlantis is unknown.", usage=(90, 12)),
    )
    agent = Agent(make_model(server), tools=[get_weather], system_prompt="You help.")
    result = await agent.invoke_async("Weather in Paris and Atlantis?")
    assert result.stop_reason == "end_turn"
    assert result.message is not None and result.message.text.startswith("Paris is sunny")
    assert result.usage == Usage(50 + 90, 20 + 12)
    assert sorted(ran) == ["Atlantis", "Paris"]
    second = server.requests[1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "tool"]
    assert second[2]["content"] is None
    assert [c["id"] for c in second[2]["tool_calls"]] == ["call_a", "call_b"]
    assert second[3] == {"role": "tool", "tool_call_id": "call_a", "content": "sunny in Paris"}
    assert second[4]["tool_call_id"] == "call_b"
    assert second[4]["content"].startswith("Error: ") and "no such city" in second[4]["content"]
    assert_valid(agent)


async def test_malformed_tool_arguments_become_an_error_result(server):
    ran: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        ran.append(city)
        return "sunny"

    server.add(
        tool_reply(("call_bad", "get_weather", '{"city": "Par')),
        text_reply("Sorry, let me fix that."),
    )
    agent = Agent(make_model(server), tools=[get_weather])
    result = await agent.invoke_async("weather?")
    assert result.stop_reason == "end_turn" and ran == []
    tool_message = server.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_bad"
    assert (
        tool_message["content"].startswith("Error: ")
        and "not valid JSON" in tool_message["content"]
    )


def test_full_agent_run_with_interrupt_and_resume(server, assert_valid):
    ran: list[str] = []

    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    def approve(event: BeforeToolCallEvent) -> None:
        if event.interrupt("approve", reason={"path": event.tool_use.input["path"]}) is not True:
            event.cancel("not approved")

    server.add(
        tool_reply(("call_rm", "delete_file", '{"path": "/tmp/x"}')),
        text_reply("Deleted /tmp/x."),
    )
    agent = Agent(make_model(server), tools=[delete_file])
    agent.hooks.add_callback(BeforeToolCallEvent, approve)
    paused = agent("remove /tmp/x")
    assert paused.stop_reason == "interrupt" and ran == []
    assert len(server.requests) == 1
    [pending] = agent.interrupts
    result = agent.resume({pending.id: True})
    assert result.stop_reason == "end_turn" and result.message.text == "Deleted /tmp/x."
    assert ran == ["/tmp/x"]
    assert len(server.requests) == 2
    assert server.requests[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_rm",
        "content": "deleted /tmp/x",
    }
    assert_valid(agent)


# --- errors and retries ----------------------------------------------------------------------


def rate_limited() -> Reply:
    return error_reply(
        429,
        "Rate limit reached for gpt-4o-mini in organization org-abc on tokens per min (TPM): "
        "Limit 200000, Used 199500, Requested 900. Please try again in 420ms.",
        "rate_limit_exceeded",
        "tokens",
        headers={"retry-after": "0.02"},
    )


async def test_429_then_success(server):
    server.add(rate_limited(), text_reply("ok"))
    got = await collect(make_model(server), user("hi"))
    assert got[0] == TextDelta("ok") and len(server.requests) == 2


async def test_429_that_never_ends(server):
    server.fallback = rate_limited()
    with pytest.raises(ModelThrottledError) as info:
        await collect(make_model(server), user("hi"))
    assert len(server.requests) == FAST.max_attempts
    exc = info.value
    assert exc.status == 429 and exc.retryable and exc.retry_after == 0.02
    assert exc.provider == "openai" and "'gpt-4o-mini'" in str(exc)
    assert "Rate limit reached" in str(exc) and "gave up after 3 attempts" in str(exc)


async def test_insufficient_quota_is_not_retried(server):
    server.fallback = error_reply(429, "You exceeded your current quota.", "insufficient_quota")
    with pytest.raises(ModelThrottledError) as info:
        await collect(make_model(server), user("hi"))
    assert not info.value.retryable and len(server.requests) == 1


async def test_500_is_retried_then_raised(server):
    server.fallback = error_reply(
        500,
        "The server had an error while processing your request. Sorry about that!",
        type_="server_error",
    )
    with pytest.raises(ModelProviderError) as info:
        await collect(make_model(server), user("hi"))
    assert info.value.status == 500 and info.value.retryable
    assert len(server.requests) == FAST.max_attempts


async def test_401_is_an_auth_error_without_retries(server):
    server.fallback = error_reply(
        401,
        "Incorrect API key provided: sk-test. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        "invalid_api_key",
    )
    with pytest.raises(ModelAuthError) as info:
        await collect(make_model(server), user("hi"))
    assert info.value.status == 401 and not info.value.retryable
    assert "OPENAI_API_KEY" in str(info.value) and "Incorrect API key" in str(info.value)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "body",
    [
        {  # api.openai.com
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, your "
                "messages resulted in 130412 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        {  # vLLM: no wrapper, a numeric code
            "object": "error",
            "message": "This model's maximum context length is 4096 tokens. However, you "
            "requested 5000 tokens (4000 in the messages, 1000 in the completion).",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        {  # llama.cpp server
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 9000,
                "n_ctx": 8192,
            }
        },
    ],
    ids=["openai", "vllm", "llama.cpp"],
)
async def test_context_overflow(server, body):
    server.fallback = Reply(status=400, body=body)
    with pytest.raises(ContextWindowOverflowError) as info:
        await collect(make_model(server), user("a very long conversation"))
    assert info.value.status == 400 and len(server.requests) == 1


async def test_other_4xx_is_not_retried(server):
    server.fallback = error_reply(404, "The model `gpt-9` does not exist.", "model_not_found")
    with pytest.raises(ModelProviderError) as info:
        await collect(make_model(server), user("hi"))
    assert info.value.status == 404 and not info.value.retryable
    assert "does not exist" in str(info.value) and len(server.requests) == 1


async def test_error_after_the_reply_started_is_raised_not_retried(server):
    events = [
        role_chunk(),
        chunk({"content": "Par"}),
        {
            "error": {
                "message": "The server had an error while processing your request.",
                "type": "server_error",
                "param": None,
                "code": None,
            }
        },
    ]
    server.add(Reply(events=events, done=False), text_reply("never"))
    got: list = []
    with pytest.raises(ModelProviderError, match="mid-reply"):
        async for event in make_model(server).stream(user("hi"), [], None):
            got.append(event)
    assert got == [TextDelta("Par")] and len(server.requests) == 1


async def test_stream_cut_before_the_finish(server):
    server.add(Reply(events=[role_chunk(), chunk({"content": "Par"})], done=False))
    with pytest.raises(ModelProviderError, match="ended before the reply finished"):
        await collect(make_model(server), user("hi"))


async def test_given_client_has_its_own_retries_turned_off(server):
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=server.base_url, max_retries=5)
    server.fallback = error_reply(503, "overloaded", type_="server_error")
    model = OpenAIModel("gpt-4o-mini", client=client, retry=RetryPolicy(max_attempts=1))
    with pytest.raises(ModelProviderError):
        await collect(model, user("hi"))
    assert len(server.requests) == 1


def test_one_model_used_from_two_event_loops(server):
    """Each sync call from a running loop gets a fresh loop: pooled connections must not leak."""
    server.add(text_reply("one"), text_reply("two"))
    model = make_model(server)
    first = asyncio.run(collect(model, user("hi")))
    second = asyncio.run(collect(model, user("hi")))
    assert (first[0], second[0]) == (TextDelta("one"), TextDelta("two"))


def _open_fds() -> int:
    import os

    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts fds in /proc")
def test_clients_of_finished_event_loops_are_not_kept(server):
    """Every asyncio.run() gets its own client; once that loop is gone, so is the client."""
    import gc

    server.fallback = text_reply("hello")
    model = make_model(server)
    for _ in range(3):
        asyncio.run(collect(model, user("hi")))
    gc.collect()
    fds = _open_fds()
    for _ in range(30):
        asyncio.run(collect(model, user("hi")))
    gc.collect()
    assert len(model._loop_clients) <= 1
    assert _open_fds() <= fds + 2, "sockets of finished loops are still open"


def test_a_loop_closed_without_shutdown_is_forgotten_at_the_next_call(server):
    server.fallback = text_reply("hello")
    model = make_model(server)
    for _ in range(5):
        loop = asyncio.new_event_loop()
        loop.run_until_complete(collect(model, user("hi")))
        loop.close()  # no shutdown_asyncgens(): the client could not be closed on its loop
    assert len(model._loop_clients) <= 1


def test_one_model_used_from_many_threads_and_loops(server):
    import threading

    server.fallback = text_reply("hello")
    model = make_model(server)
    errors: list[BaseException] = []

    async def four() -> None:
        await asyncio.gather(*(collect(model, user("hi")) for _ in range(4)))

    def worker() -> None:
        for _ in range(4):
            try:
                asyncio.run(four())
            except BaseException as exc:
                errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert len(model._loop_clients) == 0


async def test_unreachable_server_error_names_the_cause():
    model = OpenAIModel(
        "gpt-x", api_key="k", base_url="http://127.0.0.1:1/v1", retry=RetryPolicy(max_attempts=1)
    )
    with pytest.raises(ModelProviderError) as info:
        await collect(model, user("hi"))
    assert info.value.retryable
    assert "could not reach the server (Connection error: ConnectError: " in str(info.value)


# --- configuration -------------------------------------------------------------------------------


def test_from_env_with_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model = OpenAIModel.from_env("gpt-4.1-mini")
    assert model.model_id == "gpt-4.1-mini" and model.base_url == "https://api.openai.com/v1"


def test_from_env_without_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAIModel.from_env("gpt-4.1-mini")


async def test_from_env_local_server_needs_no_key(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    server.add(text_reply("hello from a local model"))
    model = OpenAIModel.from_env("qwen2.5:7b")
    got = await collect(model, user("hi"))
    assert got[0] == TextDelta("hello from a local model")
    assert server.headers[0]["authorization"] == "Bearer not-needed"
    assert server.requests[0]["model"] == "qwen2.5:7b"


def test_agent_model_string_resolves(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    agent = Agent(model="openai:gpt-4o-mini")
    assert isinstance(agent.model, OpenAIModel) and agent.model.model_id == "gpt-4o-mini"


def test_importing_interlude_does_not_import_openai():
    code = (
        "import sys, interlude, interlude.models; "
        "bad = [m for m in ('openai', 'interlude.models.openai') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- hardening: malformed chunks, in-stream error kinds, gateway overflow ------------------------


async def test_malformed_chunk_mid_stream_is_a_provider_error_not_retryable(server):
    server.add(Reply(events=[role_chunk(), chunk({"content": "Par"}), "{not json"], done=False))
    got: list = []
    with pytest.raises(ModelProviderError) as info:
        async for event in make_model(server).stream(user("hi"), [], None):
            got.append(event)
    assert got == [TextDelta("Par")] and not info.value.retryable
    assert "malformed stream chunk" in str(info.value) and info.value.provider == "openai"


async def test_malformed_first_chunk_is_a_retryable_provider_error(server):
    server.add(Reply(events=["{not json"], done=False))
    with pytest.raises(ModelProviderError) as info:
        await collect(make_model(server), user("hi"))
    assert info.value.retryable


def _stream_error(type_: str | None, code: object, message: str = "It failed.") -> Reply:
    error = {"message": message, "type": type_, "param": None, "code": code}
    return Reply(events=[role_chunk(), chunk({"content": "Par"}), {"error": error}], done=False)


@pytest.mark.parametrize(
    ("type_", "code", "error_class", "status", "retryable"),
    [
        ("server_error", None, ModelProviderError, 500, True),
        (None, 500, ModelProviderError, 500, True),
        ("server_error", "503", ModelProviderError, 503, True),
        ("invalid_request_error", None, ModelProviderError, 400, False),
        ("tokens", "rate_limit_exceeded", ModelThrottledError, 429, True),
        ("invalid_request_error", "invalid_api_key", ModelAuthError, 401, False),
    ],
)
async def test_in_stream_error_kind_decides_retryable_and_status(
    server, type_, code, error_class, status, retryable
):
    server.add(_stream_error(type_, code))
    with pytest.raises(error_class) as info:
        await collect(make_model(server), user("hi"))
    assert type(info.value) is error_class
    assert info.value.status == status and info.value.retryable is retryable
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "message",
    [
        "litellm.ContextWindowExceededError: litellm.BadRequestError: "
        "ContextWindowExceededError: BedrockException - Input is too long for requested model.",
        "The prompt has too many tokens: 140000 > 131072",
        "Requested input exceeds the context of this model",
    ],
)
async def test_gateway_context_overflow(server, message):
    server.fallback = Reply(
        status=400, body={"error": {"message": message, "type": None, "param": None, "code": "400"}}
    )
    with pytest.raises(ContextWindowOverflowError) as info:
        await collect(make_model(server), user("long"))
    assert info.value.status == 400 and len(server.requests) == 1


async def test_in_stream_context_overflow(server):
    server.add(_stream_error("invalid_request_error", "context_length_exceeded", "Too long."))
    with pytest.raises(ContextWindowOverflowError):
        await collect(make_model(server), user("long"))
