"""BedrockModel against a loopback server speaking ConverseStream's real wire format.

The real boto3 client talks to ``bedrock_server.BedrockServer`` (binary event-stream frames,
JSON errors with ``x-amzn-ErrorType``); each test scripts the replies and checks what the
adapter streamed and what request bodies the server received.
"""

from __future__ import annotations

import asyncio
import base64
import subprocess
import sys
import textwrap
import threading
import time
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
from interlude.models.bedrock import BedrockModel
from tests.support import free_port

from .bedrock_server import (
    BedrockServer,
    ErrorReply,
    Frame,
    StreamReply,
    events,
    exception_frame,
    text_reply,
    tool_reply,
)

MODEL_ID = "us.anthropic.claude-sonnet-4-20250514-v1:0"
FAST = RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=0.02)


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Fake credentials; nothing read from the machine's AWS config or instance metadata."""
    for name in (
        "AWS_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
        "AWS_BEARER_TOKEN_BEDROCK",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")


@pytest.fixture
def server() -> Iterator[BedrockServer]:
    with BedrockServer() as s:
        yield s


def make_model(server: BedrockServer, **kwargs: Any) -> BedrockModel:
    kwargs.setdefault("retry", FAST)
    return BedrockModel(MODEL_ID, region_name="us-east-1", endpoint_url=server.url, **kwargs)


async def collect(
    model: BedrockModel,
    messages: list[Message],
    specs: list[ToolSpec] = (),
    system: str | None = None,
) -> list[Any]:
    return [e async for e in model.stream(messages, list(specs), system)]


def user(text: str) -> list[Message]:
    return [Message("user", [Text(text)])]


# --- streaming and request conversion ------------------------------------------------------------


async def test_plain_text_reply_and_request(server: BedrockServer) -> None:
    server.add(text_reply("Hel", "lo", usage=(21, 3)))
    got = await collect(make_model(server), user("hi"), system="Be brief.")
    assert got == [TextDelta("Hel"), TextDelta("lo"), ModelStop("end_turn", _usage(21, 3))]
    [request] = server.requests
    assert request.path == "/model/us.anthropic.claude-sonnet-4-20250514-v1%3A0/converse-stream"
    assert request.model_id == MODEL_ID
    assert request.headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDTEST/")
    assert request.body == {
        "messages": [{"role": "user", "content": [{"text": "hi"}]}],
        "system": [{"text": "Be brief."}],
        "inferenceConfig": {"maxTokens": 4096},
    }


async def test_request_conversion_of_a_rich_conversation(server: BedrockServer) -> None:
    png, jpeg = b"\x89PNG\r\n", b"\xff\xd8\xff"
    messages = [
        Message("user", [Text("look"), Image("image/png", png)]),
        Message(
            "assistant",
            [
                Reasoning("hmm", "sig-1"),
                Text("calling"),
                ToolUse("t1", "lookup", {"q": "a"}),
                ToolUse("t2", "lookup", {"q": "b"}),
            ],
        ),
        Message(
            "user",
            [
                ToolResult("t1", "success", [Text("ok"), Json({"n": 1}), Json([1, 2])]),
                ToolResult("t2", "error", [Text("boom"), Image("image/jpeg", jpeg)]),
            ],
        ),
    ]
    spec = ToolSpec(
        "lookup", "Look up.", {"type": "object", "properties": {"q": {"type": "string"}}}
    )
    server.add(text_reply("done"))
    model = make_model(
        server,
        max_tokens=100,
        temperature=0.2,
        params={
            "inferenceConfig": {"stopSequences": ["END"]},
            "additionalModelRequestFields": {
                "thinking": {"type": "enabled", "budget_tokens": 1024}
            },
        },
    )
    await collect(model, messages, [spec, ToolSpec("noargs", "")])
    body = server.requests[0].body
    b64 = lambda raw: base64.b64encode(raw).decode()  # noqa: E731 - bytes travel as base64
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"text": "look"},
                {"image": {"format": "png", "source": {"bytes": b64(png)}}},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"reasoningContent": {"reasoningText": {"text": "hmm", "signature": "sig-1"}}},
                {"text": "calling"},
                {"toolUse": {"toolUseId": "t1", "name": "lookup", "input": {"q": "a"}}},
                {"toolUse": {"toolUseId": "t2", "name": "lookup", "input": {"q": "b"}}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": "t1",
                        "status": "success",
                        "content": [
                            {"text": "ok"},
                            {"json": {"n": 1}},
                            {"text": "[1, 2]"},
                        ],
                    }
                },
                {
                    "toolResult": {
                        "toolUseId": "t2",
                        "status": "error",
                        "content": [
                            {"text": "boom"},
                            {"image": {"format": "jpeg", "source": {"bytes": b64(jpeg)}}},
                        ],
                    }
                },
            ],
        },
    ]
    assert body["toolConfig"] == {
        "tools": [
            {
                "toolSpec": {
                    "name": "lookup",
                    "description": "Look up.",
                    "inputSchema": {"json": spec.input_schema},
                }
            },
            {
                "toolSpec": {
                    "name": "noargs",
                    "inputSchema": {"json": {"type": "object", "properties": {}}},
                }
            },
        ]
    }
    assert body["inferenceConfig"] == {
        "maxTokens": 100,
        "temperature": 0.2,
        "stopSequences": ["END"],
    }
    assert body["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 1024}
    }
    assert "system" not in body


