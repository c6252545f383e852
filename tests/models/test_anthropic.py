"""AnthropicModel against a loopback server speaking the Messages API, via the real SDK."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Iterator
from typing import Any

import pytest

from interlude import Agent, Image, Json, Message, Reasoning, Text, ToolResult, ToolUse, tool
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
from interlude.models.anthropic import AnthropicModel

from .anthropic_server import (
    AnthropicServer,
    Reply,
    block_start,
    block_stop,
    delta,
    error,
    message_delta,
    message_start,
    message_stop,
    ping,
    sse,
    stream_error,
    text_block,
    text_turn,
    thinking_block,
    tool_block,
    tool_turn,
    turn,
)

FAST = RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=0.05)
USER = [Message("user", [Text("hi")])]


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    with AnthropicServer() as s:
        yield s


@pytest.fixture
def model(server: AnthropicServer) -> AnthropicModel:
    return AnthropicModel(
        "claude-test",
        client_args={"api_key": "sk-ant-test", "base_url": server.url},
        retry=FAST,
    )


async def collect(model: AnthropicModel, messages=USER, specs=(), system=None) -> list[Any]:
    return [e async for e in model.stream(messages, specs, system)]


# --- streaming: text, tools, reasoning, stop reasons ------------------------------------------


async def test_plain_text_request_and_events(server, model):
    server.queue(text_turn("Hello there!", input_tokens=12, output_tokens=4))
    events = await collect(model, system="Be brief.")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello there!"
    assert events[-1] == ModelStop("end_turn", events[-1].usage)
    assert events[-1].usage.input_tokens == 12 and events[-1].usage.output_tokens == 4
    (request,) = server.requests
    assert request.path == "/v1/messages"
    # the key goes as x-api-key or, in newer SDKs, as a bearer token
    assert "sk-ant-test" in (
        request.headers.get("x-api-key"),
        request.headers.get("authorization", "").removeprefix("Bearer "),
    )
    assert "anthropic-version" in request.headers
    assert request.body == {
        "model": "claude-test",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "system": "Be brief.",
        "stream": True,
    }


async def test_options_tools_and_params_reach_the_request(server):
    model = AnthropicModel(
        "claude-test",
        client_args={"api_key": "k", "base_url": server.url},
        max_tokens=321,
        temperature=0.2,
        params={"top_k": 5, "metadata": {"user_id": "u1"}},
    )
    server.queue(text_turn("ok"))
    specs = [
        ToolSpec("add", "Add two numbers.", {"type": "object", "properties": {"a": {}}}),
        ToolSpec("now", "The time."),
    ]
    await collect(model, specs=specs)
    body = server.bodies[0]
    assert body["max_tokens"] == 321 and body["temperature"] == 0.2
    assert body["top_k"] == 5 and body["metadata"] == {"user_id": "u1"}
    assert "system" not in body
    assert body["tools"] == [
        {
            "name": "add",
            "description": "Add two numbers.",
            "input_schema": {"type": "object", "properties": {"a": {}}},
        },
        {
            "name": "now",
            "description": "The time.",
            "input_schema": {"type": "object", "properties": {}},
        },
    ]


async def test_parallel_tool_calls_interleaved_by_index(server, model):
    events = [
        message_start(),
        ping(),
        *text_block(0, "Let me check."),
        block_start(1, {"type": "tool_use", "id": "toolu_A", "name": "weather", "input": {}}),
        block_start(2, {"type": "tool_use", "id": "toolu_B", "name": "weather", "input": {}}),
        delta(1, {"type": "input_json_delta", "partial_json": '{"city": '}),
        delta(2, {"type": "input_json_delta", "partial_json": '{"city": "Oslo"}'}),
        delta(1, {"type": "input_json_delta", "partial_json": '"Paris"}'}),
        block_stop(2),
        block_stop(1),
        message_delta("tool_use", 40),
        message_stop(),
    ]
    server.queue(sse(events))
    out = await collect(model)
    assert [e for e in out if isinstance(e, ToolUseStart | ToolUseDelta)] == [
        ToolUseStart("toolu_A", "weather"),
        ToolUseStart("toolu_B", "weather"),
        ToolUseDelta("toolu_A", '{"city": '),
        ToolUseDelta("toolu_B", '{"city": "Oslo"}'),
        ToolUseDelta("toolu_A", '"Paris"}'),
    ]
    assert out[-1].stop_reason == "tool_use"


async def test_reasoning_keeps_signature_and_is_sent_back_before_tool_use(server):
    @tool
    def lookup(q: str) -> str:
        """Look it up."""
        return f"found {q}"

    model = AnthropicModel(
        "claude-test",
        client_args={"api_key": "k", "base_url": server.url},
        params={"thinking": {"type": "enabled", "budget_tokens": 1024}},
    )
    server.queue(
        turn(
            thinking_block(0, "sig-123", "I should ", "look it up."),
            tool_block(1, "toolu_1", "lookup", '{"q": "x"}'),
            stop_reason="tool_use",
        ),
        turn(
            [block_start(0, {"type": "redacted_thinking", "data": "ENCRYPTED"}), block_stop(0)],
            text_block(1, "Done."),
        ),
    )
    agent = Agent(model, tools=[lookup])
    seen: list[Any] = []
    async for event in agent.stream_async("go"):
        seen.append(event)
    reasoning = [e for e in seen if isinstance(e, ReasoningDelta)]
    assert "".join(e.text for e in reasoning) == "I should look it up."
    assert ReasoningDelta("", "sig-123") in reasoning
    assert agent.messages[1].content[0] == Reasoning("I should look it up.", "sig-123")
    assert agent.messages[3].content[0] == Reasoning("", redacted="ENCRYPTED")
    second = server.bodies[1]
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert second["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "I should look it up.", "signature": "sig-123"},
            {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "x"}},
        ],
    }


async def test_conversation_conversion(server, model):
    """Unsigned reasoning is dropped, redacted thinking goes back, images and Json convert."""
    png = b"\x89PNG\r\n"
    messages = [
        Message("user", [Text("look"), Image("image/png", png)]),
        Message(
            "assistant",
            [
                Reasoning("private", None),
                Reasoning("", redacted="abc"),
                Text(""),
                ToolUse("t1", "see", {"n": 1}),
                ToolUse("t2", "see", {}),
            ],
        ),
        Message(
            "user",
            [
                ToolResult("t1", "success", [Json({"a": [1, 2]}), Image("image/jpeg", b"jpg")]),
                ToolResult("t2", "error", [Text("boom")]),
            ],
        ),
        Message("assistant", [Reasoning("only unsigned")]),
    ]
    server.queue(text_turn("ok"))
    await collect(model, messages)
    sent = server.bodies[0]["messages"]
    assert len(sent) == 3  # the assistant message with nothing sendable is left out
    assert sent[0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"},
    }
    assert sent[1]["content"] == [
        {"type": "redacted_thinking", "data": "abc"},
        {"type": "tool_use", "id": "t1", "name": "see", "input": {"n": 1}},
        {"type": "tool_use", "id": "t2", "name": "see", "input": {}},
    ]
    assert sent[2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "t1",
                "content": [
                    {"type": "text", "text": '{"a": [1, 2]}'},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/jpeg", "data": "anBn"},
                    },
                ],
            },
            {
                "type": "tool_result",
                "tool_use_id": "t2",
                "content": [{"type": "text", "text": "boom"}],
                "is_error": True,
            },
        ],
    }


async def test_whitespace_only_text_is_not_sent_back(server, model, assert_valid):
    """The API refuses text blocks of only whitespace (400): in replies and in tool results."""

    @tool
    def lookup(q: str) -> str:
        """Look it up."""
        return "  \n"

    @tool
    def broken() -> str:
        """Fails."""
        raise RuntimeError("no luck")

    server.queue(
        turn(
            thinking_block(0, "sig-1", "I should ", "look it up"),
            text_block(1, "\n\n"),
            tool_block(2, "toolu_1", "lookup", '{"q": ', '"x"}'),
            tool_block(3, "toolu_2", "broken", "{}"),
            stop_reason="tool_use",
        ),
        text_turn("done"),
    )
    agent = Agent(model, tools=[lookup, broken])
    result = await agent.invoke_async("go")
    assert str(result) == "done"
    sent = server.bodies[1]["messages"]
    assert [b["type"] for b in sent[1]["content"]] == ["thinking", "tool_use", "tool_use"]
    assert sent[2]["content"][0] == {"type": "tool_result", "tool_use_id": "toolu_1"}
    assert sent[2]["content"][1]["is_error"] is True
    assert "no luck" in sent[2]["content"][1]["content"][0]["text"]
    assert_valid(agent)

    server.queue(text_turn("ok"))
    blank_error = ToolResult("t9", "error", [Text(" "), Text("\t")])
    await collect(
        model,
        [
            Message("user", [Text("hi"), Text("   ")]),
            Message("assistant", [Text(" \n "), ToolUse("t9", "broken", {})]),
            Message("user", [blank_error]),
        ],
    )
    sent = server.bodies[2]["messages"]
    assert sent[0]["content"] == [{"type": "text", "text": "hi"}]
    assert sent[1]["content"] == [{"type": "tool_use", "id": "t9", "name": "broken", "input": {}}]
    assert sent[2]["content"] == [{"type": "tool_result", "tool_use_id": "t9", "is_error": True}]


@pytest.mark.parametrize(
    ("wire", "ours"),
    [("max_tokens", "max_tokens"), ("stop_sequence", "end_turn"), ("refusal", "content_filtered")],
)
async def test_stop_reasons(server, model, wire, ours):
    server.queue(text_turn("cut", stop_reason=wire))
    events = await collect(model)
    assert events[-1].stop_reason == ours


async def test_max_tokens_through_the_agent(server, model):
    server.queue(text_turn("a long answ", stop_reason="max_tokens"))
    result = await Agent(model).invoke_async("write")
    assert result.stop_reason == "max_tokens"
    assert str(result) == "a long answ"


# --- the tool loop through the agent ------------------------------------------------------------


async def test_tool_loop_sends_results_back(server, model, assert_valid):
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @tool
    def fail() -> str:
        """Always fails."""
        raise RuntimeError("no luck")

    server.queue(
        tool_turn(("toolu_1", "add", {"a": 2, "b": 3}), ("toolu_2", "fail", {}), text="Working."),
        text_turn("2 + 3 = 5"),
    )
    agent = Agent(model, tools=[add, fail], system_prompt="Use tools.")
    result = await agent.invoke_async("add 2 and 3")
    assert str(result) == "2 + 3 = 5"
    assert result.usage.input_tokens == 50 and result.usage.output_tokens == 30
    first, second = server.bodies
    assert [t["name"] for t in first["tools"]] == ["add", "fail"]
    assert first["tools"][0]["input_schema"]["properties"].keys() == {"a", "b"}
    assert second["system"] == "Use tools."
    assert second["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Working."},
            {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2, "b": 3}},
            {"type": "tool_use", "id": "toolu_2", "name": "fail", "input": {}},
        ],
    }
    results = second["messages"][2]
    assert results["role"] == "user"
    assert results["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [{"type": "text", "text": "5"}],
    }
    assert results["content"][1]["tool_use_id"] == "toolu_2"
    assert results["content"][1]["is_error"] is True
    assert "no luck" in results["content"][1]["content"][0]["text"]
    assert_valid(agent)


async def test_malformed_tool_json_becomes_an_error_result(server, model, assert_valid):
    calls: list[str] = []

    @tool
    def echo(text: str) -> str:
        """Echo."""
        calls.append(text)
        return text

    server.queue(
        turn(
            tool_block(0, "toolu_bad", "echo", '{"text": ', '"unterminated'), stop_reason="tool_use"
        ),
        text_turn("sorry"),
    )
    agent = Agent(model, tools=[echo])
    result = await agent.invoke_async("echo")
    assert str(result) == "sorry" and calls == []
    tool_result = server.bodies[1]["messages"][2]["content"][0]
    assert tool_result["is_error"] is True
    assert "not valid JSON" in tool_result["content"][0]["text"]
    assert_valid(agent)


async def test_agent_run_with_interrupt_and_resume(server, model, assert_valid):
    ran: list[str] = []

    @tool
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    def approve(event: BeforeToolCallEvent) -> None:
        if not event.interrupt("approve", reason=f"delete {event.tool_use.input['path']}?"):
            event.cancel("denied")

    server.queue(tool_turn(("toolu_del", "delete", {"path": "/tmp/x"})), text_turn("Deleted."))
    agent = Agent(model, tools=[delete])
    agent.hooks.add_callback(BeforeToolCallEvent, approve)
    paused = await agent.invoke_async("delete /tmp/x")
    assert paused.stop_reason == "interrupt" and ran == []
    assert len(server.requests) == 1
    (interrupt,) = paused.interrupts
    result = await agent.resume_async({interrupt.id: True})
    assert str(result) == "Deleted." and ran == ["/tmp/x"]
    assert len(server.requests) == 2
    tool_result = server.bodies[1]["messages"][2]["content"][0]
    assert tool_result["tool_use_id"] == "toolu_del" and "is_error" not in tool_result
    assert_valid(agent)


# --- errors and retries --------------------------------------------------------------------------


async def test_429_then_success_is_retried(server, model):
    server.queue(error(429, "rate_limit_error", "slow down", {"retry-after": "0"}), text_turn("ok"))
    events = await collect(model)
    assert events[0] == TextDelta("o") and len(server.requests) == 2


async def test_429_forever_raises_throttled_after_max_attempts(server, model):
    server.queue(*[error(429, "rate_limit_error", "slow down", {"retry-after": "0.01"})] * 5)
    with pytest.raises(ModelThrottledError) as info:
        await collect(model)
    assert len(server.requests) == FAST.max_attempts
    err = info.value
    assert err.retryable and err.status == 429 and err.retry_after == 0.01
    assert err.provider == "anthropic" and "claude-test" in str(err) and "3 attempts" in str(err)


@pytest.mark.parametrize(("status", "kind"), [(500, "api_error"), (529, "overloaded_error")])
async def test_server_errors_are_retried_then_raised(server, model, status, kind):
    server.queue(*[error(status, kind, "Internal server error")] * 3)
    with pytest.raises(ModelProviderError) as info:
        await collect(model)
    assert len(server.requests) == 3
    assert info.value.retryable and info.value.status == status


@pytest.mark.parametrize(
    ("status", "kind"), [(401, "authentication_error"), (403, "permission_error")]
)
async def test_auth_errors_are_not_retried(server, model, status, kind):
    server.queue(error(status, kind, "invalid x-api-key"), text_turn("never"))
    with pytest.raises(ModelAuthError) as info:
        await collect(model)
    assert len(server.requests) == 1
    assert not info.value.retryable and "ANTHROPIC_API_KEY" in str(info.value)


async def test_context_overflow(server, model):
    server.queue(
        error(400, "invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum")
    )
    with pytest.raises(ContextWindowOverflowError) as info:
        await collect(model)
    assert info.value.status == 400 and len(server.requests) == 1


async def test_other_bad_request_is_not_retried(server, model):
    server.queue(error(400, "invalid_request_error", "messages: roles must alternate"))
    with pytest.raises(ModelProviderError) as info:
        await collect(model)
    assert not info.value.retryable and "roles must alternate" in str(info.value)
    assert len(server.requests) == 1


async def test_error_event_mid_stream_is_raised_not_retried(server, model):
    events = [
        message_start(),
        *text_block(0, "Hel"),
        stream_error("overloaded_error", "Overloaded"),
    ]
    server.queue(sse(events), text_turn("never"))
    seen: list[Any] = []
    with pytest.raises(ModelProviderError) as info:
        async for event in model.stream(USER, [], None):
            seen.append(event)
    assert seen == [TextDelta("Hel")] and len(server.requests) == 1
    assert "overloaded_error" in str(info.value) and info.value.retryable


async def test_connection_dropped_mid_stream(server, model):
    reply = text_turn("a reply that is cut in the middle")
    reply.cut = True
    server.queue(reply)
    with pytest.raises(ModelProviderError) as info:
        await collect(model)
    assert info.value.retryable and len(server.requests) == 1


async def test_stream_without_message_stop(server, model):
    server.queue(sse([message_start(), *text_block(0, "partial")]))
    with pytest.raises(ModelProviderError, match="before message_stop"):
        await collect(model)


# --- construction ---------------------------------------------------------------------------------


@pytest.fixture
def no_anthropic_credentials(monkeypatch, tmp_path):
    """An environment where the SDK finds no key, token or profile."""
    for name in list(os.environ):
        if name.startswith("ANTHROPIC_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.config/anthropic profile either
    monkeypatch.setenv("APPDATA", str(tmp_path))


async def test_from_env(monkeypatch, no_anthropic_credentials):
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        AnthropicModel.from_env("claude-x")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    model = AnthropicModel.from_env("claude-x")
    assert model.model_id == "claude-x" and model.client().api_key == "sk-ant-env"
    assert model.client().max_retries == 0


def test_no_key_anywhere_is_a_configuration_error(no_anthropic_credentials):
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY") as info:
        AnthropicModel("claude-x")
    assert "claude-x" in str(info.value)
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        AnthropicModel("claude-x", client_args={"base_url": "http://127.0.0.1:1"})


async def test_a_key_from_any_source_is_enough(monkeypatch, no_anthropic_credentials, server):
    server.queue(text_turn("a"), text_turn("b"), text_turn("c"))
    by_token = AnthropicModel("m", client_args={"auth_token": "tok", "base_url": server.url})
    by_header = AnthropicModel(
        "m", client_args={"default_headers": {"X-Api-Key": "hk"}, "base_url": server.url}
    )
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "env-tok")
    by_env_token = AnthropicModel("m", client_args={"base_url": server.url})
    for model in (by_token, by_header, by_env_token):
        await collect(model)
    auth = [(r.headers.get("authorization"), r.headers.get("x-api-key")) for r in server.requests]
    assert auth == [("Bearer tok", None), (None, "hk"), ("Bearer env-tok", None)]


def test_agent_resolves_the_provider_string(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    agent = Agent(model="anthropic:claude-sonnet-4-5")
    assert isinstance(agent.model, AnthropicModel)
    assert agent.model.model_id == "claude-sonnet-4-5"


async def test_a_given_client_has_its_retries_turned_off(server):
    import anthropic

    client = anthropic.AsyncAnthropic(api_key="k", base_url=server.url)
    model = AnthropicModel("m", client=client, retry=RetryPolicy(max_attempts=1))
    assert model.client().max_retries == 0
    server.queue(error(529, "overloaded_error", "Overloaded"), text_turn("never"))
    with pytest.raises(ModelProviderError):
        await collect(model)
    assert len(server.requests) == 1


# --- event loops and threads ------------------------------------------------------------------


class _RepeatingServer(AnthropicServer):
    """Answers every request with the same text turn (after a short pause)."""

    def __init__(self) -> None:
        super().__init__()
        import time

        class Endless(deque):  # type: ignore[type-arg]
            def popleft(self) -> Any:
                time.sleep(0.02)
                return text_turn("hello")

            def __bool__(self) -> bool:
                return True

        self.replies = Endless()


def test_one_model_used_from_many_threads_and_loops():
    """Each asyncio.run() in each thread gets its own client: none is shared across loops."""
    errors: list[BaseException] = []
    with _RepeatingServer() as server:
        model = AnthropicModel("m", client_args={"api_key": "k", "base_url": server.url})

        async def four() -> None:
            await asyncio.gather(*(collect(model) for _ in range(4)))

        def worker() -> None:
            for _ in range(5):
                try:
                    asyncio.run(four())
                except BaseException as exc:
                    errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert [f"{e!r} <- {e.__cause__!r}" for e in errors] == []
        assert len(server.requests) == 60
    assert len(model._loop_clients) == 0


def test_clients_of_finished_event_loops_are_not_kept():
    with _RepeatingServer() as server:
        model = AnthropicModel("m", client_args={"api_key": "k", "base_url": server.url})
        for _ in range(20):
            asyncio.run(collect(model))
        for _ in range(5):
            loop = asyncio.new_event_loop()
            loop.run_until_complete(collect(model))
            loop.close()  # without shutting down: forgotten at the next call
        asyncio.run(collect(model))
    assert len(model._loop_clients) <= 1


def test_importing_interlude_does_not_import_the_sdk():
    code = (
        "import sys, interlude, interlude.models\n"
        "assert 'anthropic' not in sys.modules, 'anthropic was imported'\n"
        "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


# --- hardening: malformed chunks, in-stream error kinds, overflow, stop reason -------------------


def _raw_sse(events: list[Any], bad: str) -> Reply:
    reply = sse(events)
    return Reply(reply.status, reply.body + bad.encode(), reply.content_type, reply.headers)


async def test_malformed_chunk_mid_stream_is_a_provider_error_not_retryable(server, model):
    events = [message_start(), block_start(0, {"type": "text", "text": ""})]
    events.append(delta(0, {"type": "text_delta", "text": "Hel"}))
    server.queue(_raw_sse(events, "event: content_block_delta\ndata: {not json\n\n"))
    seen: list[Any] = []
    with pytest.raises(ModelProviderError) as info:
        async for event in model.stream(USER, [], None):
            seen.append(event)
    assert seen == [TextDelta("Hel")] and not info.value.retryable
    assert "malformed stream chunk" in str(info.value)


async def test_malformed_chunk_before_any_event_is_retryable(server, model):
    server.queue(_raw_sse([message_start()], "event: content_block_start\ndata: {oops\n\n"))
    with pytest.raises(ModelProviderError) as info:
        await collect(model)
    assert info.value.retryable


@pytest.mark.parametrize(
    ("kind", "error_class", "status", "retryable"),
    [
        ("api_error", ModelProviderError, 500, True),
        ("overloaded_error", ModelProviderError, 529, True),
        ("invalid_request_error", ModelProviderError, 400, False),
        ("rate_limit_error", ModelThrottledError, 429, True),
        ("authentication_error", ModelAuthError, 401, False),
    ],
)
async def test_in_stream_error_kind_decides_retryable_and_status(
    server, model, kind, error_class, status, retryable
):
    server.queue(sse([message_start(), *text_block(0, "Hel"), stream_error(kind, "It failed")]))
    with pytest.raises(error_class) as info:
        await collect(model)
    assert type(info.value) is error_class
    assert info.value.status == status and info.value.retryable is retryable


@pytest.mark.parametrize(
    "message",
    [
        "litellm.ContextWindowExceededError: litellm.BadRequestError: AnthropicException - "
        "This model's maximum context length is 200000 tokens.",
        "input is too long for the model",
        "Request has too many tokens",
    ],
)
async def test_gateway_context_overflow(server, model, message):
    server.queue(error(400, "invalid_request_error", message))
    with pytest.raises(ContextWindowOverflowError) as info:
        await collect(model)
    assert info.value.status == 400 and len(server.requests) == 1


async def test_reply_with_tool_uses_stops_with_tool_use_even_if_end_turn(server, model):
    server.queue(turn(tool_block(0, "toolu_1", "get_weather", '{"city": "Oslo"}')))
    events = await collect(model)
    assert isinstance(events[-1], ModelStop) and events[-1].stop_reason == "tool_use"


async def test_tool_uses_cut_by_max_tokens_still_stop_with_max_tokens(server, model):
    server.queue(turn(tool_block(0, "toolu_1", "get_weather", '{"ci'), stop_reason="max_tokens"))
    events = await collect(model)
    assert events[-1].stop_reason == "max_tokens"
