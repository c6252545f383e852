"""Spans of model calls to real provider clients (loopback servers that speak their wire
formats): who serves an OpenAI-compatible model, and one ``chat`` span per call where the
provider's SDK traces itself too."""

from __future__ import annotations

import interlude.otel
from interlude import Agent
from interlude.models.anthropic import AnthropicModel
from interlude.models.openai import OpenAIModel
from tests.models.anthropic_server import AnthropicServer, text_turn
from tests.models.openai_server import OpenAIServer, text_reply

from .conftest import Traces

_TOKENS = "gen_ai.usage.output_tokens"


def test_an_openai_compatible_server_is_openai_at_its_address_or_as_given(traces: Traces) -> None:
    """OpenTelemetry's GenAI conventions: the provider is ``openai`` (the API it speaks) unless
    told otherwise, and the server is ``server.address`` / ``server.port``; never the host and
    port as a provider name."""
    server = OpenAIServer().start()
    try:
        server.add(text_reply("hi"), text_reply("hi"))
        plain = Agent(OpenAIModel("local-llm", base_url=server.base_url))
        named = Agent(OpenAIModel("local-llm", base_url=server.base_url, provider="vllm"))
        for agent in (plain, named):
            interlude.otel.instrument(agent, tracer_provider=traces.provider)
            agent("hello")
    finally:
        server.stop()
    host, port = server.base_url.split("/")[2].rsplit(":", 1)
    chats = [dict(s.attributes or {}) for s in traces.spans() if s.name.startswith("chat")]
    assert [c.get("gen_ai.provider.name") for c in chats] == ["openai", "vllm"]
    assert [(c.get("server.address"), c.get("server.port")) for c in chats] == [
        (host, int(port)),
        (host, int(port)),
    ]


def test_a_model_call_is_one_chat_span_though_the_anthropic_sdk_traces_itself(
    traces: Traces,
) -> None:
    with AnthropicServer() as server:
        server.queue(text_turn("hi", input_tokens=5, output_tokens=3))
        server.queue(text_turn("hi", input_tokens=5, output_tokens=3))
        sdk_tracing = {"open_telemetry": {"tracer_provider": traces.provider}}
        model = AnthropicModel(
            "claude-test",
            client_args={"api_key": "sk-ant-test", "base_url": server.url, **sdk_tracing},
        )
        untraced = Agent(model)
        untraced("hello")  # Interlude does not trace this agent: the SDK's span stays
        sdk_only = [s for s in traces.spans() if dict(s.attributes or {}).get(_TOKENS)]
        assert len(sdk_only) == 1
        traces.clear()
        traced = Agent(model)
        interlude.otel.instrument(traced, tracer_provider=traces.provider)
        traced("hello")
    counted = [  # the model call's spans that count tokens (the run's span sums them)
        s
        for s in traces.spans()
        if s.name != "invoke_agent" and dict(s.attributes or {}).get(_TOKENS) is not None
    ]
    assert [s.name for s in counted] == ["chat claude-test"], [s.name for s in traces.spans()]
    assert counted[0].instrumentation_scope.name == interlude.otel.TRACER_NAME