async def test_what_bedrock_would_refuse_is_reshaped(server: BedrockServer) -> None:
    """Blank text and empty messages are left out (roles then joined), an empty tool result
    gets a placeholder, and tools used earlier are declared when the agent has none now."""
    messages = [
        Message("user", [Text("go")]),
        Message("assistant", [Text("  "), ToolUse("t1", "old_tool", {})]),
        Message("user", [ToolResult("t1", "success", [Text("")])]),
        Message("assistant", [Text("")]),
        Message("user", [Text("again")]),
    ]
    server.add(text_reply("ok"))
    await collect(make_model(server, max_tokens=None), messages)
    body = server.requests[0].body
    assert body["messages"] == [
        {"role": "user", "content": [{"text": "go"}]},
        {
            "role": "assistant",
            "content": [
                {"toolUse": {"toolUseId": "t1", "name": "old_tool", "input": {}}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": "t1",
                        "status": "success",
                        "content": [{"text": "(no output)"}],
                    }
                },
                {"text": "again"},
            ],
        },
    ]
    [spec] = body["toolConfig"]["tools"]
    assert spec["toolSpec"]["name"] == "old_tool"
    assert "inferenceConfig" not in body


async def test_unsupported_image_type_is_refused_before_any_request(server: BedrockServer) -> None:
    messages = [Message("user", [Image("image/bmp", b"BM")])]
    with pytest.raises(ModelProviderError, match="image/bmp"):
        await collect(make_model(server), messages)
    assert server.requests == []


