"""OllamaModel against a loopback server speaking Ollama's /api/chat wire format.

The real ``ollama`` client is pointed at the server, so these tests also pin what that client
does to the wire: it drops tool-call ids, refuses string tool arguments, re-validates tool
schemas with a fixed model, and only sends the request when the stream is first read.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from typing import Any

import pytest

from interlude import Agent, Image, Json, Message, Reasoning, Text, ToolResult, ToolUse, tool
from interlude.errors import (
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
    ToolUseStart,
)
from interlude.models.ollama import DEFAULT_HOST, OllamaModel

from .ollama_server import (
    ErrorReply,
    OllamaServer,
    StreamReply,
    call,
    chunk,
    done,
    text_reply,
    tool_reply,
)

FAST = RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=0.02)
WEATHER = ToolSpec(
    "weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.fixture
def server():
    with OllamaServer() as s:
        yield s


def make_model(server: OllamaServer, **kw: Any) -> OllamaModel:
    kw.setdefault("retry", FAST)
    return OllamaModel("llama3.2", host=server.url, **kw)


async def collect(model: OllamaModel, messages: list[Message], specs=(), system=None) -> list:
    return [e async for e in model.stream(messages, list(specs), system)]


def hi() -> list[Message]:
    return [Message("user", [Text("Hi")])]


# --- streaming and request conversion ----------------------------------------------------------


async def test_plain_text(server):
    server.add(text_reply("Hel", "lo!", usage=(31, 4)))
    model = make_model(server, max_tokens=100, temperature=0.2)
    events = await collect(model, hi(), system="Be brief.")
    assert events == [TextDelta("Hel"), TextDelta("lo!"), ModelStop("end_turn", _usage(31, 4))]
    body = server.bodies[0]
    assert body == {
        "model": "llama3.2",
        "stream": True,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
        ],
        "tools": [],  # the client always sends the list
        "options": {"num_predict": 100, "temperature": 0.2},
    }
    assert server.requests[0].headers["content-type"] == "application/json"


async def test_parallel_tool_calls_arrive_whole(server):
    server.add(tool_reply(("weather", {"city": "Paris"}), ("weather", {"city": "Oslo"})))
    events = await collect(make_model(server), hi(), [WEATHER])
    starts = [e for e in events if isinstance(e, ToolUseStart)]
    assert [(s.name, s.input) for s in starts] == [
        ("weather", {"city": "Paris"}),
        ("weather", {"city": "Oslo"}),
    ]
    # The ollama client drops the server's ids ("call_srv0"): the adapter makes its own.
    ids = [s.tool_use_id for s in starts]
    assert len(set(ids)) == 2 and all(i.startswith("call_") and "srv" not in i for i in ids)
    assert events[-1] == ModelStop("tool_use", _usage(26, 12))  # done_reason was "stop"
    assert server.bodies[0]["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "weather",
                "description": "The weather in a city.",
                "parameters": WEATHER.input_schema,
            },
        }
    ]


async def test_tool_ids_are_unique_across_replies(server):
    server.add(tool_reply(("weather", {"city": "A"})), tool_reply(("weather", {"city": "B"})))
    model = make_model(server)
    first = (await collect(model, hi(), [WEATHER]))[0]
    second = (await collect(model, hi(), [WEATHER]))[0]
    assert first.tool_use_id != second.tool_use_id  # interrupt ids are scoped by them


async def test_optional_and_default_parameters_survive_the_client(server):
    @tool
    def forecast(city: str, days: int = 3, tags: list[str] | None = None) -> str:
        """A forecast.

        Args:
            city: Where.
        """
        return "sunny"

    server.add(text_reply("ok"))
    await collect(make_model(server), hi(), [forecast.spec])
    properties = server.bodies[0]["tools"][0]["function"]["parameters"]["properties"]
    assert properties["city"] == {"type": "string", "description": "Where."}
    assert properties["days"] == {"type": "integer", "description": "Default: 3."}
    # anyOf [array, null] would reach the wire as {} without the adapter's folding.
    assert properties["tags"] == {"type": "array", "items": {"type": "string"}}


async def test_history_conversion(server):
    png = b"\x89PNG\r\n\x1a\nfake"
    messages = [
        Message("user", [Text("Look:"), Image("image/png", png), Text("what is it?")]),
        Message(
            "assistant",
            [
                Reasoning("It is an image.", None),
                Text("Checking."),
                ToolUse("t1", "lookup", {"q": "png"}),
                ToolUse("t2", "broken", {}),
            ],
        ),
        Message(
            "user",
            [
                ToolResult(
                    "t1", "success", [Json({"kind": "logo", "ü": 1}), Image("image/png", png)]
                ),
                ToolResult("t2", "error", [Text("it broke")]),
                Text("Go on."),
            ],
        ),
    ]
    server.add(text_reply("A logo."))
    await collect(make_model(server), messages, system="sys")
    encoded = base64.b64encode(png).decode()
    assert server.bodies[0]["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Look:\nwhat is it?", "images": [encoded]},
        {
            "role": "assistant",
            "content": "Checking.",
            "thinking": "It is an image.",
            "tool_calls": [
                {"function": {"name": "lookup", "arguments": {"q": "png"}}},
                {"function": {"name": "broken", "arguments": {}}},
            ],
        },
        {
            "role": "tool",
            "content": '{"kind": "logo", "ü": 1}',
            "tool_name": "lookup",
            "images": [encoded],
        },
        {"role": "tool", "content": "Error: it broke", "tool_name": "broken"},
        {"role": "user", "content": "Go on."},
    ]


async def test_reasoning_and_think_option(server):
    server.add(text_reply("42.", thinking=("Let me ", "think.")))
    events = await collect(make_model(server, think=True), hi())
    assert events[:3] == [ReasoningDelta("Let me "), ReasoningDelta("think."), TextDelta("42.")]
    assert server.bodies[0]["think"] is True


async def test_max_tokens(server):
    server.add(text_reply("Once upon", reason="length", usage=(9, 5)))
    events = await collect(make_model(server, max_tokens=5), hi())
    assert events[-1] == ModelStop("max_tokens", _usage(9, 5))
    assert server.bodies[0]["options"] == {"num_predict": 5}


async def test_options_and_params_pass_through(server):
    server.add(text_reply("{}"))
    model = make_model(
        server,
        temperature=0.1,
        options={"num_ctx": 8192, "temperature": 0.9},
        params={"keep_alive": "5m", "format": "json"},
    )
    await collect(model, hi())
    body = server.bodies[0]
    assert body["options"] == {"num_ctx": 8192, "temperature": 0.9}
    assert (body["keep_alive"], body["format"]) == ("5m", "json")
    with pytest.raises(Exception, match="cannot set \\['think'\\]"):
        OllamaModel("m", params={"think": True})


async def test_a_given_client_is_used_and_left_open(server):
    import ollama

    client = ollama.AsyncClient(host=server.url, headers={"x-team": "blue"})
    model = OllamaModel("llama3.2", client=client, retry=FAST)
    assert model.host.startswith(server.url)
    server.add(text_reply("one"), text_reply("two"))
    assert (await collect(model, hi()))[0] == TextDelta("one")
    assert (await collect(model, hi()))[0] == TextDelta("two")
    assert [r.headers["x-team"] for r in server.requests] == ["blue", "blue"]
    await client.close()


# --- errors and retries ------------------------------------------------------------------------


async def test_429_then_success(server):
    server.add(ErrorReply(429, "too many requests"), text_reply("ok"))
    events = await collect(make_model(server), hi())
    assert events[0] == TextDelta("ok") and len(server.requests) == 2


async def test_429_that_never_ends(server):
    server.add(*[ErrorReply(429, "too many requests")] * 5)
    with pytest.raises(ModelThrottledError) as info:
        await collect(make_model(server), hi())
    assert len(server.requests) == 3
    assert info.value.status == 429 and info.value.retryable
    assert "gave up after 3 attempts" in str(info.value)


async def test_500_is_retried_then_raised(server):
    server.add(*[ErrorReply(500, "llama runner process has terminated: signal: killed")] * 3)
    with pytest.raises(ModelProviderError) as info:
        await collect(make_model(server), hi())
    assert len(server.requests) == 3
    assert info.value.status == 500 and info.value.retryable
    assert "llama runner process has terminated" in str(info.value)


async def test_401_is_not_retried(server):
    server.add(ErrorReply(401, "unauthorized"))
    with pytest.raises(ModelAuthError, match="OLLAMA_API_KEY") as info:
        await collect(make_model(server), hi())
    assert len(server.requests) == 1 and not info.value.retryable


@pytest.mark.parametrize(
    "error",
    [
        # truncate=false: llama.cpp's error, wrapped by Ollama
        json.dumps(
            {
                "error": {
                    "code": 400,
                    "message": "request (8889 tokens) exceeds the available context size "
                    "(4096 tokens), try increasing it",
                    "type": "exceed_context_size_error",
                }
            }
        ),
        # shift=false
        "the prompt is longer than the context length currently available to the model",
    ],
)
async def test_context_overflow(server, error):
    server.add(ErrorReply(400, error))
    with pytest.raises(ContextWindowOverflowError) as info:
        await collect(make_model(server), hi())
    assert len(server.requests) == 1 and info.value.status == 400


async def test_missing_model_says_how_to_pull_it(server):
    server.add(ErrorReply(404, 'model "llama3.2" not found, try pulling it first'))
    with pytest.raises(ModelProviderError, match=r"ollama pull llama3\.2") as info:
        await collect(make_model(server), hi())
    assert len(server.requests) == 1 and not info.value.retryable


async def test_unreachable_host_is_retryable():
    with OllamaServer() as gone:
        url = gone.url  # a port nobody listens on once the server is closed
    model = OllamaModel("llama3.2", host=url, retry=RetryPolicy(max_attempts=2, initial_delay=0.01))
    with pytest.raises(ModelProviderError, match=f"not reachable at {url}") as info:
        await collect(model, hi())
    assert info.value.retryable and "gave up after 2 attempts" in str(info.value)


async def test_error_after_the_reply_started_is_not_retried(server):
    server.add(StreamReply([chunk("Par"), {"error": "an error was encountered while running"}]))
    seen = []
    with pytest.raises(ModelProviderError, match="an error was encountered"):
        async for event in make_model(server).stream(hi(), [], None):
            seen.append(event)
    assert seen == [TextDelta("Par")] and len(server.requests) == 1


async def test_in_stream_error_before_any_chunk_is_retried(server):
    server.add(StreamReply([{"error": "model runner crashed"}]), text_reply("ok"))
    events = await collect(make_model(server), hi())
    assert events[0] == TextDelta("ok") and len(server.requests) == 2


async def test_reply_without_done_line(server):
    server.add(StreamReply([chunk("cut")]))
    with pytest.raises(ModelProviderError, match="before its final 'done'"):
        await collect(make_model(server), hi())


async def test_string_arguments_are_refused_by_the_client(server):
    # Ollama itself always sends an object; the ollama client rejects a string outright.
    bad = chunk(tool_calls=[call("weather", '{"city": "Par')])
    server.add(StreamReply([bad, done()]))
    with pytest.raises(ModelProviderError, match=r"cannot read.*arguments") as info:
        await collect(make_model(server), hi(), [WEATHER])
    assert not info.value.retryable and len(server.requests) == 1


# --- through the agent -------------------------------------------------------------------------


async def test_tool_loop_sends_results_back(server, assert_valid):
    @tool
    def weather(city: str) -> dict:
        """The weather in a city."""
        return {"city": city, "sky": "clear"}

    @tool
    def alerts(city: str) -> str:
        """Weather alerts."""
        raise RuntimeError("alert service down")

    server.add(
        tool_reply(("weather", {"city": "Paris"}), ("alerts", {"city": "Paris"}), text="Looking."),
        text_reply("Clear, no alerts known."),
    )
    agent = Agent(make_model(server), tools=[weather, alerts], system_prompt="sys")
    result = await agent.invoke_async("Weather in Paris?")
    assert str(result) == "Clear, no alerts known." and result.stop_reason == "end_turn"
    assert result.usage == _usage(52, 24)
    assert_valid(agent)
    second = server.bodies[1]["messages"]
    assert second[2]["role"] == "assistant" and second[2]["content"] == "Looking."
    assert [c["function"]["name"] for c in second[2]["tool_calls"]] == ["weather", "alerts"]
    assert second[3] == {
        "role": "tool",
        "content": '{"city": "Paris", "sky": "clear"}',
        "tool_name": "weather",
    }
    assert second[4]["tool_name"] == "alerts"
    assert (
        second[4]["content"].startswith("Error: ") and "alert service down" in second[4]["content"]
    )
    assert len(second) == 5


async def test_reasoning_goes_back_with_the_tool_calls(server):
    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return "clear"

    thinking = chunk(thinking="Need the weather.")
    calls = chunk(tool_calls=[call("weather", {"city": "Oslo"})])
    server.add(StreamReply([thinking, calls, done()]), text_reply("Clear."))
    agent = Agent(make_model(server, think=True), tools=[weather])
    await agent.invoke_async("Oslo?")
    assistant = server.bodies[1]["messages"][1]
    assert assistant["thinking"] == "Need the weather."
    assert assistant["tool_calls"] == [
        {"function": {"name": "weather", "arguments": {"city": "Oslo"}}}
    ]
    assert isinstance(agent.messages[1].content[0], Reasoning)


async def test_bad_arguments_become_an_error_result(server, assert_valid):
    ran = []

    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        ran.append(city)
        return "clear"

    server.add(tool_reply(("weather", {"town": 42})), text_reply("Sorry."))
    agent = Agent(make_model(server), tools=[weather])
    result = await agent.invoke_async("Weather?")
    assert str(result) == "Sorry." and ran == []
    assert_valid(agent)
    tool_message = server.bodies[1]["messages"][2]
    assert tool_message["role"] == "tool" and tool_message["content"].startswith("Error: ")
    assert "city" in tool_message["content"]


async def test_interrupt_and_resume_through_the_adapter(server, assert_valid):
    ran = []

    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    def approve(event: BeforeToolCallEvent) -> None:
        if event.interrupt("approve", reason={"path": event.tool_use.input["path"]}) is not True:
            event.cancel("not approved")

    server.add(tool_reply(("delete_file", {"path": "/tmp/x"})), text_reply("Deleted."))
    agent = Agent(make_model(server), tools=[delete_file])
    agent.hooks.add_callback(BeforeToolCallEvent, approve)
    paused = await agent.invoke_async("Delete /tmp/x")
    assert paused.stop_reason == "interrupt" and ran == []
    [pending] = paused.interrupts
    assert pending.reason == {"path": "/tmp/x"}
    final = await agent.resume_async({pending.id: True})
    assert str(final) == "Deleted." and ran == ["/tmp/x"]
    assert len(server.requests) == 2
    assert server.bodies[1]["messages"][-1]["content"] == "deleted /tmp/x"
    assert_valid(agent)


# --- clients and event loops -------------------------------------------------------------------


@pytest.fixture
def built_clients(monkeypatch) -> list[Any]:
    """Every ollama.AsyncClient built from here on."""
    import ollama

    built: list[Any] = []

    class Counting(ollama.AsyncClient):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            built.append(self)

    monkeypatch.setattr(ollama, "AsyncClient", Counting)
    return built


def test_one_client_per_event_loop_kept_only_while_it_lives(server, built_clients):
    import asyncio

    server.add(*[text_reply(f"reply {i}") for i in range(9)])
    model = make_model(server)

    async def three() -> list[Any]:
        return [await collect(model, hi()) for _ in range(3)]

    first = asyncio.run(three())
    assert [r[0] for r in first] == [TextDelta(f"reply {i}") for i in range(3)]
    assert len(built_clients) == 1, "each reply built a client of its own"
    asyncio.run(three())
    asyncio.run(three())
    assert len(built_clients) == 3  # one per loop: connections cannot move between loops
    assert all(c._client.is_closed for c in built_clients), "a finished loop's client is open"
    assert len(model._loop_clients) == 0


# --- configuration -----------------------------------------------------------------------------


def test_from_env_needs_no_key(monkeypatch):
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    model = OllamaModel.from_env("llama3.2")
    assert model.host == DEFAULT_HOST == "http://127.0.0.1:11434"
    assert model.model_id == "llama3.2"


async def test_from_env_reads_host_and_optional_key(server, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", server.url)
    monkeypatch.setenv("OLLAMA_API_KEY", "k-123")  # the ollama client sends it itself
    server.add(text_reply("ok"))
    events = await collect(OllamaModel.from_env("llama3.2"), hi())
    assert events[0] == TextDelta("ok")
    assert server.requests[0].headers["authorization"] == "Bearer k-123"


async def test_agent_model_string(server, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", server.url)
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    server.add(text_reply("Hello from Ollama."))
    agent = Agent(model="ollama:qwen3:8b")
    assert isinstance(agent.model, OllamaModel) and agent.model.model_id == "qwen3:8b"
    assert str(await agent.invoke_async("Hi")) == "Hello from Ollama."
    assert server.bodies[0]["model"] == "qwen3:8b"


def test_importing_interlude_does_not_import_ollama():
    code = (
        "import sys, interlude, interlude.models\n"
        "bad = [m for m in ('ollama', 'interlude.models.ollama') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)


def _usage(input_tokens: int, output_tokens: int):
    from interlude import Usage

    return Usage(input_tokens, output_tokens)


# --- hardening: malformed lines, Retry-After, overflow, stop reason ------------------------------


async def test_malformed_line_mid_stream_is_a_provider_error_not_retryable(server):
    server.add(StreamReply([chunk("Hel"), "{not json"]), text_reply("never"))
    seen: list = []
    with pytest.raises(ModelProviderError) as info:
        async for event in make_model(server).stream(hi(), [], None):
            seen.append(event)
    assert seen == [TextDelta("Hel")] and not info.value.retryable
    assert "malformed stream chunk" in str(info.value) and len(server.requests) == 1


async def test_malformed_first_line_is_retried(server):
    server.add(StreamReply(["{not json"]), text_reply("ok"))
    events = await collect(make_model(server), hi())
    assert events[0] == TextDelta("ok") and len(server.requests) == 2


async def test_malformed_first_line_every_time_is_a_retryable_provider_error(server):
    server.add(*[StreamReply(["{not json"])] * 3)
    with pytest.raises(ModelProviderError) as info:
        await collect(make_model(server), hi())
    assert info.value.retryable and len(server.requests) == 3


@pytest.mark.parametrize("wait", ["0.02", "retry-after-ms"])
async def test_retry_after_is_read_from_the_response(server, wait):
    headers = {"Retry-After-Ms": "20"} if wait == "retry-after-ms" else {"Retry-After": wait}
    server.add(*[ErrorReply(429, "too many requests", headers=headers)] * 3)
    with pytest.raises(ModelThrottledError) as info:
        await collect(make_model(server), hi())
    assert info.value.retry_after == 0.02


async def test_gateway_context_overflow(server):
    server.add(ErrorReply(400, "prompt is too long: 9000 tokens > 8192 maximum"))
    with pytest.raises(ContextWindowOverflowError) as info:
        await collect(make_model(server), hi())
    assert info.value.status == 400 and len(server.requests) == 1


async def test_tool_calls_cut_by_the_length_limit_stop_with_max_tokens(server):
    server.add(StreamReply([chunk(tool_calls=[call("weather", {"city": "Oslo"})]), done("length")]))
    events = await collect(make_model(server), hi(), [WEATHER])
    assert isinstance(events[-1], ModelStop) and events[-1].stop_reason == "max_tokens"