async def test_parallel_interleaved_tool_calls_are_keyed_by_id(server: BedrockServer) -> None:
    def start(i: int, tid: str) -> Frame:
        return Frame(
            "contentBlockStart",
            {"contentBlockIndex": i, "start": {"toolUse": {"toolUseId": tid, "name": "add"}}},
        )

    def part(i: int, s: str) -> Frame:
        return Frame(
            "contentBlockDelta", {"contentBlockIndex": i, "delta": {"toolUse": {"input": s}}}
        )

    frames = [
        Frame("messageStart", {"role": "assistant"}),
        start(0, "tA"),
        start(1, "tB"),
        part(0, '{"a": 1,'),
        part(1, '{"a": 10,'),
        part(1, ' "b": 20}'),
        part(0, ' "b": 2}'),
        Frame("contentBlockStop", {"contentBlockIndex": 0}),
        Frame("contentBlockStop", {"contentBlockIndex": 1}),
        *events(stop="tool_use")[1:],  # messageStop + metadata
    ]
    server.add(StreamReply(frames))
    got = await collect(make_model(server), user("add"))
    assert got == [
        ToolUseStart("tA", "add"),
        ToolUseStart("tB", "add"),
        ToolUseDelta("tA", '{"a": 1,'),
        ToolUseDelta("tB", '{"a": 10,'),
        ToolUseDelta("tB", ' "b": 20}'),
        ToolUseDelta("tA", ' "b": 2}'),
        ModelStop("tool_use", _usage(12, 7)),
    ]

    # Through the agent: both calls run with their own arguments.
    server.add(StreamReply(frames), text_reply("3 and 30"))
    sums: list[int] = []

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        sums.append(a + b)
        return a + b

    agent = Agent(make_model(server), tools=[add])
    assert agent("add").message.text == "3 and 30"
    assert sorted(sums) == [3, 30]
    results = server.requests[-1].body["messages"][-1]["content"]
    assert [r["toolResult"]["toolUseId"] for r in results] == ["tA", "tB"]
    assert [r["toolResult"]["content"] for r in results] == [[{"text": "3"}], [{"text": "30"}]]


def test_tool_loop_with_reasoning_sends_results_and_signed_reasoning_back(
    server: BedrockServer, assert_valid: Any
) -> None:
    server.add(
        StreamReply(
            events(
                ("reasoning", (["I should ", "look it up"], "sig-xyz")),
                ("text", ["Checking."]),
                ("tool", ("t1", "lookup", ['{"query": ', '"tea"}'])),
                ("tool", ("t2", "explode", ["{}"])),
                stop="tool_use",
            )
        ),
        text_reply("Tea is found."),
    )

    @tool
    def lookup(query: str) -> str:
        """Look something up."""
        return f"found {query}"

    @tool
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("kaboom")

    agent = Agent(make_model(server), tools=[lookup, explode], system_prompt="sys")
    result = agent("tea?")
    assert result.stop_reason == "end_turn" and result.message.text == "Tea is found."
    assert result.usage.input_tokens == 24
    assert agent.messages[1].content[0] == Reasoning("I should look it up", "sig-xyz")
    assert_valid(agent)
    first, second = (r.body for r in server.requests)
    assert [t["toolSpec"]["name"] for t in first["toolConfig"]["tools"]] == ["lookup", "explode"]
    assert second["messages"][1] == {
        "role": "assistant",
        "content": [
            {
                "reasoningContent": {
                    "reasoningText": {"text": "I should look it up", "signature": "sig-xyz"}
                }
            },
            {"text": "Checking."},
            {"toolUse": {"toolUseId": "t1", "name": "lookup", "input": {"query": "tea"}}},
            {"toolUse": {"toolUseId": "t2", "name": "explode", "input": {}}},
        ],
    }
    ok, failed = (b["toolResult"] for b in second["messages"][2]["content"])
    assert ok == {"toolUseId": "t1", "status": "success", "content": [{"text": "found tea"}]}
    assert failed["toolUseId"] == "t2" and failed["status"] == "error"
    assert "kaboom" in failed["content"][0]["text"]


async def test_reasoning_deltas_keep_the_signature(server: BedrockServer) -> None:
    server.add(StreamReply(events(("reasoning", (["a", "b"], "sig")), ("text", ["hi"]))))
    got = await collect(make_model(server), user("think"))
    assert got[:4] == [
        ReasoningDelta("a"),
        ReasoningDelta("b"),
        ReasoningDelta("", "sig"),
        TextDelta("hi"),
    ]


def test_max_tokens(server: BedrockServer) -> None:
    server.add(text_reply("cut sh", stop="max_tokens"))
    result = Agent(make_model(server))("long story")
    assert result.stop_reason == "max_tokens" and result.message.text == "cut sh"


@pytest.mark.parametrize(
    ("wire", "ours"),
    [
        ("stop_sequence", "end_turn"),
        ("guardrail_intervened", "content_filtered"),
        ("content_filtered", "content_filtered"),
    ],
)
async def test_other_stop_reasons(server: BedrockServer, wire: str, ours: str) -> None:
    server.add(text_reply("x", stop=wire))
    assert (await collect(make_model(server), user("q")))[-1].stop_reason == ours


def test_malformed_tool_arguments_reach_the_tool_as_an_error_result(server: BedrockServer) -> None:
    server.add(tool_reply(("t1", "lookup", ['{"query": "te'])), text_reply("sorry"))
    ran: list[str] = []

    @tool
    def lookup(query: str) -> str:
        """Look something up."""
        ran.append(query)
        return query

    agent = Agent(make_model(server), tools=[lookup])
    assert agent("x").message.text == "sorry"
    assert ran == []
    [result] = server.requests[1].body["messages"][-1]["content"]
    assert result["toolResult"]["status"] == "error"
    assert "not valid JSON" in result["toolResult"]["content"][0]["text"]


# --- errors and retries ---------------------------------------------------------------------------


async def test_throttled_then_success(server: BedrockServer) -> None:
    server.add(
        ErrorReply(429, "ThrottlingException", "Too many requests, please wait."), text_reply("ok")
    )
    got = await collect(make_model(server), user("hi"))
    assert got[0] == TextDelta("ok")
    assert len(server.requests) == 2


async def test_throttled_forever_gives_up_after_max_attempts(server: BedrockServer) -> None:
    reply = ErrorReply(429, "ThrottlingException", "Too many requests", {"Retry-After": "0.01"})
    server.add(*[reply] * 5)
    with pytest.raises(ModelThrottledError) as info:
        await collect(make_model(server), user("hi"))
    assert len(server.requests) == 3
    error = info.value
    assert error.retryable and error.status == 429 and error.provider == "bedrock"
    assert error.retry_after == 0.01
    assert MODEL_ID in str(error) and "gave up after 3 attempts" in str(error)


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (500, "InternalServerException"),
        (503, "ServiceUnavailableException"),
        (429, "ModelNotReadyException"),
    ],
)
async def test_server_errors_are_retried_then_raised(
    server: BedrockServer, status: int, kind: str
) -> None:
    server.add(*[ErrorReply(status, kind, "try later")] * 3)
    with pytest.raises(ModelProviderError) as info:
        await collect(make_model(server), user("hi"))
    assert len(server.requests) == 3
    assert info.value.retryable and info.value.status == status and kind in str(info.value)


async def test_a_given_client_config_keeps_boto3_retries_off(server: BedrockServer) -> None:
    from botocore.config import Config

    server.add(*[ErrorReply(500, "InternalServerException", "oops")] * 6)
    config = Config(read_timeout=5, retries={"max_attempts": 5, "mode": "standard"})
    model = make_model(server, client_args={"config": config})
    with pytest.raises(ModelProviderError):
        await collect(model, user("hi"))
    assert len(server.requests) == 3  # ours only
    assert model.client.meta.config.read_timeout == 5


async def test_a_ready_made_client_is_used(server: BedrockServer) -> None:
    import boto3

    client = boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=server.url)
    server.add(text_reply("via client"))
    got = await collect(BedrockModel(MODEL_ID, client=client), user("hi"))
    assert got[0] == TextDelta("via client")


@pytest.mark.parametrize("kind", ["AccessDeniedException", "UnrecognizedClientException"])
async def test_auth_errors_are_not_retried(server: BedrockServer, kind: str) -> None:
    server.add(ErrorReply(403, kind, "You don't have access to the model."), text_reply("no"))
    with pytest.raises(ModelAuthError) as info:
        await collect(make_model(server), user("hi"))
    assert len(server.requests) == 1
    assert not info.value.retryable and info.value.status == 403 and MODEL_ID in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        "Input is too long for requested model.",
        "The model returned the following errors: prompt is too long: 210000 tokens > 200000",
        "too many input tokens",
    ],
)
async def test_context_overflow(server: BedrockServer, text: str) -> None:
    server.add(ErrorReply(400, "ValidationException", text), text_reply("no"))
    with pytest.raises(ContextWindowOverflowError):
        await collect(make_model(server), user("hi"))
    assert len(server.requests) == 1


async def test_other_validation_errors_are_not_retried(server: BedrockServer) -> None:
    server.add(ErrorReply(400, "ValidationException", "messages.0: blank text"), text_reply("no"))
    with pytest.raises(ModelProviderError) as info:
        await collect(make_model(server), user("hi"))
    assert type(info.value) is ModelProviderError and not info.value.retryable
    assert info.value.status == 400 and len(server.requests) == 1


async def test_an_error_mid_stream_is_raised_not_retried(server: BedrockServer) -> None:
    frames = [*events(("text", ["partial"]))[:2], exception_frame("throttlingException", "slow")]
    server.add(StreamReply(frames), text_reply("never"))
    seen: list[Any] = []
    with pytest.raises(ModelThrottledError, match="slow"):
        async for event in make_model(server).stream(user("hi"), [], None):
            seen.append(event)
    assert seen == [TextDelta("partial")]
    assert len(server.requests) == 1


async def test_connection_refused_is_a_retryable_provider_error() -> None:
    port = free_port()  # nothing listens there
    model = BedrockModel(
        MODEL_ID,
        region_name="us-east-1",
        endpoint_url=f"http://127.0.0.1:{port}",
        retry=RetryPolicy(max_attempts=2, initial_delay=0.01),
    )
    with pytest.raises(ModelProviderError) as info:
        await collect(model, user("hi"))
    assert info.value.retryable and "connection" in str(info.value).lower()


async def test_connection_dropped_mid_stream_is_a_retryable_provider_error(
    server: BedrockServer,
) -> None:
    frames = events(("text", ["Hel", "lo", " there"]))[:4]  # the third delta is cut in half
    server.add(StreamReply(frames, cut=True), text_reply("never"))
    seen: list[Any] = []
    with pytest.raises(ModelProviderError) as info:
        async for event in make_model(server).stream(user("hi"), [], None):
            seen.append(event)
    assert seen == [TextDelta("Hel"), TextDelta("lo")]
    assert info.value.retryable and info.value.provider == "bedrock"
    assert "connection" in str(info.value) and MODEL_ID in str(info.value)
    assert len(server.requests) == 1  # the reply had started: not retried here


def test_connection_dropped_mid_stream_through_the_agent(server: BedrockServer) -> None:
    server.add(StreamReply(events(("text", ["Hel", "lo"]))[:3], cut=True))
    with pytest.raises(ModelProviderError) as info:
        Agent(make_model(server, retry=RetryPolicy(max_attempts=1)))("hi")
    assert info.value.retryable


# --- threads: the loop never blocks, an early stop closes the stream -----------------------------


async def test_stopping_early_closes_the_stream_and_ends_the_thread(server: BedrockServer) -> None:
    server.add(StreamReply(events(("text", ["first"]))[:2], hang=True))
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    ticking = asyncio.create_task(ticker())
    stream = make_model(server).stream(user("hi"), [], None)
    assert await anext(stream) == TextDelta("first")
    assert await asyncio.to_thread(server.hang_started.wait, 2)
    before = ticks
    await asyncio.sleep(0.1)  # the stream hangs in its thread; the loop keeps running
    assert ticks > before + 5
    started = time.monotonic()
    await stream.aclose()
    # blocked, it would wait for its thread, stuck on the hung stream: never in 10 s
    assert time.monotonic() - started < 10, "closing blocked the event loop"
    ticking.cancel()
    assert await asyncio.to_thread(server.client_hung_up.wait, 60)
    deadline = time.monotonic() + 60
    while any(t.name == "interlude-bedrock" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the worker thread did not end"
        await asyncio.sleep(0.01)


# --- the full agent: interrupt before the tool, then resume ---------------------------------


def test_agent_run_with_interrupt_and_resume(server: BedrockServer, assert_valid: Any) -> None:
    server.add(
        tool_reply(("t1", "send", ['{"to": "bob"}']), text="Sending."), text_reply("Sent to bob.")
    )
    sent: list[str] = []

    @tool
    def send(to: str) -> str:
        """Send a message."""
        sent.append(to)
        return f"sent to {to}"

    def approve(event: BeforeToolCallEvent) -> None:
        if event.interrupt("approve", reason={"tool": event.tool_use.name}) is not True:
            event.cancel("not approved")

    agent = Agent(make_model(server), tools=[send])
    agent.hooks.add_callback(BeforeToolCallEvent, approve)
    paused = agent("send it")
    assert paused.stop_reason == "interrupt" and sent == []
    assert len(server.requests) == 1
    final = agent.resume({paused.interrupts[0].id: True})
    assert final.stop_reason == "end_turn" and final.message.text == "Sent to bob."
    assert sent == ["bob"]
    assert len(server.requests) == 2
    [result] = server.requests[1].body["messages"][-1]["content"]
    assert result["toolResult"]["content"] == [{"text": "sent to bob"}]
    assert_valid(agent)


# --- configuration ---------------------------------------------------------------------------


def test_from_env_needs_a_region(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="AWS_REGION"):
        BedrockModel.from_env(MODEL_ID)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert BedrockModel.from_env(MODEL_ID).client.meta.region_name == "eu-west-1"
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    model = BedrockModel.from_env(MODEL_ID)
    assert model.client.meta.region_name == "us-west-2" and model.model_id == MODEL_ID


def test_agent_model_string_resolves_and_runs(
    server: BedrockServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.url)
    server.add(text_reply("hello from the string"))
    agent = Agent(model=f"bedrock:{MODEL_ID}")
    assert isinstance(agent.model, BedrockModel) and agent.model.model_id == MODEL_ID
    assert agent("hi").message.text == "hello from the string"
    assert server.requests[0].model_id == MODEL_ID


def test_agent_model_string_without_region_names_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="AWS_REGION"):
        Agent(model=f"bedrock:{MODEL_ID}")


def test_importing_interlude_does_not_import_boto3() -> None:
    code = textwrap.dedent("""
        import sys
        import interlude, interlude.models
        loaded = [m for m in ("boto3", "botocore") if m in sys.modules]
        assert not loaded, loaded
    """)
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=30)


def _usage(i: int, o: int) -> Any:
    from interlude import Usage

    return Usage(i, o)


def test_unsigned_reasoning_is_not_sent_back(server: BedrockServer) -> None:
    """Bedrock refuses reasoningText without a signature (e.g. DeepSeek-R1's): it is dropped."""

    @tool
    def lookup(q: str) -> str:
        """Look up."""
        return "42"

    server.add(
        StreamReply(
            events(
                ("reasoning", (["Let me ", "look"], None)),
                ("tool", ("t1", "lookup", ['{"q":', '"x"}'])),
                stop="tool_use",
            )
        ),
        text_reply("done"),
    )
    model = BedrockModel("us.deepseek.r1-v1:0", region_name="us-east-1", endpoint_url=server.url)
    agent = Agent(model, tools=[lookup])
    assert agent("go").message.text == "done"
    assert agent.messages[1].content[0] == Reasoning("Let me look")
    sent = server.requests[1].body["messages"][1]
    assert sent == {
        "role": "assistant",
        "content": [{"toolUse": {"toolUseId": "t1", "name": "lookup", "input": {"q": "x"}}}],
    }


@pytest.mark.parametrize(
    ("model_id", "with_status"),
    [
        (MODEL_ID, True),
        ("anthropic.claude-3-haiku-20240307-v1:0", True),
        ("arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-v2", True),
        ("us.amazon.nova-pro-v1:0", False),
        ("meta.llama3-1-70b-instruct-v1:0", False),
        ("mistral.mistral-large-2407-v1:0", False),
    ],
)
async def test_tool_result_status_only_for_models_that_take_it(
    server: BedrockServer, model_id: str, with_status: bool
) -> None:
    messages = [
        Message("user", [Text("go")]),
        Message("assistant", [ToolUse(f"t{i}", "f", {}) for i in range(4)]),
        Message(
            "user",
            [
                ToolResult("t0", "success", [Text("fine")]),
                ToolResult("t1", "error", [Text("boom")]),
                ToolResult("t2", "error", []),
                ToolResult("t3", "error", [Json({"code": 7})]),
            ],
        ),
    ]
    server.add(text_reply("ok"))
    model = BedrockModel(model_id, region_name="us-east-1", endpoint_url=server.url)
    await collect(model, messages)
    results = [b["toolResult"] for b in server.requests[0].body["messages"][2]["content"]]
    if with_status:
        assert [r["status"] for r in results] == ["success", "error", "error", "error"]
        assert results[1]["content"] == [{"text": "boom"}]
        assert results[2]["content"] == [{"text": "(no output)"}]
    else:
        assert all("status" not in r for r in results)
        assert [r["content"] for r in results] == [
            [{"text": "fine"}],
            [{"text": "Error: boom"}],
            [{"text": "Error: the tool call failed"}],
            [{"text": "Error: the tool call failed"}, {"json": {"code": 7}}],
        ]


def test_redacted_reasoning_is_kept_and_sent_back(server: BedrockServer) -> None:
    """Encrypted reasoning (redactedContent, a blob: base64 on the wire) survives the loop."""
    import base64

    secret = b"\x00encrypted\xff"
    wire = base64.b64encode(secret).decode()
    frames = [
        Frame("messageStart", {"role": "assistant"}),
        Frame(
            "contentBlockDelta",
            {"contentBlockIndex": 0, "delta": {"reasoningContent": {"redactedContent": wire}}},
        ),
        Frame("contentBlockStop", {"contentBlockIndex": 0}),
        *events(("text", ["ok"]))[1:],
    ]
    server.add(StreamReply(frames), text_reply("again"))
    agent = Agent(make_model(server))
    agent("think")
    assert agent.messages[1].content[0] == Reasoning("", redacted=wire)
    agent("more")
    sent = server.requests[1].body["messages"][1]["content"][0]
    assert sent == {"reasoningContent": {"redactedContent": wire}}


# --- hardening: unparseable events, overflow, stop reason ----------------------------------------


async def test_empty_content_block_start_is_a_text_block(server):
    frames = events(("text", ["Hel", "lo"]))
    frames.insert(1, Frame("contentBlockStart", {"contentBlockIndex": 0, "start": {}}))
    server.add(StreamReply(frames))
    got = await collect(make_model(server), user("hi"))
    assert got[:2] == [TextDelta("Hel"), TextDelta("lo")]
    assert isinstance(got[-1], ModelStop) and got[-1].stop_reason == "end_turn"


async def test_an_event_botocore_cannot_parse_is_a_provider_error(server):
    frames = events(("text", ["Hel"]))
    frames.insert(2, Frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {}}))
    server.add(StreamReply(frames))
    got: list[Any] = []
    with pytest.raises(ModelProviderError) as info:
        async for event in make_model(server).stream(user("hi"), [], None):
            got.append(event)
    assert got == [TextDelta("Hel")] and "could not parse" in str(info.value)


async def test_gateway_context_overflow(server):
    server.add(ErrorReply(400, "ValidationException", "The request has too many tokens: 300000"))
    with pytest.raises(ContextWindowOverflowError):
        await collect(make_model(server), user("long"))


async def test_reply_with_tool_uses_stops_with_tool_use_even_if_end_turn(server):
    server.add(StreamReply(events(("tool", ("t1", "get_weather", ['{"city": "Oslo"}'])))))
    got = await collect(make_model(server), user("hi"))
    assert isinstance(got[-1], ModelStop) and got[-1].stop_reason == "tool_use"
